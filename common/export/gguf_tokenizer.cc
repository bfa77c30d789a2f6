#include "common/export/gguf_tokenizer.h"

#include <cstring>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/model/tokenizer_pretokenizer.h"

namespace windquant::exporter::gguf {
namespace {

using Json = nlohmann::json;

// llama.cpp's token types (llama_token_type; SentencePiece's piece types share the numbers).
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5;

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  int32_t unk = -1;
};

// Protobuf wire format, as far as SentencePiece's ModelProto needs it.
class Wire {
 public:
  Wire(std::string_view bytes, const std::string& path) : b_(bytes), path_(path) {}
  bool done() const { return pos_ >= b_.size(); }
  absl::StatusOr<uint64_t> Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= b_.size()) return Bad();
      const uint8_t c = static_cast<uint8_t>(b_[pos_++]);
      v |= static_cast<uint64_t>(c & 0x7F) << shift;
      if ((c & 0x80) == 0) return v;
    }
    return Bad();
  }
  absl::StatusOr<std::string_view> Bytes(uint64_t n) {
    if (n > b_.size() - pos_) return Bad();
    std::string_view s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  // Skips a field of wire type `wt` (0 varint, 1 fixed64, 2 bytes, 5 fixed32).
  absl::Status Skip(uint64_t wt) {
    if (wt == 0) return Varint().status();
    if (wt == 1) return Bytes(8).status();
    if (wt == 5) return Bytes(4).status();
    if (wt == 2) {
      WQ_ASSIGN_OR_RETURN(const uint64_t n, Varint());
      return Bytes(n).status();
    }
    return Bad();
  }
  absl::Status Bad() const {
    return absl::DataLossError(
        absl::StrCat(path_, ": not a SentencePiece model (byte ", pos_, ")"));
  }

 private:
  std::string_view b_;
  size_t pos_ = 0;
  const std::string& path_;
};

// One SentencePiece message: piece (1), score (2, float), type (3, default NORMAL).
absl::Status ReadPiece(std::string_view bytes, const std::string& path, Vocab* v) {
  Wire w(bytes, path);
  std::string piece;
  float score = 0;
  int32_t type = kNormal;
  while (!w.done()) {
    WQ_ASSIGN_OR_RETURN(const uint64_t tag, w.Varint());
    const uint64_t field = tag >> 3, wt = tag & 7;
    if (field == 1 && wt == 2) {
      WQ_ASSIGN_OR_RETURN(const uint64_t n, w.Varint());
      WQ_ASSIGN_OR_RETURN(const std::string_view s, w.Bytes(n));
      piece = std::string(s);
    } else if (field == 2 && wt == 5) {
      WQ_ASSIGN_OR_RETURN(const std::string_view s, w.Bytes(4));
      std::memcpy(&score, s.data(), 4);
    } else if (field == 3 && wt == 0) {
      WQ_ASSIGN_OR_RETURN(const uint64_t t, w.Varint());
      type = static_cast<int32_t>(t);
    } else {
      WQ_RETURN_IF_ERROR(w.Skip(wt));
    }
  }
  if (type == kUnknown && v->unk < 0) v->unk = static_cast<int32_t>(v->tokens.size());
  v->tokens.push_back(std::move(piece));
  v->scores.push_back(score);
  v->types.push_back(type);
  return absl::OkStatus();
}

absl::StatusOr<Vocab> SentencePieceVocab(const std::string& path) {
  WQ_ASSIGN_OR_RETURN(const std::string bytes, base::ReadFile(path));
  Wire w(bytes, path);
  Vocab v;
  while (!w.done()) {
    WQ_ASSIGN_OR_RETURN(const uint64_t tag, w.Varint());
    if ((tag >> 3) == 1 && (tag & 7) == 2) {
      WQ_ASSIGN_OR_RETURN(const uint64_t n, w.Varint());
      WQ_ASSIGN_OR_RETURN(const std::string_view piece, w.Bytes(n));
      WQ_RETURN_IF_ERROR(ReadPiece(piece, path, &v));
    } else {
      WQ_RETURN_IF_ERROR(w.Skip(tag & 7));
    }
  }
  if (v.tokens.empty()) return w.Bad();
  return v;
}

// The Split regex of a byte-level pre-tokenizer ("" when there is none).
std::string SplitRegex(const Json& pre) {
  if (!pre.is_object()) return "";
  if (pre.value("type", "") == "Split" && pre.contains("pattern") && pre["pattern"].is_object()) {
    return pre["pattern"].value("Regex", "");
  }
  if (pre.value("type", "") == "Sequence" && pre.contains("pretokenizers")) {
    for (const Json& p : pre["pretokenizers"]) {
      const std::string r = SplitRegex(p);
      if (!r.empty()) return r;
    }
  }
  return "";
}

bool HasByteLevel(const Json& pre) {
  if (!pre.is_object()) return false;
  if (pre.value("type", "") == "ByteLevel") return true;
  if (pre.value("type", "") == "Sequence" && pre.contains("pretokenizers")) {
    for (const Json& p : pre["pretokenizers"]) {
      if (HasByteLevel(p)) return true;
    }
  }
  return false;
}

