// The GGUF exporter tests' fixtures (gguf_exporter_test.cc, gguf_tensor_granular_test.cc):
// random LLaMAs fitted at a chunk size with their tokenizer folder, the export inputs of a
// plan, and llama.cpp's `gguf` package run on a file (tests/py/gguf_check.py). Test code.
#ifndef WINDQUANT_COMMON_EXPORT_GGUF_EXPORTER_TEST_FIXTURE_H_
#define WINDQUANT_COMMON_EXPORT_GGUF_EXPORTER_TEST_FIXTURE_H_

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/export/gguf_exporter.h"
#include "common/export/gguf_file.h"
#include "common/export/gguf_llama.h"
#include "common/model/tokenizer_pretokenizer.h"
#include "common/quant/unit_table_builder.h"
#include "common/testing/py_reference.h"
#include "common/testing/shell.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_paths.h"
#include "gtest/gtest.h"

namespace windquant::exporter::test_fixture {

using gguf::TensorType;
using ::windquant::testing::IsOk;

struct Fixture {
  model::LlamaWeights weights;
  quant::StageFits fits;
  std::string model_dir;
};

// A byte-level BPE tokenizer.json (LLaMA-3's Split regex) of 40 tokens and 2 specials.
inline std::string TinyTokenizerJson() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int i = 0; i < 40; ++i) vocab[std::string(1, static_cast<char>('A' + i))] = i;
  nlohmann::json j;
  j["model"] = {{"type", "BPE"}, {"vocab", vocab}};
  j["model"]["merges"] = nlohmann::json::array({"A B", "C D"});
  nlohmann::json split = {{"type", "Split"}};
  split["pattern"]["Regex"] = std::string(model::kLlama3SplitPattern);
  j["pre_tokenizer"]["type"] = "Sequence";
  j["pre_tokenizer"]["pretokenizers"] =
      nlohmann::json::array({split, nlohmann::json{{"type", "ByteLevel"}}});
  for (int id : {46, 47}) {
    j["added_tokens"].push_back({{"id", id},
                                 {"content", id == 46 ? "<|begin_of_text|>" : "<|end_of_text|>"},
                                 {"special", true}});
  }
  return j.dump();
}

// A random LLaMA of one shape (GQA 4/2, vocabulary 48, F32) fitted at `chunk` columns per
// unit, salient fraction 0.02, and the tokenizer folder.
inline Fixture* BuildFixture(int64_t hidden, int64_t intermediate, int64_t layers, int64_t head_dim,
                             int64_t chunk, const std::string& dir_name) {
  auto* x = new Fixture();
  at::manual_seed(7);
  auto& c = x->weights.config;
  c.hidden_size = hidden;
  c.intermediate_size = intermediate;
  c.num_hidden_layers = layers;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = head_dim;
  c.vocab_size = 48;
  c.max_position_embeddings = 64;
  c.bos_token_id = 46;
  c.eos_token_ids = {47};
  c.torch_dtype = "float32";
  x->weights.embed_tokens = at::randn({48, hidden});
  x->weights.lm_head = at::randn({48, hidden});
  x->weights.final_norm = at::rand({hidden}) + 0.5;
  quant::ActivationStats stats;
  stats.layers.resize(layers);
  const int64_t kv = 2 * head_dim;
  const int64_t out[7] = {hidden, kv, kv, hidden, intermediate, intermediate, hidden};
  const int64_t in[7] = {hidden, hidden, hidden, hidden, hidden, hidden, intermediate};
  for (int l = 0; l < layers; ++l) {
    model::LayerWeights lw;
    for (int m = 0; m < 7; ++m) {
      lw.linear[m] = at::randn({out[m], in[m]}) * 0.2;
      stats.layers[l][m].mean_abs = at::rand({in[m]}) + 0.05;
    }
    lw.input_layernorm = at::rand({hidden}) + 0.5;
    lw.post_attention_layernorm = at::rand({hidden}) + 0.5;
    x->weights.layers.push_back(lw);
  }
  quant::UnitTableOptions o;
  o.chunk_size = chunk;
  o.salient_fraction = 0.02;
  auto fits = quant::BuildStageFits(x->weights, stats, o, "gguf-test");
  if (!fits.ok()) std::abort();
  x->fits = *std::move(fits);
  x->model_dir = ::testing::TempDir() + "/" + dir_name;
  std::filesystem::create_directories(x->model_dir);
  if (!base::WriteFileAtomic(x->model_dir + "/tokenizer.json", TinyTokenizerJson()).ok()) {
    std::abort();
  }
  return x;
}

