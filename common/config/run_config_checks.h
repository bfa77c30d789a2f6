// The checks of a parsed RunConfig (run_config.cc parses, these validate), each error
// naming the key path: the values of every section, and the disjointness of the text
// roles once their paths are resolved.
#ifndef WINDQUANT_COMMON_CONFIG_RUN_CONFIG_CHECKS_H_
#define WINDQUANT_COMMON_CONFIG_RUN_CONFIG_CHECKS_H_

#include "absl/status/status.h"
#include "common/config/run_config.h"

namespace windquant::config {

// Every section's values (model, texts, quant, env, lagrange, ppo, schedule, output,
// service). INVALID_ARGUMENT "key.path: what is wrong".
absl::Status ValidateRunConfig(const RunConfig& c);

// Calibration, selection and held-out text must not share a token (paths resolved).
absl::Status CheckDisjointTextRoles(const RunConfig& c);

}  // namespace windquant::config

#endif  // WINDQUANT_COMMON_CONFIG_RUN_CONFIG_CHECKS_H_