// Tokens, types and merges of a byte-level BPE tokenizer.json; the name llama.cpp gives
// its pre-tokenizer in *pre.
absl::Status AddByteLevel(const Json& j, const std::string& path, int64_t vocab_size,
                          Metadata* md) {
  const std::string regex = SplitRegex(j["pre_tokenizer"]);
  std::string pre;
  if (regex == model::kLlama3SplitPattern) pre = "llama-bpe";
  if (regex.empty() || regex == model::kGpt2SplitPattern) pre = "gpt-2";
  if (pre.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": pre-tokenizer regex has no llama.cpp name (LLaMA-3's or GPT-2's)"));
  }
  std::vector<std::string> tokens(static_cast<size_t>(vocab_size));
  std::vector<int32_t> types(static_cast<size_t>(vocab_size), kUnused);
  auto put = [&](int64_t id, const std::string& text, int32_t type) -> absl::Status {
    if (id < 0 || id >= vocab_size) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": token id ", id, " outside the model's vocab_size ", vocab_size));
    }
    tokens[id] = text;
    types[id] = type;
    return absl::OkStatus();
  };
  for (const auto& [text, id] : j["model"]["vocab"].items()) {
    WQ_RETURN_IF_ERROR(put(id.get<int64_t>(), text, kNormal));
  }
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const Json& a : j["added_tokens"]) {
      WQ_RETURN_IF_ERROR(put(a.value("id", int64_t{-1}), a.value("content", ""),
                             a.value("special", false) ? kControl : kUserDefined));
    }
  }
  for (int64_t id = 0; id < vocab_size; ++id) {
    if (types[id] == kUnused) tokens[id] = absl::StrCat("[PAD", id, "]");
  }
  std::vector<std::string> merges;
  for (const Json& m : j["model"].value("merges", Json::array())) {
    if (m.is_string()) merges.push_back(m.get<std::string>());
    if (m.is_array() && m.size() == 2) {
      merges.push_back(absl::StrCat(m[0].get<std::string>(), " ", m[1].get<std::string>()));
    }
  }
  md->AddString("tokenizer.ggml.model", "gpt2");
  md->AddString("tokenizer.ggml.pre", pre);
  md->AddStringArray("tokenizer.ggml.tokens", tokens);
  md->AddI32Array("tokenizer.ggml.token_type", types);
  md->AddStringArray("tokenizer.ggml.merges", merges);
  return absl::OkStatus();
}

absl::Status AddSentencePiece(const std::string& model_path, int64_t vocab_size, Metadata* md) {
  if (!base::PathExists(model_path)) {
    return absl::NotFoundError(absl::StrCat(
        model_path, ": missing (a SentencePiece-style tokenizer's GGUF needs its piece scores)"));
  }
  WQ_ASSIGN_OR_RETURN(Vocab v, SentencePieceVocab(model_path));
  if (static_cast<int64_t>(v.tokens.size()) > vocab_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        model_path, ": ", v.tokens.size(), " pieces, the model's vocab_size is ", vocab_size));
  }
  for (int64_t id = static_cast<int64_t>(v.tokens.size()); id < vocab_size; ++id) {
    v.tokens.push_back(absl::StrCat("[PAD", id, "]"));
    v.scores.push_back(0.0f);
    v.types.push_back(kUnused);
  }
  md->AddString("tokenizer.ggml.model", "llama");
  md->AddString("tokenizer.ggml.pre", "default");
  md->AddStringArray("tokenizer.ggml.tokens", v.tokens);
  md->AddF32Array("tokenizer.ggml.scores", v.scores);
  md->AddI32Array("tokenizer.ggml.token_type", v.types);
  if (v.unk >= 0) md->AddU32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v.unk));
  return absl::OkStatus();
}

}  // namespace

absl::Status AddTokenizerMetadata(const std::string& model_dir, const model::LlamaConfig& config,
                                  Metadata* md) {
  const std::filesystem::path dir(model_dir);
  const std::string path = (dir / "tokenizer.json").string();
  WQ_ASSIGN_OR_RETURN(const std::string text, base::ReadFile(path));
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("model") || !j["model"].is_object()) {
    return absl::DataLossError(absl::StrCat(path, ": not a tokenizer.json"));
  }
  const Json& m = j["model"];
  if (m.value("type", "") != "BPE" || !m.contains("vocab") || !m["vocab"].is_object()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": model type '", m.value("type", ""), "' (GGUF export: BPE only)"));
  }
  try {
    if (m.value("byte_fallback", false)) {
      WQ_RETURN_IF_ERROR(
          AddSentencePiece((dir / "tokenizer.model").string(), config.vocab_size, md));
    } else if (HasByteLevel(j["pre_tokenizer"])) {
      WQ_RETURN_IF_ERROR(AddByteLevel(j, path, config.vocab_size, md));
    } else {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": neither SentencePiece-style (byte_fallback) nor byte-level BPE"));
    }
  } catch (const Json::exception& e) {
    return absl::DataLossError(absl::StrCat(path, ": ", e.what()));
  }
  md->AddU32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(config.bos_token_id));
  if (!config.eos_token_ids.empty()) {
    md->AddU32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(config.eos_token_ids[0]));
  }
  md->AddBool("tokenizer.ggml.add_bos_token", true);
  md->AddBool("tokenizer.ggml.add_eos_token", false);
  return absl::OkStatus();
}

}  // namespace windquant::exporter::gguf