inline ExportInputs Inputs(const model::LlamaWeights& w, const quant::StageFits& fits,
                           const plan::Plan* plan, const std::string& model_dir) {
  ExportInputs in;
  in.weights = &w;
  in.table = &fits.table();
  in.fits = &fits;
  in.plan = plan;
  in.model_dir = model_dir;
  return in;
}

inline void WriteRaw(const std::string& path, const void* data, size_t bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(std::fwrite(data, 1, bytes, f), bytes);
  std::fclose(f);
}

// The dump tests/py/gguf_check.py compares with: per tensor windquant's decode, and per
// linear the plan's weights and salient mask, all in GGUF row order.
inline void DumpForPython(const ExportInputs& in, const gguf::GgufFile& file,
                          const std::string& dir) {
  for (const gguf::TensorInfo& t : file.tensors()) {
    auto decoded = file.Decode(t);
    ASSERT_THAT(decoded.status(), IsOk());
    WriteRaw(dir + "/" + t.name + ".decoded.f32", decoded->data(), decoded->size() * 4);
  }
  const model::LlamaConfig& c = ExportConfig(in);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    std::array<at::Tensor, model::kNumMatrices> lin;
    for (int m = 0; m < model::kNumMatrices; ++m) {
      lin[m] = in.weights->layers[l].linear[m].to(at::kFloat).clone().contiguous();
    }
    in.fits->ApplyToLayer(l, in.plan->actions, &lin);
    for (int m = 0; m < model::kNumMatrices; ++m) {
      at::Tensor salient = at::zeros(lin[m].sizes(), at::kByte);
      for (size_t i = 0; i < in.table->units.size(); ++i) {
        const plan::Unit& u = in.table->units[i];
        if (u.layer != l || u.matrix != m) continue;
        for (int32_t e : in.fits->params(i).salient.index) {
          salient[e / u.cols][u.col_begin + e % u.cols] = 1;
        }
      }
      const int64_t rows = lin[m].size(0), heads = gguf::PermutedHeads(c, m);
      std::vector<int64_t> order(rows);
      for (int64_t g = 0; g < rows; ++g) order[g] = gguf::HfRowOf(g, rows, heads);
      const at::Tensor idx = at::tensor(order, at::kLong);
      const at::Tensor plan = lin[m].index_select(0, idx).contiguous();
      const at::Tensor mask = salient.index_select(0, idx).contiguous();
      const std::string name = gguf::LinearName(l, m);
      WriteRaw(dir + "/" + name + ".plan.f32", plan.data_ptr(), plan.numel() * 4);
      WriteRaw(dir + "/" + name + ".salient.u8", mask.data_ptr(), mask.numel());
    }
  }
}

// Runs tests/py/gguf_check.py on `file` (llama.cpp's `gguf` package) and returns its JSON.
inline nlohmann::json PythonCheck(const ExportInputs& in, const std::string& path,
                                  const std::string& dir) {
  auto file = gguf::GgufFile::Open(path);
  EXPECT_THAT(file.status(), IsOk());
  if (!file.ok()) return {};
  const std::string dump = dir + "/dump";
  std::filesystem::create_directories(dump);
  DumpForPython(in, **file, dump);
  const std::string python = testing::ReferencePython();
  EXPECT_FALSE(python.empty()) << "no Python: run bash scripts/install-deps.sh";
  const testing::CommandOutput r = testing::RunInDir(
      dir,
      absl::StrCat(testing::ShellQuote(python), " ",
                   testing::ShellQuote(testing::SourceDir() + "/tests/py/gguf_check.py"), " ",
                   testing::ShellQuote(path), " ", testing::ShellQuote(dump)),
      300);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return {};
  std::printf("gguf_check.py: %s", r.out.c_str());
  return nlohmann::json::parse(r.out);
}

inline std::map<std::string, TensorType> TypesOf(const GgufExportReport& r) {
  std::map<std::string, TensorType> out;
  for (const GgufTensorReport& t : r.tensors) out[t.name] = t.type;
  return out;
}

}  // namespace windquant::exporter::test_fixture

#endif  // WINDQUANT_COMMON_EXPORT_GGUF_EXPORTER_TEST_FIXTURE_H_
