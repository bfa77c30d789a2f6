// stories260k perplexity on tinystories-valid-sample.txt at W=256 against the
// float64 reference of shared/models/stories260k/README.md (PPL 5.695458,
// 1541 windows, 392,955 predicted tokens). About a minute of CPU; it runs in the default suite
// because it is the end-to-end check of loader + tokenizer + forward pass + protocol.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "common/model/checkpoint.h"
#include "common/model/llama_model.h"
#include "common/model/perplexity.h"
#include "common/model/tokenizer.h"

namespace windquant::model {
namespace {

// The brief asks for 0.1 %; fp32 is expected to agree to ~6 digits.
constexpr double kPerplexityRelTolerance = 1e-3;
constexpr double kReferencePerplexity = 5.695458;

TEST(PerplexityReferenceTest, Stories260kTinystoriesMatchesReference) {
  const char* src = std::getenv("WQ_SOURCE_DIR");
  if (src == nullptr) GTEST_SKIP() << "WQ_SOURCE_DIR not set";
  const std::string shared = std::string(src) + "/../shared";
  const std::string dir = shared + "/models/stories260k";
  const std::string text_path = shared + "/data/tinystories-valid-sample.txt";
  if (!std::ifstream(dir + "/model.safetensors").good() || !std::ifstream(text_path).good()) {
    GTEST_SKIP() << "stories260k or tinystories-valid-sample.txt not under " << shared;
  }
  at::set_num_threads(1);  // the machine is shared; one thread is the fastest per CPU-s
  auto ckpt = Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto weights = (*ckpt)->LoadWeights(LoadRequest{});
  ASSERT_TRUE(weights.ok()) << weights.status();
  const LlamaModel model(std::move(*weights));
  auto tokenizer = Tokenizer::FromFile(dir + "/tokenizer.json");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  std::ifstream f(text_path, std::ios::binary);
  std::stringstream text;
  text << f.rdbuf();
  const std::vector<int32_t> ids = (*tokenizer)->Encode(text.str(), /*add_bos=*/false);
  ASSERT_EQ(ids.size(), 393018u);

  PerplexityOptions options;
  options.context = 256;
  options.batch_size = 16;
  auto r = ComputePerplexity(model, ids, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->windows, 1541);
  EXPECT_EQ(r->tokens, 392955);
  EXPECT_NEAR(r->perplexity / kReferencePerplexity, 1.0, kPerplexityRelTolerance)
      << "perplexity " << r->perplexity;
  std::printf("stories260k tinystories W=256: ppl %.6f nll %.7f, %.0f tokens/s\n", r->perplexity,
              r->nll, r->tokens_per_s);
}

}  // namespace
}  // namespace windquant::model
