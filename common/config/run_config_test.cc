#include "common/config/run_config.h"

#include <tuple>
#include <vector>

#include "common/config/run_digest.h"
#include "common/quant/granularity.h"
#include "gtest/gtest.h"

namespace windquant::config {
namespace {

constexpr char kMinimal[] = R"(
model: {dir: m}
calibration: {text: c.txt}
evaluation: {selection: {text: s.txt}, heldout: {text: h.txt}}
)";

// One file for all three roles, split by token ranges.
constexpr char kOneFile[] = R"(
model: {dir: m}
calibration: {text: t.txt, tokens: [0, 1000]}
evaluation:
  selection: {text: t.txt, tokens: [1000, 1500]}
  heldout: {text: t.txt, tokens: [1500, 0]}
)";

// The message of the error ParseRunConfig gives ("" when it accepts the config); every
// error of a config is INVALID_ARGUMENT.
std::string ErrorOf(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  auto c = ParseRunConfig(yaml, "run.yaml", overrides);
  if (c.ok()) return "";
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
  return std::string(c.status().message());
}

TEST(RunConfigTest, MinimalConfigGetsDefaults) {
  auto c = ParseRunConfig(kMinimal, "run.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model.dir, "m");
  EXPECT_EQ(c->quant.chunk_size, 256);
  EXPECT_EQ(c->env.budget_mode, "hard");
  EXPECT_EQ(c->curriculum.target_bits, std::vector<double>{2.0});
}

// quant.compensation is parsed once, to the enum every component takes.
TEST(RunConfigTest, CompensationIsParsedToItsEnum) {
  auto c = ParseRunConfig(kMinimal, "run.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->quant.compensation, quant::Compensation::kNone);
  auto g = ParseRunConfig(std::string(kMinimal) + "quant: {compensation: gptq}\n", "run.yaml");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->quant.compensation, quant::Compensation::kGptq);
}

// model.compute_dtype: float32 | bfloat16, by default bfloat16 on CUDA and float32 on
// the CPU; an explicit value wins over the device's default.
TEST(RunConfigTest, ComputeDtypeDefaultsByDeviceAndIsParsedToItsEnum) {
  const auto dtype_of = [](const std::vector<std::string>& sets) {
    auto c = ParseRunConfig(kMinimal, "run.yaml", sets);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? c->model.compute.dtype : model::ComputeDtype::kFloat32;
  };
  EXPECT_EQ(dtype_of({}), model::ComputeDtype::kFloat32);
  EXPECT_EQ(dtype_of({"model.device=cuda"}), model::ComputeDtype::kBFloat16);
  EXPECT_EQ(dtype_of({"model.device=cuda:1"}), model::ComputeDtype::kBFloat16);
  EXPECT_EQ(dtype_of({"model.compute_dtype=bfloat16"}), model::ComputeDtype::kBFloat16);
  EXPECT_EQ(dtype_of({"model.device=cuda", "model.compute_dtype=float32"}),
            model::ComputeDtype::kFloat32);
  auto c = ParseRunConfig(kMinimal, "run.yaml", {"model.compute_dtype=bfloat16"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NE(CanonicalText(*c).find("model.compute_dtype=bfloat16\n"), std::string::npos);
}

// error-case: config.compute-dtype
TEST(RunConfigTest, RejectsABadComputeDtypeInOneLineNamingTheKey) {
  for (const std::string bad : {"fp16", "bf16", "Float32", "1"}) {
    const std::string error = ErrorOf(kMinimal, {"model.compute_dtype=" + bad});
    EXPECT_EQ(error,
              "run.yaml: model.compute_dtype: must be float32 or bfloat16, got '" + bad + "'");
    EXPECT_EQ(error.find('\n'), std::string::npos);
  }
}

// training.screen_samples: 0 and 1 are off (one sample per episode sent), K > 1 draws K.
TEST(RunConfigTest, ScreeningIsOnFromTwoSamples) {
  TrainingConfig t;
  for (const auto& [k, on, per_episode] : std::vector<std::tuple<int, bool, int>>{
           {0, false, 1}, {1, false, 1}, {2, true, 2}, {8, true, 8}}) {
    t.screen_samples = k;
    EXPECT_EQ(ScreeningOn(t), on) << k;
    EXPECT_EQ(ScreenSamplesPerEpisode(t), per_episode) << k;
  }
}

// The embedded component options keep their YAML keys and defaults.
TEST(RunConfigTest, EmbeddedOptionsReadTheirKeys) {
  auto c = ParseRunConfig(
      kMinimal, "run.yaml",
      {"quant.chunk_size=64", "quant.salient_fraction=0.01", "service.max_message_bytes=1024",
       "service.tls.ca_file=ca.pem", "calibration.seed=5"});
  ASSERT_TRUE(c.ok()) << c.status();
  const quant::UnitTableOptions& units = c->quant;
  EXPECT_EQ(units.chunk_size, 64);
  EXPECT_EQ(units.salient_fraction, 0.01);
  const net::PeerOptions& peer = c->service;
  EXPECT_EQ(peer.max_message_bytes, 1024);
  EXPECT_EQ(peer.rpc_deadline_ms, 30000);
  EXPECT_EQ(peer.tls.ca_file, "ca.pem");
  EXPECT_EQ(c->calibration.seed, 5u);
  EXPECT_EQ(c->calibration.range().text, "c.txt");
}

TEST(RunConfigTest, ReadsNestedValuesAndLists) {
  auto c = ParseRunConfig(std::string(kMinimal) + R"(
quant: {chunk_size: 32, salient_fraction: 0.01}
curriculum: {target_bits: [3.0, 2.5, 2.0]}
ppo: {hidden: [64, 32], clip_ratio: 0.1}
service: {tls: {bearer_token_file: /t}}
)",
                          "run.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->quant.chunk_size, 32);
  EXPECT_DOUBLE_EQ(c->quant.salient_fraction, 0.01);
  EXPECT_EQ(c->curriculum.target_bits, (std::vector<double>{3.0, 2.5, 2.0}));
  EXPECT_EQ(c->ppo.hidden, (std::vector<int>{64, 32}));
  EXPECT_EQ(c->service.tls.bearer_token_file, "/t");
}

TEST(RunConfigTest, UnknownKeyNamesItsPath) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "quant: {chunk_sise: 3}\n"),
            "run.yaml: unknown key quant.chunk_sise");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "bogus: 1\n"), "run.yaml: unknown key bogus");
}

