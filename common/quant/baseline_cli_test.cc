// Integration: `windquant baseline` on stories260k at 2.0 effective bits; the plan's
// bits are recounted independently from plan.json + UnitEffectiveBits.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/base/files.h"
#include "common/quant/action.h"
#include "common/quant/effective_bits.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace windquant::quant {
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

TEST(BaselineCliTest, Stories260kAtTwoBitsRecountsExactly) {
  const char* src = std::getenv("WQ_SOURCE_DIR");
  const char* bin = std::getenv("WQ_BINARY_DIR");
  if (src == nullptr || bin == nullptr)
    GTEST_SKIP() << "run through ctest (WQ_SOURCE_DIR/WQ_BINARY_DIR unset)";
  const std::string model = std::string(src) + "/../shared/models/stories260k/model.safetensors";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "stories260k not found: " << model;
  const std::string windquant = std::string(bin) + "/cli/windquant";
  ASSERT_TRUE(std::filesystem::exists(windquant)) << windquant;
  const std::string tmp = testing::TempDir() + "/baseline_cli_test";
  std::filesystem::remove_all(tmp);

  for (const char* method : {"lagrange", "greedy"}) {
    const std::string out = tmp + "/" + method;
    const std::string cmd = windquant + " baseline --config " + src +
                            "/configs/stories260k.yaml --method " + method + " --bits 2.0 --out " +
                            out + " --json --max-tokens 4096 --set quant.cache_dir=" + tmp +
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
      auto a = ParseAction(u["action"].get<std::string>());
      ASSERT_TRUE(a.ok());
      const int64_t k = SalientCount(rows * cols, 0.005);
      EXPECT_EQ(u["salient"].get<int64_t>(), k);
      bits += UnitEffectiveBits(rows, cols, k, *a);
      n += static_cast<double>(rows * cols);
    }
    EXPECT_EQ(plan["units"].size(), 45u);  // 5 layers x (1+1+1+1+1+1+3) chunks of 64
    const double eff = bits / n;
    EXPECT_LE(eff, 2.0 + 1e-9) << method;
    EXPECT_GT(eff, 1.9) << method << ": the budget should be nearly spent";
    EXPECT_NEAR(plan["totals"]["effective_bits"].get<double>(), eff, 1e-12);
    EXPECT_NEAR(report["effective_bits"].get<double>(), eff, 1e-12);
    // Whole model: + 16 bits for each of the 32768 + 11*64 FP16 parameters.
    const double fixed = 512 * 64 + 64 * 11;
    EXPECT_NEAR(report["whole_model_bits"].get<double>(), (bits + 16 * fixed) / (n + fixed), 1e-9);
    const double ppl = report["perplexity"];
    EXPECT_GT(ppl, 1.0);
    EXPECT_LT(ppl, 1e4);
  }
}

}  // namespace
}  // namespace windquant::quant
