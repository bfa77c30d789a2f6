// The text of `windquant plans list`: every run of a store, newest first,
// each with its plans newest first (bits, perplexity and what it was measured
// on, the exported model's perplexity when there is one, source, size,
// creation time), then the plans outside runs (plans/<id>/).
//   run <id>  <state>  model <m>  target <b> bits  <n> updates  created <t>
//     <id>/<plan>  bits <b>  ppl <p> (<on>)[  exported ppl <x>]  <source>  <n> bytes  <t>
// Stateless; thread-compatible (reads the store through the repositories).
#ifndef WINDQUANT_COMMON_STORE_RUN_LISTING_H_
#define WINDQUANT_COMMON_STORE_RUN_LISTING_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/store/artifact_store.h"

namespace windquant::store {

// The store's errors (a run.json or manifest that cannot be read or parsed).
absl::StatusOr<std::string> FormatRunListing(ArtifactStore& store);

}  // namespace windquant::store

#endif  // WINDQUANT_COMMON_STORE_RUN_LISTING_H_
