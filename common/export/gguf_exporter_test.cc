#include "common/export/gguf_exporter.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/config/run_config.h"
#include "common/export/gguf_exporter_test_fixture.h"
#include "common/export/gguf_file.h"
#include "common/export/gguf_llama.h"
#include "common/export/llama_quantize_types.h"
#include "common/model/tokenizer_pretokenizer.h"
#include "common/quant/quantization_session.h"
#include "common/quant/unit_table_builder.h"
#include "common/testing/py_reference.h"
#include "common/testing/real_model_session.h"
#include "common/testing/scoped_test_dir.h"
#include "common/testing/shell.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_paths.h"
#include "gtest/gtest.h"

namespace windquant::exporter {
namespace {

using gguf::TensorType;
using test_fixture::BuildFixture;
using test_fixture::Fixture;
using test_fixture::Inputs;
using test_fixture::PythonCheck;
using test_fixture::TypesOf;
using ::windquant::testing::IsOk;

// Tiny LLaMA: rows of 64 (whole 32-value blocks at chunk 32) and a down_proj with rows
// of 72 (no block type fits), untied head, GQA 4/2 with head_dim 16.
const Fixture& Tiny() {
  static const Fixture* f = BuildFixture(64, 72, 2, 16, 32, "gguf_test_model");
  return *f;
}

// Rows of 256 at chunk 256 (the 256-value types fit; down_proj has two units per row).
const Fixture& Tiny256() {
  static const Fixture* f = BuildFixture(256, 512, 1, 64, 256, "gguf_test_model_256");
  return *f;
}

// Every unit at one action: each linear takes the type the grid nests in, and llama.cpp's
// `gguf` package decodes each type as windquant does.
TEST(GgufExporterTest, EachActionTakesTheTypeItsGridNestsIn) {
  const Fixture& f = Tiny();
  testing::ScopedTestDir dir("gguf_export");
  const plan::UnitTable& t = f.fits.table();
  const std::map<int, std::set<TensorType>> expected = {
      {0, {TensorType::kF16}},
      {1, {TensorType::kQ8_0}},
      {2, {TensorType::kQ4_0}},
      {3, {TensorType::kQ4_0}},
      {4, {TensorType::kQ4_0}},
      {5, {TensorType::kQ4_0}},
      {6, {TensorType::kQ4_1, TensorType::kF16, TensorType::kF32}}};
  for (const auto& [a, types] : expected) {
    const plan::Plan plan = plan::Plan::Make(t, std::vector<int>(t.units.size(), a), "test", 0);
    const ExportInputs in = Inputs(f.weights, f.fits, &plan, f.model_dir);
    const std::string path = absl::StrCat(dir.path(), "/a", a, ".gguf");
    auto report = WriteGguf(in, path);
    ASSERT_THAT(report.status(), IsOk());
    ASSERT_THAT(VerifyGguf(in, path, "a", &*report), IsOk()) << "action " << a;
    const auto types_of = TypesOf(*report);
    for (int64_t l = 0; l < 2; ++l) {
      for (int m = 0; m < model::kNumMatrices; ++m) {
        const TensorType got = types_of.at(gguf::LinearName(l, m));
        if (m == static_cast<int>(model::Matrix::kDown)) {  // rows of 72: no block type
          EXPECT_TRUE(got == TensorType::kF16 || got == TensorType::kF32) << "action " << a;
        } else {
          EXPECT_TRUE(types.count(got)) << "action " << a << " " << gguf::TensorTypeName(got);
        }
        for (const GgufTensorReport& r : report->tensors) {  // why not Q3_K: no 256-blocks
          if (a != 3 || r.name != gguf::LinearName(l, 0)) continue;
          EXPECT_EQ(r.why.rfind("rows of 64 values: not a multiple of 256", 0), 0u) << r.why;
        }
      }
    }
    EXPECT_EQ(types_of.at(gguf::kEmbeddingName), TensorType::kF32);
    EXPECT_EQ(types_of.at(gguf::kHeadName), TensorType::kF32);
    const std::string sub = absl::StrCat(dir.path(), "/py", a);
    std::filesystem::create_directories(sub);
    EXPECT_EQ(PythonCheck(in, path, sub).value("linears", -1), 2 * model::kNumMatrices);
  }
}

// A plan mixing every action: the file decodes (windquant's decoder and llama.cpp's
// `gguf` package alike, bit for bit) to the plan's weights outside the salient entries;
// its bits count every tensor byte.
TEST(GgufExporterTest, MixedPlanReadsBackAndTheGgufPackageAgrees) {
  const Fixture& f = Tiny();
  testing::ScopedTestDir dir("gguf_export");
  const plan::UnitTable& t = f.fits.table();
  std::vector<int> a(t.units.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int>((i * 3 + 1) % plan::kNumActions);
  const plan::Plan plan = plan::Plan::Make(t, a, "mixed", 0);
  const ExportInputs in = Inputs(f.weights, f.fits, &plan, f.model_dir);
  const std::string path = dir.path() + "/m.gguf";
  auto report = WriteGguf(in, path);
  ASSERT_THAT(report.status(), IsOk());
  ASSERT_THAT(VerifyGguf(in, path, "m", &*report), IsOk());
  auto file = gguf::GgufFile::Open(path);
  ASSERT_THAT(file.status(), IsOk());
  uint64_t bytes = 0;
  int64_t weights = 0;
  for (const gguf::TensorInfo& ti : (*file)->tensors()) {
    bytes += *ti.bytes();
    weights += ti.values();
  }
  EXPECT_EQ(report->tensor_bytes, bytes);
  EXPECT_EQ(report->all_weights, weights);
  EXPECT_EQ(report->file_bytes, (*file)->size_bytes());
  EXPECT_GT(report->salient_entries, 0);
  EXPECT_LE(report->salient_changed, report->salient_entries);
  EXPECT_NEAR(report->PlanBits(), plan.Totals(t).effective_bits, 1e-9);
  EXPECT_GE(report->LinearBits(), 4.5);  // chunks of 32: no 256-value type fits
  const nlohmann::json py = PythonCheck(in, path, dir.path());
  EXPECT_EQ(py.value("bit_equal", -1), static_cast<int>((*file)->tensors().size()));
  EXPECT_EQ(py.value("linears", -1), 2 * model::kNumMatrices);
  EXPECT_EQ(py.value("salient_changed", int64_t{-1}), report->salient_changed);
}

// llama-quantize-tensor-types.txt: one `--tensor-type PATTERN=TYPE` per decoder linear;
// each pattern, lowercased and searched as llama-quantize does (std::regex_search), matches
// exactly its own tensor of the file, and TYPE is that tensor's type in the file and in
// gguf_export.json, in ggml's lower-case name.
TEST(GgufExporterTest, LlamaQuantizeTensorTypesNameEachLinearWithItsType) {
  const Fixture& f = Tiny();
  testing::ScopedTestDir dir("gguf_export");
  const plan::UnitTable& t = f.fits.table();
  std::vector<int> a(t.units.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int>((i * 3 + 1) % plan::kNumActions);
  const plan::Plan plan = plan::Plan::Make(t, a, "mixed", 0);
  const ExportInputs in = Inputs(f.weights, f.fits, &plan, f.model_dir);
  const std::string path = dir.path() + "/m.gguf";
  auto report = WriteGguf(in, path);
  ASSERT_THAT(report.status(), IsOk());
  ASSERT_THAT(WriteLlamaQuantizeTensorTypes(*report, plan, dir.path()), IsOk());
  auto text = base::ReadFile(dir.path() + "/" + kLlamaQuantizeTypesFileName);
  ASSERT_THAT(text.status(), IsOk());
  auto file = gguf::GgufFile::Open(path);
  ASSERT_THAT(file.status(), IsOk());
  std::map<std::string, std::string> json_type;  // gguf_export.json: name -> type
  const nlohmann::json exported = nlohmann::json::parse(report->ToJson());
  for (const auto& e : exported.at("tensors")) {
    json_type[e["name"].get<std::string>()] = e["type"].get<std::string>();
  }
  std::set<std::string> named;
  int comments = 0;
  std::istringstream lines(*text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("#", 0) == 0) {
      comments++;
      continue;
    }
    if (line.rfind("--tensor-type ", 0) != 0) {
      EXPECT_TRUE(line == "--token-embedding-type f32" || line == "--output-tensor-type f32")
          << line;  // the tiny model's embeddings and lm_head are F32
      continue;
    }
    const std::string arg = line.substr(std::strlen("--tensor-type "));
    const size_t eq = arg.find('=');  // llama-quantize splits at the first '='
    ASSERT_NE(eq, std::string::npos) << line;
    const std::regex pattern(absl::AsciiStrToLower(arg.substr(0, eq)));
    const std::string type = arg.substr(eq + 1);
    std::vector<const gguf::TensorInfo*> hits;
    for (const gguf::TensorInfo& ti : (*file)->tensors()) {
      if (std::regex_search(ti.name, pattern)) hits.push_back(&ti);
    }
    ASSERT_EQ(hits.size(), 1u) << line;
    // ... and no other name: blk.1's must miss blk.10 (models of 11+ layers), its dots
    // are dots.
    const std::string& own = hits[0]->name;
    std::string dotless = own;
    std::replace(dotless.begin(), dotless.end(), '.', 'x');
    const size_t layer_end = own.find('.', 4);  // "blk.L|.attn_q.weight" -> "blk.L0..."
    const std::string ten_times = own.substr(0, layer_end) + "0" + own.substr(layer_end);
    for (const std::string& other : {"x" + own, own + "x", dotless, ten_times}) {
      EXPECT_FALSE(std::regex_search(other, pattern)) << line << " matches " << other;
    }
    EXPECT_EQ(type, absl::AsciiStrToLower(gguf::TensorTypeName(hits[0]->type))) << line;
    EXPECT_EQ(type, absl::AsciiStrToLower(json_type.at(hits[0]->name))) << line;
    EXPECT_TRUE(named.insert(hits[0]->name).second) << "named twice: " << line;
  }
  std::set<std::string> linears, types;
  for (int64_t l = 0; l < 2; ++l) {
    for (int m = 0; m < model::kNumMatrices; ++m) linears.insert(gguf::LinearName(l, m));
  }
  for (const GgufTensorReport& r : report->tensors) {
    if (r.linear) types.insert(gguf::TensorTypeName(r.type));
  }
  EXPECT_EQ(named, linears);
  EXPECT_GE(types.size(), 2u) << "a mixed plan should give the linears several types";
  EXPECT_EQ(comments, 3);
  EXPECT_NE(text->find("# windquant plan " + plan.plan_id), std::string::npos);
  EXPECT_NE(text->find("llama-quantize $(grep -v '^#' llama-quantize-tensor-types.txt)"),
            std::string::npos);
  EXPECT_EQ(TensorNamePattern("blk.0.attn_q.weight"), R"(^blk\.0\.attn_q\.weight$)");
}

// q/k rows: GGUF row h*hd + 2i + p holds Hugging Face row h*hd + p*hd/2 + i.
TEST(GgufExporterTest, QkRowsArePermutedPerHeadAsLlamaCppExpects) {
  const std::vector<int64_t> want = {0, 2, 1, 3, 4, 6, 5, 7};
  for (int64_t g = 0; g < 8; ++g) EXPECT_EQ(gguf::HfRowOf(g, 8, 2), want[g]) << g;
  for (int64_t g = 0; g < 8; ++g) EXPECT_EQ(gguf::HfRowOf(g, 8, 0), g);
  // The read-back puts them back: the embeddings and the q rows round-trip exactly.
  const Fixture& f = Tiny();
  testing::ScopedTestDir dir("gguf_export");
  const plan::UnitTable& t = f.fits.table();
  const plan::Plan plan = plan::Plan::Make(t, std::vector<int>(t.units.size(), 0), "fp16", 0);
  const ExportInputs in = Inputs(f.weights, f.fits, &plan, f.model_dir);
  ASSERT_THAT(WriteGguf(in, dir.path() + "/p.gguf").status(), IsOk());
  auto file = gguf::GgufFile::Open(dir.path() + "/p.gguf");
  ASSERT_THAT(file.status(), IsOk());
  auto back = gguf::ReadLlamaWeights(**file);
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_TRUE(at::equal(back->embed_tokens, f.weights.embed_tokens));
  auto q = (*file)->Decode(*(*file)->Find(gguf::LinearName(1, 0)));  // GGUF row order
  ASSERT_THAT(q.status(), IsOk());
  const at::Tensor hf = f.weights.layers[1].linear[0].to(at::kHalf).to(at::kFloat);
  // head_dim 16: GGUF row 1 is the first head's row 8 (the partner of row 0).
  for (int64_t c = 0; c < 64; ++c) EXPECT_EQ((*q)[1 * 64 + c], hf[8][c].item<float>()) << c;
  EXPECT_TRUE(at::equal(back->layers[1].linear[0],
                        f.weights.layers[1].linear[0].to(at::kHalf).to(at::kFloat)));
  EXPECT_EQ(back->config.num_key_value_heads, 2);
  EXPECT_EQ(back->config.bos_token_id, 46);
  EXPECT_FALSE(back->config.tie_word_embeddings);
}

// One 256-value block as llama.cpp's quantize_row_{q2_K,q3_K,tq1_0}_ref store it, from
// its codes (Q3_K -4..3 with every scale 33; Q2_K 0..3 with sc = 1, m = min_scale;
// TQ1_0 -1..1): the test's own packing, for the exporter's bytes.
std::string PackBlock(TensorType t, float d, float dmin, int min_scale, const int* q) {
  std::vector<uint8_t> b;
  const auto append = [&b](const uint8_t* p, size_t n) { b.insert(b.end(), p, p + n); };
  const auto half = [&b](float v) {
    const uint16_t h = gguf::HalfBitsOf(v);
    b.push_back(static_cast<uint8_t>(h & 0xFF));
    b.push_back(static_cast<uint8_t>(h >> 8));
  };
  int L[256];
  uint8_t qs[64] = {}, hmask[32] = {}, scales[16] = {};
  for (int j = 0; j < 256; ++j) L[j] = t == TensorType::kQ3_K ? q[j] + 4 : q[j];
  if (t == TensorType::kQ3_K) {
    for (int j = 0, m = 0, hm = 1; j < 256; ++j) {
      if (L[j] > 3) hmask[m] |= static_cast<uint8_t>(hm), L[j] -= 4;
      if (++m == 32) m = 0, hm <<= 1;
    }
  }
  // Q2_K's and Q3_K's 2-bit planes (codes 0..3 here); TQ1_0 packs its trits below.
  for (int j = 0; t != TensorType::kTQ1_0 && j < 256; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                           (L[j + l + 96] << 6));
    }
  }
  if (t == TensorType::kQ2_K) {
    for (uint8_t& sc : scales) sc = static_cast<uint8_t>(1 | (min_scale << 4));
    append(scales, 16), append(qs, 64), half(d), half(dmin);
  } else if (t == TensorType::kQ3_K) {
    for (int j = 0; j < 16; ++j) {
      int l = 33;
      if (j < 8)
        scales[j] = l & 0xF;
      else
        scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
      l >>= 4;
      scales[j % 4 + 8] |= static_cast<uint8_t>(l << (2 * (j / 4)));
    }
    append(hmask, 32), append(qs, 64), append(scales, 12), half(d);
  } else {  // TQ1_0: five trits per byte along 32, then 16 bytes; four per qh byte
    const auto trits = [&](int first, int stride, int n) {
      int v = 0;
      for (int k = 0; k < 5; ++k) v = v * 3 + (k < n ? q[first + k * stride] + 1 : 0);
      b.push_back(static_cast<uint8_t>((v * 256 + 242) / 243));
    };
    for (int m = 0; m < 32; ++m) trits(m, 32, 5);
    for (int m = 0; m < 16; ++m) trits(160 + m, 16, 5);
    for (int j = 0; j < 4; ++j) trits(240 + j, 4, 4);
    half(d);
  }
  return std::string(b.begin(), b.end());
}

// A linear's expected bytes in `t`: per GGUF row, per unit (one 256-value block each), the
// block parameters of docs/gguf.md from the unit's scale and the codes of the plan's values
// (salient entries: of the original weights, clamped).
std::string ExpectedLinear(const Fixture& f, const plan::Plan& plan, const at::Tensor& lin, int m,
                           TensorType t) {
  const plan::UnitTable& table = f.fits.table();
  const at::Tensor w = f.weights.layers[0].linear[m].contiguous();
  const auto wa = w.accessor<float, 2>();
  const auto la = lin.accessor<float, 2>();
  const int64_t rows = lin.size(0), heads = gguf::PermutedHeads(f.weights.config, m);
  std::vector<size_t> units;
  std::vector<std::vector<float>> scales;
  std::vector<std::set<int32_t>> salient;
  for (size_t i = 0; i < table.units.size(); ++i) {
    const plan::Unit& u = table.units[i];
    if (u.layer != 0 || u.matrix != m) continue;
    units.push_back(i);
    scales.push_back(f.fits.Scales(i, plan.actions[u.id]));
    const std::vector<int32_t>& e = f.fits.params(i).salient.index;
    salient.emplace_back(e.begin(), e.end());
  }
  std::string out;
  for (int64_t g = 0; g < rows; ++g) {
    const int64_t hf = gguf::HfRowOf(g, rows, heads);
    for (size_t k = 0; k < units.size(); ++k) {
      const plan::Unit& u = table.units[units[k]];
      const float s = scales[k][hf];
      const bool two = plan::kAllActions[plan.actions[u.id]] == plan::Action::k2;
      // Q2_K: lowest level -1.5 s (2 bit) or -s (ternary), gap s; others: step d.
      const float lowest = two ? -1.5f * s : -s;
      const int min_scale = t != TensorType::kQ2_K ? 0 : gguf::IsHalfExact(-lowest) ? 1 : 3;
      const float d = t == TensorType::kQ2_K ? s : two ? s * 0.5f : s;
      const float base = t == TensorType::kQ2_K ? lowest : 0.0f;
      const int lo = t == TensorType::kQ2_K ? 0 : t == TensorType::kQ3_K ? -4 : -1;
      const int hi = t == TensorType::kQ2_K || t == TensorType::kQ3_K ? 3 : 1;
      int q[256];
      for (int j = 0; j < 256; ++j) {
        const bool sal = salient[k].count(static_cast<int32_t>(hf * u.cols + j)) > 0;
        const float v = sal ? wa[hf][u.col_begin + j] : la[hf][u.col_begin + j];
        q[j] = std::clamp(static_cast<int>(std::lround((v - base) / d)), lo, hi);
      }
      const float dmin = min_scale == 0 ? 0.0f : -lowest / static_cast<float>(min_scale);
      out += PackBlock(t, d, dmin, min_scale, q);
    }
  }
  return out;
}

// Rows of 256 at chunk 256: 3 bit takes Q3_K, 2 bit Q2_K, ternary TQ1_0 (down_proj: a
// 3-bit and a ternary unit per row, Q3_K), 4 bit Q4_0; every such tensor's bytes are the
// test's own packing of the plan's codes, and llama.cpp's `gguf` package decodes them to
// the plan's weights outside the salient entries.
TEST(GgufExporterTest, ChunksOf256TakeTheKQuantAndTernaryTypes) {
  const Fixture& f = Tiny256();
  testing::ScopedTestDir dir("gguf_export_256");
  const plan::UnitTable& t = f.fits.table();
  const int by_matrix[7] = {3, 4, 5, 2, 4, 5, 3};  // q k v o gate up down(first chunk)
  const TensorType want[7] = {TensorType::kQ3_K, TensorType::kQ2_K, TensorType::kTQ1_0,
                              TensorType::kQ4_0, TensorType::kQ2_K, TensorType::kTQ1_0,
                              TensorType::kQ3_K};
  std::vector<int> a(t.units.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const plan::Unit& u = t.units[i];
    a[u.id] = u.col_begin == 256 ? 5 : by_matrix[u.matrix];
  }
  const plan::Plan plan = plan::Plan::Make(t, a, "k256", 0);
  const ExportInputs in = Inputs(f.weights, f.fits, &plan, f.model_dir);
  const std::string path = dir.path() + "/k.gguf";
  auto report = WriteGguf(in, path);
  ASSERT_THAT(report.status(), IsOk());
  ASSERT_THAT(VerifyGguf(in, path, "k", &*report), IsOk());
  auto file = gguf::GgufFile::Open(path);
  ASSERT_THAT(file.status(), IsOk());
  std::array<at::Tensor, model::kNumMatrices> lin;
  for (int m = 0; m < model::kNumMatrices; ++m) lin[m] = f.weights.layers[0].linear[m].clone();
  f.fits.ApplyToLayer(0, plan.actions, &lin);
  uint64_t bytes = 0;
  for (int m = 0; m < model::kNumMatrices; ++m) {
    const std::string name = gguf::LinearName(0, m);
    const gguf::TensorInfo* ti = (*file)->Find(name);
    ASSERT_NE(ti, nullptr);
    EXPECT_EQ(ti->type, want[m]) << name << " " << gguf::TensorTypeName(ti->type);
    EXPECT_EQ(TypesOf(*report).at(name), want[m]) << name;
    bytes += *ti->bytes();
    if (want[m] == TensorType::kQ4_0) continue;
    const absl::Span<const uint8_t> got = (*file)->Bytes(*ti);
    const std::string expected = ExpectedLinear(f, plan, lin[m], m, want[m]);
    ASSERT_EQ(got.size(), expected.size()) << name;
    size_t first = 0;
    while (first < got.size() && got[first] == static_cast<uint8_t>(expected[first])) ++first;
    EXPECT_EQ(first, got.size()) << name << ": first differing byte " << first;
  }
  EXPECT_EQ(report->linear_bytes, bytes);
  std::printf("GGUF bits per weight of the linears: %.4f (the plan's %.4f)\n", report->LinearBits(),
              report->PlanBits());
  EXPECT_LT(report->LinearBits(), 3.5);
  for (const GgufTensorReport& r : report->tensors) {
    if (r.name == gguf::LinearName(0, 0)) EXPECT_NE(r.why.find("not exact in Q2_K"), r.why.npos);
  }
  const nlohmann::json py = PythonCheck(in, path, dir.path());
  EXPECT_EQ(py.value("linears", -1), model::kNumMatrices);
  EXPECT_EQ(py["types"].value("Q3_K", 0), 2);
  EXPECT_EQ(py["types"].value("Q2_K", 0), 2);
  EXPECT_EQ(py["types"].value("TQ1_0", 0), 2);
  EXPECT_EQ(py.value("salient_changed", int64_t{-1}), report->salient_changed);
}

// The real test model (stories260k, else the project's test model) at its run config
// (error compensation on), a plan of every action: llama.cpp's `gguf` package reads the
// file, its tokenizer has the model's vocabulary, and every tensor dequantizes bit for bit
// to windquant's decode, which is the plan's weights outside the salient entries.
TEST(GgufExporterRealModelTest, GgufPackageAgreesOnTheRealModel) {
  absl::StatusOr<config::RunConfig> c = testing::RealModelRunConfig(testing::RealModel(), 8, 128);
  ASSERT_TRUE(c.ok()) << c.status();
  auto session = quant::QuantizationSession::Create(testing::SessionOptionsOf(*c));
  ASSERT_TRUE(session.ok()) << session.status();
  const quant::QuantizationSession& s = **session;
  const plan::UnitTable& t = s.table();
  std::vector<int> a(t.units.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int>((i * 5 + 2) % plan::kNumActions);
  // Mixed, and every unit FP16 (F16 tensors: units at 16 bits have no salient entries,
  // with compensation too, so nothing is re-rounded).
  for (const std::vector<int>& actions : {a, std::vector<int>(t.units.size(), 0)}) {
    const plan::Plan plan = s.MakePlan(actions, "real", 0);
    ExportInputs in = SessionExportInputs(s, plan);
    testing::ScopedTestDir dir("gguf_export_real");
    const std::string path = dir.path() + "/model.gguf";
    auto report = WriteGguf(in, path);
    ASSERT_THAT(report.status(), IsOk());
    ASSERT_THAT(VerifyGguf(in, path, "model.gguf", &*report), IsOk());
    const nlohmann::json py = PythonCheck(in, path, dir.path());
    EXPECT_EQ(py.value("linears", -1), t.num_layers * model::kNumMatrices);
    EXPECT_EQ(py.value("salient_changed", int64_t{-1}), report->salient_changed);
    if (actions[0] == 0) EXPECT_EQ(report->salient_changed, 0);
  }
}

}  // namespace
}  // namespace windquant::exporter