TEST(RunConfigTest, WrongTypeNamesKeyAndValue) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "quant: {chunk_size: big}\n"),
            "run.yaml: quant.chunk_size: expected an integer, got 'big'");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "curriculum: {target_bits: 2}\n"),
            "run.yaml: curriculum.target_bits: expected a list");
}

TEST(RunConfigTest, OutOfRangeNamesKey) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "ppo: {clip_ratio: 1.5}\n"),
            "run.yaml: ppo.clip_ratio: must be in (0, 1)");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "curriculum: {target_bits: [2.0, 0.5]}\n"),
            "run.yaml: curriculum.target_bits[1]: must be in [1, 16]");
  EXPECT_EQ(ErrorOf(kMinimal, {"training.screen_samples=-1"}),
            "run.yaml: training.screen_samples: must be in [0, 1024]");
  EXPECT_EQ(ErrorOf(kMinimal, {"training.screen_samples=128"}), "");
  EXPECT_EQ(ErrorOf(kMinimal, {"lagrange.prices=bits"}),
            "run.yaml: lagrange.prices: must be quality, budget or target");
  EXPECT_EQ(ErrorOf(kMinimal, {"lagrange.prices=budget"}),
            "run.yaml: lagrange.prices: budget needs env.budget_mode soft or repair (hard never "
            "exceeds the budget)");
  EXPECT_EQ(ErrorOf(kMinimal, {"lagrange.prices=budget", "env.budget_mode=soft"}), "");
  EXPECT_EQ(ErrorOf(kMinimal, {"lagrange.prices=budget", "env.budget_mode=repair"}), "");
  EXPECT_EQ(ErrorOf(kMinimal, {"env.budget_mode=masked"}),
            "run.yaml: env.budget_mode: must be hard, soft or repair");
  EXPECT_EQ(ErrorOf(kMinimal, {"env.budget_mode=repair", "env.repair_order=walk"}), "");
  EXPECT_EQ(ErrorOf(kMinimal, {"env.repair_order=last"}),
            "run.yaml: env.repair_order: must be proxy or walk");
  EXPECT_EQ(ErrorOf(kMinimal, {"quant.compensation=GPTQ"}),
            "run.yaml: quant.compensation: must be none or gptq, got 'GPTQ'");
  EXPECT_EQ(ErrorOf("calibration: {text: c}\n"
                    "evaluation: {selection: {text: s}, heldout: {text: h}}\n"),
            "run.yaml: model.dir: is required");
}

