// Bad requests to the learner change nothing: a unit table the run cannot use
// is refused before it is kept (in memory or in unit_table.pb), a restarted
// learner names a bad unit_table.pb, and an evaluation whose reward is not
// finite leaves the episode held. Each case asserts the status code, the
// culprit in the message and the state after it.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/base/files.h"
#include "common/testing/status_matchers.h"
#include "learner/learner_core_test_fixture.h"
#include "learner/learner_service.h"
#include "learner/table_merger.h"

namespace windquant::learner {
namespace {

using ::testing::HasSubstr;
using ::windquant::learner::testing::LearnerCoreTest;
using ::windquant::learner::testing::Stages;
using ::windquant::learner::testing::TestOptions;
using ::windquant::testing::IsOk;
using ::windquant::testing::StatusIs;

class LearnerBadInputTest : public LearnerCoreTest {
 protected:
  std::string TablePath() const { return dir_ + "/unit_table.pb"; }
  bool TableFileExists() const {
    std::error_code ec;
    return std::filesystem::exists(std::filesystem::symlink_status(TablePath(), ec));
  }
  grpc::Status Register(LearnerService& service, int stage, const plan::UnitTable* table) {
    v1::RegisterUnitTableRequest req;
    req.set_stage(stage);
    if (table != nullptr) {
      table->ToProto(req.mutable_table());
    } else {
      req.mutable_table();  // present and empty
    }
    v1::RegisterUnitTableReply reply;
    return service.RegisterUnitTable(nullptr, &req, &reply);
  }
  bool Complete(LearnerService& service) {
    v1::RunStatus status;
    EXPECT_TRUE(service.GetRunStatus(nullptr, nullptr, &status).ok());
    return status.unit_table_complete();
  }
  // The real stages complete the table afterwards: nothing was poisoned.
  void ExpectRealStagesComplete(LearnerService& service) {
    for (const auto& s : Stages(whole_)) {
      grpc::Status st = Register(service, s.first_layer, &s);
      ASSERT_TRUE(st.ok()) << st.error_message();
    }
    EXPECT_TRUE(Complete(service));
    EXPECT_TRUE(TableFileExists());
  }
};

// error-case: learner.register.empty-table
TEST_F(LearnerBadInputTest, EmptyTableIsRefusedAndNothingIsWritten) {
  LearnerService service(core_.get());
  for (int stage : {0, 1}) {
    grpc::Status s = Register(service, stage, nullptr);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("table: layers [0, 0) of 0 hold no layer"));
    EXPECT_EQ(s.error_message().find('\n'), std::string::npos);
  }
  EXPECT_FALSE(Complete(service));
  EXPECT_FALSE(TableFileExists());
  ExpectRealStagesComplete(service);
}

// error-case: learner.register.missing-table
TEST_F(LearnerBadInputTest, MissingTableIsRefused) {
  LearnerService service(core_.get());
  v1::RegisterUnitTableRequest req;
  v1::RegisterUnitTableReply reply;
  grpc::Status s = service.RegisterUnitTable(nullptr, &req, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("table: missing"));
  EXPECT_FALSE(Complete(service));
}

// error-case: learner.register.layer-without-units
TEST_F(LearnerBadInputTest, StageWithALayerWithoutUnitsIsRefusedWhenItWouldCompleteTheTable) {
  LearnerService service(core_.get());
  auto stages = Stages(whole_);
  ASSERT_TRUE(Register(service, 1, &stages[1]).ok());
  plan::UnitTable hollow = stages[0];
  hollow.units.clear();
  grpc::Status s = Register(service, 0, &hollow);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("layer 0 has no units"));
  EXPECT_FALSE(Complete(service));
  EXPECT_FALSE(TableFileExists());
  ExpectRealStagesComplete(service);
}

// error-case: learner.register.empty-fingerprint
TEST_F(LearnerBadInputTest, TableWithoutFingerprintIsRefused) {
  LearnerService service(core_.get());
  plan::UnitTable t = Stages(whole_)[0];
  t.fingerprint.clear();
  grpc::Status s = Register(service, 0, &t);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("table.model_fingerprint: empty"));
  ExpectRealStagesComplete(service);
}

// error-case: learner.register.layer-count-mismatch
TEST_F(LearnerBadInputTest, StagesThatDisagreeOnTheLayerCountAreRefused) {
  LearnerService service(core_.get());
  auto stages = Stages(whole_);
  ASSERT_TRUE(Register(service, 1, &stages[1]).ok());
  plan::UnitTable t = stages[0];
  t.num_layers = 3;
  grpc::Status s = Register(service, 0, &t);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("table.num_layers: 3"));
  EXPECT_FALSE(TableFileExists());
  ExpectRealStagesComplete(service);
}

// An empty table (it parses) is refused naming the file; one that is not a
// UnitTable is the actors' tables lost: named in one log line, removed, and
// the learner starts without a table (the actors register theirs again).
// error-case: learner.restart.bad-unit-table-file
TEST_F(LearnerBadInputTest, RestartedLearnerNamesABadUnitTableFile) {
  core_.reset();
  ASSERT_THAT(base::WriteFileAtomic(TablePath(), ""), IsOk());
  auto again = LearnerCore::Create(TestOptions(dir_), nullptr);
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(std::string(again.status().message()), HasSubstr(TablePath()));
  EXPECT_EQ(std::string(again.status().message()).find('\n'), std::string::npos);
  ASSERT_THAT(base::WriteFileAtomic(TablePath(), std::string("\xff\xff\xff garbage", 12)), IsOk());
  std::vector<std::string> log;
  again = LearnerCore::Create(TestOptions(dir_), [&](const std::string& l) { log.push_back(l); });
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_FALSE((*again)->Status().table_complete);
  EXPECT_FALSE(TableFileExists());
  EXPECT_EQ(log, std::vector<std::string>{"learner: " + TablePath() +
                                          ": not a UnitTable; removed, the actors register again"});
}

