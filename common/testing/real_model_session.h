// The real test model (testing::RealModel: stories260k, else the project's test model)
// quantized at its own run config, for the tests that check a session of it: the config
// with the model's paths and a short calibration, and the session options a run config
// maps onto (as job::SessionOptionsFrom does; tests cannot include job/).
#ifndef WINDQUANT_COMMON_TESTING_REAL_MODEL_SESSION_H_
#define WINDQUANT_COMMON_TESTING_REAL_MODEL_SESSION_H_

#include "absl/status/statusor.h"
#include "common/config/run_config.h"
#include "common/quant/session_options.h"
#include "common/testing/test_paths.h"

namespace windquant::testing {

// `m`'s run config, calibrated on `samples` x `seq_len` tokens of its text, which is
// also the held-out text.
inline absl::StatusOr<config::RunConfig> RealModelRunConfig(const TestModel& m, int samples,
                                                            int seq_len) {
  absl::StatusOr<config::RunConfig> c = config::LoadRunConfig(m.config);
  if (!c.ok()) return c.status();
  c->model.dir = m.dir;
  c->calibration.text = m.text_path;
  c->evaluation.heldout.text = m.text_path;
  c->calibration.samples = samples;
  c->calibration.seq_len = seq_len;
  return c;
}

// The session of run config `c`, without the fit cache.
inline quant::SessionOptions SessionOptionsOf(const config::RunConfig& c) {
  quant::SessionOptions so;
  so.model_dir = c.model.dir;
  so.calibration = c.calibration;
  so.units = c.quant;
  so.compensation = c.quant.compensation;
  so.heldout = c.evaluation.heldout;
  so.context = c.evaluation.context;
  so.batch = c.evaluation.batch;
  so.use_cache = false;
  return so;
}

}  // namespace windquant::testing

#endif  // WINDQUANT_COMMON_TESTING_REAL_MODEL_SESSION_H_
