// Integration: `windquant baseline` on the real test model (stories260k, or the
// default model on a fresh clone) at 2.0 effective bits; the plan's bits are
// recounted independently from plan.json + UnitEffectiveBits, and its unit count
// and FP16 parameters from the model's config.json.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/base/files.h"
#include "common/config/run_config.h"
#include "common/plan/action.h"
#include "common/plan/effective_bits.h"
#include "common/testing/test_paths.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace windquant::search {
namespace {

std::string RunCommand(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *rc = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  *rc = pclose(p);
  return out;
}

// Units of chunk `chunk` columns and FP16 parameters (embeddings, norms, an untied
// head) of the model in `dir`, from config.json read as plain JSON.
struct ModelCounts {
  int64_t units = 0;
  double fixed_params = 0;
  double fixed_param_bits = 16;  // as stored: 32 for a float32 model, else 16
};
ModelCounts CountsFromConfig(const std::string& dir, int64_t chunk) {
  const nlohmann::json j = nlohmann::json::parse(*base::ReadFile(dir + "/config.json"));
  const int64_t H = j["hidden_size"], I = j["intermediate_size"], L = j["num_hidden_layers"];
  const int64_t V = j["vocab_size"], nh = j["num_attention_heads"];
  const int64_t hd = j.value("head_dim", H / nh);
  const bool tied = j.value("tie_word_embeddings", false);
  auto chunks = [&](int64_t in) { return (in + chunk - 1) / chunk; };
  // Units are column chunks of each matrix's input: q, k, v, gate, up read H, o reads
  // the attention output, down reads I.
  ModelCounts c;
  c.units = L * (5 * chunks(H) + chunks(nh * hd) + chunks(I));
  c.fixed_params = static_cast<double>(V * H * (tied ? 1 : 2) + H * (2 * L + 1));
  c.fixed_param_bits = j.value("torch_dtype", "") == "float32" ? 32 : 16;
  return c;
}

TEST(BaselineCliTest, RealModelAtTwoBitsRecountsExactly) {
  const testing::TestModel m = testing::RealModel();
  const std::string windquant = testing::BinaryDir() + "/cli/windquant";
  ASSERT_TRUE(std::filesystem::exists(windquant)) << windquant;
  const std::string tmp = ::testing::TempDir() + "/baseline_cli_test";
  std::filesystem::remove_all(tmp);
  std::filesystem::create_directories(tmp);  // --out's parent (only the leaf is created)

  for (const char* method : {"lagrange", "greedy"}) {
    const std::string out = tmp + "/" + method;
    const std::string cmd = windquant + " baseline --config " + m.config + " --method " + method +
                            " --bits 2.0 --out " + out +
                            " --json --max-tokens 4096 --set quant.cache_dir=" + tmp +
                            "/cache 2>/dev/null";
    int rc = 0;
    const std::string stdout_text = RunCommand(cmd, &rc);
    ASSERT_EQ(rc, 0) << cmd << "\n" << stdout_text;
    const auto report = nlohmann::json::parse(stdout_text);
    auto text = base::ReadFile(out + "/plan.json");
    ASSERT_TRUE(text.ok()) << text.status();
    const auto plan = nlohmann::json::parse(*text);
    ASSERT_TRUE(base::PathExists(out + "/plan.bin"));

    // Independent recount: shapes and actions from the JSON, bits from the formula.
    double bits = 0, n = 0;
    for (const auto& u : plan["units"]) {
      const int64_t rows = u["rows"], cols = u["cols"];
      auto a = plan::ParseAction(u["action"].get<std::string>());
      ASSERT_TRUE(a.ok());
      const int64_t k = plan::SalientCount(rows * cols, 0.005);
      EXPECT_EQ(u["salient"].get<int64_t>(), k);
      bits += plan::UnitEffectiveBits(rows, cols, k, *a);
      n += static_cast<double>(rows * cols);
    }
    const ModelCounts counts = CountsFromConfig(m.dir, 64);
    EXPECT_EQ(static_cast<int64_t>(plan["units"].size()), counts.units);
    if (m.stories260k) {
      EXPECT_EQ(plan["units"].size(), 45u);  // 5 layers x (1+1+1+1+1+1+3) chunks of 64
      EXPECT_EQ(counts.fixed_params, 512 * 64 + 64 * 11);
    }
    const double eff = bits / n;
    EXPECT_LE(eff, 2.0 + 1e-9) << method;
    EXPECT_GT(eff, 1.9) << method << ": the budget should be nearly spent";
    EXPECT_NEAR(plan["totals"]["effective_bits"].get<double>(), eff, 1e-12);
    EXPECT_NEAR(report["effective_bits"].get<double>(), eff, 1e-12);
    // Whole model: + each fixed parameter (embeddings, norms, untied head) at the bits of
    // the dtype it is stored in (stories260k: float32, 32 bits).
    const double fixed = counts.fixed_params;
    EXPECT_NEAR(report["whole_model_bits"].get<double>(),
                (bits + counts.fixed_param_bits * fixed) / (n + fixed), 1e-9);
    EXPECT_EQ(plan["totals"]["fixed_param_bits"].get<double>(), counts.fixed_param_bits);
    const double ppl = report["perplexity"];
    EXPECT_GT(ppl, 1.0);
    EXPECT_LT(ppl, 1e4);
  }
}

// `eval --plan --tokens B:E` without --text measures [B, E) of the config's held-out
// file: the same number as with that file named, and not the default range's.
TEST(BaselineCliTest, EvalPlanTokensAlonePickAnotherRangeOfTheHeldOutFile) {
  const testing::TestModel m = testing::RealModel();
  const std::string windquant = testing::BinaryDir() + "/cli/windquant";
  const std::string tmp = ::testing::TempDir() + "/baseline_cli_eval_tokens";
  std::filesystem::remove_all(tmp);
  std::filesystem::create_directories(tmp);
  const std::string common = " --config " + m.config + " --set quant.cache_dir=" + tmp + "/cache";
  int rc = 0;
  std::string out =
      RunCommand(windquant + " baseline" + common +
                     " --method uniform --action 2 --no-eval --out " + tmp + "/plan 2>&1",
                 &rc);
  ASSERT_EQ(rc, 0) << out;
  const auto cfg = config::LoadRunConfig(m.config, {});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  const base::TextRange& heldout = cfg->evaluation.heldout;
  const std::string later =
      std::to_string(heldout.tokens[0] + 1000) + ":" + std::to_string(heldout.tokens[0] + 5096);
  auto ppl = [&](const std::string& flags) {
    const std::string cmd = windquant + " eval" + common + " --plan " + tmp +
                            "/plan/plan.json --json --max-tokens 4096" + flags + " 2>/dev/null";
    int code = 0;
    const std::string text = RunCommand(cmd, &code);
    EXPECT_EQ(code, 0) << cmd << "\n" << text;
    return code == 0 ? nlohmann::json::parse(text)["perplexity"].get<double>() : 0.0;
  };
  const double alone = ppl(" --tokens " + later);
  const double named = ppl(" --text " + heldout.text + " --tokens " + later);
  EXPECT_GT(alone, 1.0);
  EXPECT_NEAR(alone, named, 1e-9 * named);  // one process' code on the same ids
  EXPECT_GT(std::abs(alone - ppl("")), 1e-6 * alone) << "--tokens was ignored";
}

// `--method search --evals N`: N plans measured on the selection slice, the
// best within the budget returned (its origin in plan.json), no worse than
// the Lagrangian start on that slice.
TEST(BaselineCliTest, SearchMeasuresExactlyEvalsPlansWithinTheBudget) {
  const testing::TestModel m = testing::RealModel();
  const std::string windquant = testing::BinaryDir() + "/cli/windquant";
  const std::string tmp = ::testing::TempDir() + "/baseline_cli_search_test";
  std::filesystem::remove_all(tmp);
  std::filesystem::create_directories(tmp);  // --out's parent (only the leaf is created)
  const std::string cmd = windquant + " baseline --config " + m.config +
                          " --method search --evals 6 --seed 1 --bits 2.0 --out " + tmp +
                          "/plan --json --max-tokens 2048 --set quant.cache_dir=" + tmp +
                          "/cache 2>/dev/null";
  int rc = 0;
  const std::string stdout_text = RunCommand(cmd, &rc);
  ASSERT_EQ(rc, 0) << cmd << "\n" << stdout_text;
  const auto report = nlohmann::json::parse(stdout_text);
  ASSERT_TRUE(report.contains("search")) << stdout_text;
  EXPECT_EQ(report["search"]["evaluations"].get<int64_t>(), 6);
  EXPECT_LE(report["search"]["selection_ppl"].get<double>(),
            report["search"]["start_selection_ppl"].get<double>());
  EXPECT_LE(report["effective_bits"].get<double>(), 2.0 + 1e-9);
  EXPECT_EQ(report["method"], "search");
  auto text = base::ReadFile(tmp + "/plan/plan.json");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(nlohmann::json::parse(*text)["source"], "search");
  // Without --evals the command refuses, naming the flag.
  const std::string bad =
      windquant + " baseline --config " + m.config + " --method search --bits 2.0 --no-eval 2>&1";
  const std::string err = RunCommand(bad, &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(err.find("--evals"), std::string::npos) << err;
}

// `--screen K`: the same count of measured plans, each the reward model's
// pick of K proposals once it has plans to fit; plan.json says screened-search.
TEST(BaselineCliTest, ScreenedSearchMeasuresExactlyEvalsPlans) {
  const testing::TestModel m = testing::RealModel();
  const std::string windquant = testing::BinaryDir() + "/cli/windquant";
  const std::string tmp = ::testing::TempDir() + "/baseline_cli_screened_test";
  std::filesystem::remove_all(tmp);
  std::filesystem::create_directories(tmp);  // --out's parent (only the leaf is created)
  const std::string cmd = windquant + " baseline --config " + m.config +
                          " --method search --evals 8 --screen 8 --restart-after 3 --seed 2"
                          " --bits 2.0 --out " +
                          tmp +
                          "/plan --json --no-eval"
                          " --set quant.cache_dir=" +
                          tmp + "/cache 2>/dev/null";
  int rc = 0;
  const std::string stdout_text = RunCommand(cmd, &rc);
  ASSERT_EQ(rc, 0) << cmd << "\n" << stdout_text;
  const auto report = nlohmann::json::parse(stdout_text);
  ASSERT_TRUE(report.contains("search")) << stdout_text;
  EXPECT_EQ(report["search"]["evaluations"].get<int64_t>(), 8);
  EXPECT_EQ(report["search"]["screen"].get<int64_t>(), 8);
  EXPECT_GT(report["search"]["screened"].get<int64_t>(), 0) << stdout_text;
  EXPECT_EQ(report["method"], "search");
  auto text = base::ReadFile(tmp + "/plan/plan.json");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(nlohmann::json::parse(*text)["source"], "screened-search");
  const std::string bad = windquant + " baseline --config " + m.config +
                          " --method search --bits 2.0 --evals 3 --screen -1 --no-eval 2>&1";
  const std::string err = RunCommand(bad, &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(err.find("--screen"), std::string::npos) << err;
}

// `--method measured --rounds 1`: the anchor (uniform), every linear at every other
// action, and the Lagrangian plan on the measured table, all on the selection slice;
// the plan within the budget and never worse there than the anchor; the measured
// table written beside the plan and readable by `table dump`.
TEST(BaselineCliTest, MeasuredProxyMeasuresEveryLinearAtEveryAction) {
  const testing::TestModel m = testing::RealModel();
  const std::string windquant = testing::BinaryDir() + "/cli/windquant";
  const std::string tmp = ::testing::TempDir() + "/baseline_cli_measured_test";
  std::filesystem::remove_all(tmp);
  std::filesystem::create_directories(tmp);  // --out's parent (only the leaf is created)
  // 8 windows spread over the config's selection slice (evaluation.selection.windows):
  // ~4x fewer tokens per measured plan.
  const auto cfg = config::LoadRunConfig(m.config, {});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  const std::string cmd = windquant + " baseline --config " + m.config +
                          " --method measured --rounds 1 --bits 2.4 --out " + tmp +
                          "/plan --json --no-eval --set quant.cache_dir=" + tmp +
                          "/cache --set evaluation.selection.windows=8 2>/dev/null";
  int rc = 0;
  const std::string stdout_text = RunCommand(cmd, &rc);
  ASSERT_EQ(rc, 0) << cmd << "\n" << stdout_text;
  const auto report = nlohmann::json::parse(stdout_text);
  ASSERT_TRUE(report.contains("measured_proxy")) << stdout_text;
  const nlohmann::json& q = report["measured_proxy"];
  const nlohmann::json config = nlohmann::json::parse(*base::ReadFile(m.dir + "/config.json"));
  const int64_t linears = 7 * config["num_hidden_layers"].get<int64_t>();
  EXPECT_EQ(q["linears"].get<int64_t>(), linears);
  EXPECT_EQ(q["selection_tokens"].get<int64_t>(), 8 * (cfg->evaluation.context - 1));
  // Uniform 2-bit (2.35 bits) is the anchor: 6 other actions per linear, then the plan.
  EXPECT_EQ(q["evaluations"].get<int64_t>(), 1 + 6 * linears + 1);
  EXPECT_LE(q["selection_ppl"].get<double>(), q["anchor_selection_ppl"][0].get<double>());
  EXPECT_LE(report["effective_bits"].get<double>(), 2.4 + 1e-9);
  EXPECT_GT(report["effective_bits"].get<double>(), 2.3) << "the budget should be nearly spent";
  auto text = base::ReadFile(tmp + "/plan/plan.json");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(nlohmann::json::parse(*text)["source"], "measured");
  const std::string dump =
      RunCommand(windquant + " table dump " + tmp + "/plan/measured_table.pb --json", &rc);
  ASSERT_EQ(rc, 0) << dump;
  int64_t units = 0;
  for (size_t at = 0; (at = dump.find("\"error\":[0.0,", at)) != std::string::npos; ++at) ++units;
  EXPECT_EQ(units, static_cast<int64_t>(report["units"].get<size_t>()))
      << "every unit's measured error is 0 at 16 bits";
}

}  // namespace
}  // namespace windquant::search
