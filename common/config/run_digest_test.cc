#include "common/config/run_digest.h"

#include "common/config/run_config.h"
#include "gtest/gtest.h"

namespace windquant::config {
namespace {

TEST(RunFingerprintTest, IgnoresOutputKeysOnly) {
  RunConfig a;
  RunConfig b = a;
  b.output.dir = "elsewhere";
  b.model.threads = 3;
  b.service.stages = 4;
  b.training.checkpoint_every_updates = 9;
  EXPECT_EQ(RunFingerprint("table", a), RunFingerprint("table", b));
  EXPECT_EQ(RunConfigDigest(a), RunConfigDigest(b));
  b.ppo.learning_rate = 0.1;
  EXPECT_NE(RunFingerprint("table", a), RunFingerprint("table", b));
  EXPECT_NE(RunConfigDigest(a), RunConfigDigest(b));
  EXPECT_NE(RunFingerprint("table", a), RunFingerprint("other", a));
}

// A bfloat16 run is another run; a float32 run is the run it was before the key existed.
TEST(RunFingerprintTest, Bfloat16ComputeIsAnotherRun) {
  RunConfig a;
  EXPECT_EQ(RunDefiningText(a).find("model.compute_dtype"), std::string::npos);
  RunConfig b = a;
  b.model.compute.dtype = model::ComputeDtype::kBFloat16;
  EXPECT_NE(RunDefiningText(b).find("model.compute_dtype=bfloat16\n"), std::string::npos);
  EXPECT_NE(RunFingerprint("table", a), RunFingerprint("table", b));
  EXPECT_NE(RunConfigDigest(a), RunConfigDigest(b));
}

TEST(RunFingerprintTest, TheVariantDigestIgnoresTheSeedsOnly) {
  RunConfig a;
  RunConfig b = a;
  b.training.seed = 11;
  b.calibration.seed = 12;
  b.output.dir = "elsewhere";
  EXPECT_EQ(VariantDigest(a), VariantDigest(b));
  EXPECT_NE(RunConfigDigest(a), RunConfigDigest(b));  // the seeds make another run
  b.training.episodes_per_update += 1;
  EXPECT_NE(VariantDigest(a), VariantDigest(b));
}

TEST(RunFingerprintTest, TheConfigFormIsTheTextForm) {
  RunConfig c;
  c.curriculum.target_bits = {3.0, 2.5};
  EXPECT_EQ(RunFingerprint("t", c), RunFingerprint("t", RunDefiningText(c)));
  EXPECT_NE(RunDefiningText(c).find("curriculum.target_bits=[3,2.5]\n"), std::string::npos);
  EXPECT_EQ(RunDefiningText(c).find("output.dir="), std::string::npos);
}

}  // namespace
}  // namespace windquant::config