// error-case: learner.restart.unusable-unit-table-file
TEST_F(LearnerBadInputTest, RestartedLearnerNamesAUnitTableItCannotRunOn) {
  core_.reset();
  plan::UnitTable wrong_chunk = whole_;
  wrong_chunk.chunk_size = 32;  // the run's is 16
  v1::UnitTable proto;
  wrong_chunk.ToProto(&proto);
  ASSERT_THAT(base::WriteFileAtomic(TablePath(), proto.SerializeAsString()), IsOk());
  auto again = LearnerCore::Create(TestOptions(dir_), nullptr);
  EXPECT_THAT(again.status(), StatusIs(absl::StatusCode::kInvalidArgument, "table.chunk_size"));
  EXPECT_THAT(std::string(again.status().message()), HasSubstr(TablePath()));
}

// error-case: learner.merger.validator-refuses
TEST(TableMergerValidatorTest, RefusedMergedTableIsNeitherKeptNorWritten) {
  ::windquant::testing::ScopedTestDir temp("wq-merger-validator");
  const std::string path = temp.path() + "/unit_table.pb";
  plan::UnitTable whole = windquant::testing::SyntheticTable(14, 5);
  whole.num_layers = 2;
  whole.end_layer = 2;
  auto stages = Stages(whole);
  TableMerger m(2, 1, whole.chunk_size, path);
  bool refuse = true;
  m.set_validator([&refuse](const plan::UnitTable&) {
    return refuse ? absl::FailedPreconditionError("not runnable") : absl::OkStatus();
  });
  ASSERT_THAT(m.Register(0, 0, stages[0], nullptr), IsOk());
  EXPECT_THAT(m.Register(1, 0, stages[1], nullptr),
              StatusIs(absl::StatusCode::kFailedPrecondition, "not runnable"));
  EXPECT_EQ(m.table(), nullptr);
  EXPECT_FALSE(std::filesystem::exists(path));
  refuse = false;
  auto r = m.Register(1, 0, stages[1], nullptr);
  ASSERT_THAT(r, IsOk());
  EXPECT_TRUE(r->complete);
  EXPECT_TRUE(std::filesystem::exists(path));
}

// error-case: learner.evaluation.non-finite-reward
// The evaluator does not send a refused report again: the episode is given up,
// not held forever.
TEST_F(LearnerBadInputTest, NonFiniteRewardIsRefusedAndTheEpisodeGivenUp) {
  for (const auto& s : Stages(whole_))
    ASSERT_THAT(core_->RegisterTable(s.first_layer, 0, s), IsOk());
  ASSERT_TRUE(core_->SubmitEpisode(MakeEpisode(1, 0)).value());
  EvaluationInput bad = Eval(1, 3.0);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  bad.evaluation.eval_ppl = nan;
  bad.evaluation.eval_nll = nan;
  bad.evaluation.loss_increase = nan;
  bad.evaluation.relative_ppl_increase = nan;
  bad.evaluation.effective_bits = nan;  // the reward clamps the others; not this one
  EXPECT_THAT(Report(*core_, bad),
              StatusIs(absl::StatusCode::kInvalidArgument, "reward: not finite for episode 1"));
  const LearnerStatus after = core_->Status();
  EXPECT_EQ(after.episodes, 1);
  EXPECT_EQ(after.given_up, 1);
  EXPECT_EQ(after.pending, 0);
  EXPECT_FALSE(Report(*core_, Eval(1, 3.0)).value());  // no longer held
}

// error-case: learner.evaluation.non-finite-field
TEST_F(LearnerBadInputTest, EvaluationReportFieldsAreCheckedByTheService) {
  LearnerService service(core_.get());
  struct Case {
    const char* field;
    void (*set)(v1::EvaluationReport*);
  };
  const Case cases[] = {
      {"loss", [](v1::EvaluationReport* r) { r->set_loss(std::nan("")); }},
      {"perplexity", [](v1::EvaluationReport* r) { r->set_perplexity(INFINITY); }},
      {"lambda", [](v1::EvaluationReport* r) { r->set_lambda(-INFINITY); }},
      {"reward", [](v1::EvaluationReport* r) { r->set_reward(std::nan("")); }},
      {"lambda_after", [](v1::EvaluationReport* r) { r->set_lambda_after(-1); }},
      {"lambda_batch", [](v1::EvaluationReport* r) { r->set_lambda_batch(-1); }},
      {"effective_bits", [](v1::EvaluationReport* r) { r->set_effective_bits(0); }},
      {"relative_ppl_increase", [](v1::EvaluationReport* r) { r->set_relative_ppl_increase(-2); }},
  };
  for (const Case& c : cases) {
    v1::EvaluationReport r;
    r.set_episode_id(1);
    r.set_plan_id("p1");
    r.set_perplexity(3.0);
    r.set_effective_bits(2.0);
    c.set(&r);
    v1::ReportEvaluationReply reply;
    grpc::Status s = service.ReportEvaluation(nullptr, &r, &reply);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.field;
    EXPECT_THAT(s.error_message(), HasSubstr(c.field));
  }
}

}  // namespace
}  // namespace windquant::learner
