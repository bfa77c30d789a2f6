// OpenSession: the run config's model, calibration and unit table
// (quant::QuantizationSession) with its progress logged to stderr, as every
// subcommand taking --config opens it.
#ifndef WINDQUANT_JOB_OPEN_SESSION_H_
#define WINDQUANT_JOB_OPEN_SESSION_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/config/run_config.h"
#include "common/quant/quantization_session.h"

namespace windquant::job {

// fit = false: no fits unless the cache has them (SessionOptions.fit).
absl::StatusOr<std::unique_ptr<quant::QuantizationSession>> OpenSession(
    const config::RunConfig& config, bool use_cache, bool load_eval_text, bool fit = true);

}  // namespace windquant::job

#endif  // WINDQUANT_JOB_OPEN_SESSION_H_
