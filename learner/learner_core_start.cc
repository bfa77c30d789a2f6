// LearnerCore's start (learner_core.h): the table's completion, and with
// options.await_start the quality-target mode's start (run_start.h) it waits
// for, kept in output.dir/rl_start.json. The rest of the class is in
// learner_core.cc.
#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/config/run_digest.h"
#include "learner/learner_core.h"

namespace windquant::learner {
namespace {

std::string StartPath(const LearnerCore::Options& o) { return o.dir + "/rl_start.json"; }

}  // namespace

absl::Status LearnerCore::CompleteTable() {
  const plan::UnitTable& table = *tables_.table();
  run_fingerprint_ = config::RunFingerprint(table.fingerprint, options_.run_config_text);
  WQ_RETURN_IF_ERROR(policy_->SetTable(table));
  if (options_.await_start) {
    absl::StatusOr<RunStart> kept = ReadRunStart(StartPath(options_), run_fingerprint_);
    if (kept.ok()) {
      ApplyStart(*kept);
      Log(absl::StrCat("learner: RL starts under ", kept->cap_bits, " bits, as this run did (",
                       StartPath(options_), ")"));
    } else if (absl::IsDataLoss(kept.status())) {
      Log(absl::StrCat("learner: ", kept.status().message(), "; removed, searched again"));
      std::error_code ec;
      std::filesystem::remove(StartPath(options_), ec);
    } else if (!absl::IsNotFound(kept.status())) {
      return kept.status();
    }
    if (!start_.has_value()) {
      Log("learner: unit table complete; the run waits for its start (the quality-target "
          "mode's bisection to epsilon through the evaluator)");
      return absl::OkStatus();
    }
  }
  return BeginRun();
}

bool LearnerCore::AwaitingStart() const {
  absl::MutexLock lock(&mu_);
  return options_.await_start && tables_.table() != nullptr && !start_.has_value();
}

std::optional<RunStart> LearnerCore::start() const {
  absl::MutexLock lock(&mu_);
  return start_;
}

absl::Status LearnerCore::StartAt(const RunStart& start) {
  absl::MutexLock lock(&mu_);
  if (!options_.await_start || tables_.table() == nullptr || start_.has_value()) {
    return absl::FailedPreconditionError(
        "learner: StartAt: the run is not waiting for its start (no await_start, the table "
        "incomplete or the start decided)");
  }
  if (!(start.cap_bits > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("learner: StartAt: cap_bits ", start.cap_bits, " is not positive"));
  }
  WQ_RETURN_IF_ERROR(WriteRunStart(StartPath(options_), run_fingerprint_, start));
  ApplyStart(start);
  Log(absl::StrCat("learner: RL starts under ", start.cap_bits, " bits (the run's cap ",
                   options_.curriculum.target_bits.back(), ")"));
  const absl::Status begun = BeginRun();
  if (!begun.ok()) start_.reset();  // still waiting: the node's search runs again
  PublishLocked();
  return begun;
}

void LearnerCore::ApplyStart(const RunStart& start) {
  start_ = start;
  rl::CurriculumOptions capped = options_.curriculum;
  for (double& t : capped.target_bits) t = std::min(t, start.cap_bits);
  curriculum_ = CurriculumProgress(capped);
  best_.CapFinalTarget(start.cap_bits);
}

}  // namespace windquant::learner