// error-case: config.output-store-scheme
// error-case: config.output-run-id
TEST(RunConfigTest, OutputStoreAndRunIdAreCheckedNamingTheKey) {
  EXPECT_EQ(ErrorOf(kMinimal, {"output.store=http://bucket"}),
            "run.yaml: output.store: must be file:///abs/path, s3://bucket[/prefix] or a path");
  EXPECT_EQ(ErrorOf(kMinimal, {"output.run_id=a/b"}),
            "run.yaml: output.run_id: must be up to 100 of [A-Za-z0-9._-], no '..'");
  EXPECT_EQ(ErrorOf(kMinimal, {"output.run_id=a..b"}),
            "run.yaml: output.run_id: must be up to 100 of [A-Za-z0-9._-], no '..'");
  auto c =
      ParseRunConfig(kMinimal, "run.yaml",
                     {"output.store=s3://b/p", "output.run_id=r-1.2_x", "output.export=false"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->output.store, "s3://b/p");
  EXPECT_EQ(c->output.run_id, "r-1.2_x");
  EXPECT_FALSE(c->output.export_model);
  EXPECT_TRUE(ParseRunConfig(kMinimal, "run.yaml")->output.store.empty()) << "no store by default";
}

TEST(RunConfigTest, OverridesApplyBeforeValidation) {
  auto c = ParseRunConfig(kMinimal, "run.yaml", {"quant.chunk_size=64", "env.budget_mode=soft"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->quant.chunk_size, 64);
  EXPECT_EQ(c->env.budget_mode, "soft");
  EXPECT_EQ(ErrorOf(kMinimal, {"quant.chunk_sise=64"}), "run.yaml: unknown key quant.chunk_sise");
  EXPECT_NE(ErrorOf(kMinimal, {"nonsense"}).find("expected key.path=value"), std::string::npos);
}

TEST(RunConfigTest, InvalidYamlNamesLine) {
  EXPECT_NE(ErrorOf("model: [\n").find("run.yaml: invalid YAML at line"), std::string::npos);
}

TEST(RunConfigTest, CanonicalTextChangesWithAnyField) {
  auto a = ParseRunConfig(kMinimal, "run.yaml");
  auto b = ParseRunConfig(kMinimal, "run.yaml", {"ppo.entropy_coef=0.02"});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(CanonicalText(*a), CanonicalText(*b));
  EXPECT_NE(CanonicalText(*a).find("quant.chunk_size=256\n"), std::string::npos);
}

// quant.granularity: tensor is resolved into quant.chunk_size (one unit per linear),
// whatever chunk_size the file gives; the config prints and digests the chunk size alone,
// so chunk-granular configs keep their text and digest, and the two spellings of a
// tensor-granular run are one run.
TEST(RunConfigTest, TensorGranularityIsOneChunkWiderThanAnyLinear) {
  auto chunk = ParseRunConfig(kMinimal, "run.yaml", {"quant.chunk_size=64"});
  auto named =
      ParseRunConfig(kMinimal, "run.yaml", {"quant.chunk_size=64", "quant.granularity=chunk"});
  auto tensor =
      ParseRunConfig(kMinimal, "run.yaml", {"quant.chunk_size=64", "quant.granularity=tensor"});
  auto wide = ParseRunConfig(kMinimal, "run.yaml", {"quant.chunk_size=1073741824"});
  ASSERT_TRUE(chunk.ok() && named.ok() && tensor.ok() && wide.ok()) << tensor.status();
  EXPECT_EQ(chunk->quant.chunk_size, 64);
  EXPECT_EQ(tensor->quant.chunk_size, quant::kTensorChunkSize);
  EXPECT_EQ(quant::GranularityOf(tensor->quant.chunk_size), quant::Granularity::kTensor);
  EXPECT_EQ(quant::GranularityOf(chunk->quant.chunk_size), quant::Granularity::kChunk);
  EXPECT_EQ(CanonicalText(*chunk), CanonicalText(*named));
  EXPECT_EQ(CanonicalText(*chunk).find("granularity"), std::string::npos);
  EXPECT_NE(CanonicalText(*tensor).find("quant.chunk_size=1073741824\n"), std::string::npos);
  EXPECT_EQ(RunConfigDigest(*tensor), RunConfigDigest(*wide));
  EXPECT_NE(RunConfigDigest(*tensor), RunConfigDigest(*chunk));
}

// error-case: config.granularity
TEST(RunConfigTest, BadGranularityAndChunkSizeAreRefusedNamingTheKey) {
  EXPECT_EQ(ErrorOf(kMinimal, {"quant.granularity=row"}),
            "run.yaml: quant.granularity: must be chunk or tensor, got 'row'");
  EXPECT_EQ(ErrorOf(kMinimal, {"quant.chunk_size=0"}),
            "run.yaml: quant.chunk_size: must be in [1, 1073741824] (quant.granularity: tensor "
            "for one unit per linear)");
  EXPECT_EQ(ErrorOf(kMinimal, {"quant.chunk_size=1073741825"}),
            "run.yaml: quant.chunk_size: must be in [1, 1073741824] (quant.granularity: tensor "
            "for one unit per linear)");
}

TEST(RunConfigTest, ResolvesRelativePathsAgainstBase) {
  auto c = ParseRunConfig(kMinimal, "x/run.yaml", {}, "/base/dir");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->model.dir, "/base/dir/m");
  EXPECT_EQ(c->evaluation.selection.text, "/base/dir/s.txt");
  EXPECT_EQ(c->evaluation.heldout.text, "/base/dir/h.txt");
  EXPECT_EQ(c->calibration.text, "/base/dir/c.txt");
}

TEST(RunConfigTest, OneFileSplitByDisjointRangesIsAccepted) {
  auto c = ParseRunConfig(kOneFile, "run.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->calibration.tokens, (std::vector<int64_t>{0, 1000}));
  EXPECT_EQ(c->evaluation.selection.tokens, (std::vector<int64_t>{1000, 1500}));
  EXPECT_EQ(c->evaluation.heldout.tokens, (std::vector<int64_t>{1500, 0}));
  // Separate files never overlap, whatever their ranges.
  EXPECT_TRUE(ParseRunConfig(kMinimal, "run.yaml").ok());
}

TEST(RunConfigTest, OverlappingTextRolesNameBothKeys) {
  EXPECT_EQ(ErrorOf(kOneFile, {"evaluation.heldout.tokens=[1400, 0]"}),
            "run.yaml: evaluation.heldout.tokens [1400, end) overlaps evaluation.selection.tokens "
            "[1000, 1500) of the same text t.txt (calibration, selection and held-out text must "
            "be disjoint)");
  // An open end reaches every later range.
  EXPECT_NE(ErrorOf(kOneFile, {"calibration.tokens=[0, 0]"})
                .find("evaluation.selection.tokens [1000, 1500) overlaps calibration.tokens "
                      "[0, end)"),
            std::string::npos);
  // The same file under another spelling is the same text.
  EXPECT_NE(ErrorOf(kOneFile,
                    {"evaluation.heldout.text=./x/../t.txt", "evaluation.heldout.tokens=[0, 10]"})
                .find("evaluation.heldout.tokens [0, 10) overlaps calibration.tokens"),
            std::string::npos);
  // The default range (the whole file) of two roles on one file.
  EXPECT_NE(ErrorOf(kMinimal, {"evaluation.heldout.text=s.txt"})
                .find("evaluation.heldout.tokens [0, end) overlaps evaluation.selection.tokens "
                      "[0, end)"),
            std::string::npos);
}

TEST(RunConfigTest, TokenRangesAreChecked) {
  EXPECT_EQ(ErrorOf(kOneFile, {"evaluation.selection.tokens=[1500, 1000]"}),
            "run.yaml: evaluation.selection.tokens: expected 0 <= begin < end, or end 0 (= end of "
            "text)");
  EXPECT_EQ(ErrorOf(kOneFile, {"calibration.tokens=[5]"}),
            "run.yaml: calibration.tokens: expected [begin, end] (end 0 = end of text)");
}

TEST(RunConfigTest, RetiredEvaluationKeysSayWhatReplacedThem) {
  EXPECT_EQ(ErrorOf(kMinimal, {"evaluation.eval_slice_tokens=8160"}),
            "run.yaml: evaluation.eval_slice_tokens: replaced by evaluation.selection.tokens "
            "([begin, end])");
  EXPECT_NE(ErrorOf(kMinimal, {"evaluation.text=e.txt"}).find("evaluation.text: replaced by"),
            std::string::npos);
}

}  // namespace
}  // namespace windquant::config
