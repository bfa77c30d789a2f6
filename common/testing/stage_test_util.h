// Test-only helpers shared by the tests of several parts (evaluator, actor service, job): where the
// real test model is, seeded random token ids, and in-process
// stages (StageWorker + LocalActivationTransport) over layer ranges.
#ifndef WINDQUANT_COMMON_TESTING_STAGE_TEST_UTIL_H_
#define WINDQUANT_COMMON_TESTING_STAGE_TEST_UTIL_H_

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/stage/stage_worker.h"
#include "common/testing/test_paths.h"
#include "common/transport/local_activation_transport.h"

namespace windquant::testing {

// The real test model (test_paths.h: stories260k from ../shared, else the project's
// default model built by the wq_test_model fixture).
inline std::string RealModelDir() { return ::windquant::testing::RealModel().dir; }

// `n` token ids in [3, 511] from a seeded generator.
inline std::vector<int32_t> RandomIds(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> d(3, 511);
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = d(rng);
  return ids;
}

// In-process stages of one replica; `stages` is what PipelineEvaluator takes.
struct LocalStages {
  // Appends the stage of layers [first, end) of `model_dir`, named "stage <i>".
  absl::Status Add(const std::string& model_dir, int64_t first, int64_t end, int64_t chunk_size) {
    stage::StageWorkerOptions o;
    o.model_dir = model_dir;
    o.first_layer = first;
    o.end_layer = end;
    o.units.chunk_size = chunk_size;
    auto w = stage::StageWorker::Create(o);
    if (!w.ok()) return w.status();
    workers.push_back(*std::move(w));
    transports.push_back(std::make_unique<transport::LocalActivationTransport>(
        workers.back().get(), "stage " + std::to_string(workers.size() - 1)));
    stages.push_back(transports.back().get());
    return absl::OkStatus();
  }

  std::vector<std::unique_ptr<stage::StageWorker>> workers;
  std::vector<std::unique_ptr<transport::LocalActivationTransport>> transports;
  std::vector<transport::ActivationTransport*> stages;
};

}  // namespace windquant::testing

#endif  // WINDQUANT_COMMON_TESTING_STAGE_TEST_UTIL_H_
