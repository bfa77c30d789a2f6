#include "common/model/tokenizer_decoder.h"

#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/base/status_macros.h"
#include "common/model/tokenizer_pretokenizer.h"
#include "nlohmann/json.hpp"

namespace windquant::model {
namespace {

using tokenizer_json::GetString;
using tokenizer_json::Json;
using tokenizer_json::PrependScheme;

// Runs of "<0xAB>" tokens become their bytes when those are valid UTF-8, else one
// U+FFFD per byte; other tokens pass unchanged.
std::vector<std::string> ByteFallback(std::vector<std::string> toks) {
  std::vector<std::string> out;
  std::string bytes;
  size_t count = 0;
  auto flush = [&] {
    if (count == 0) return;
    if (IsValidUtf8(bytes)) {
      out.push_back(bytes);
    } else {
      std::string r;
      for (size_t k = 0; k < count; ++k) r += "\xEF\xBF\xBD";
      out.push_back(r);
    }
    bytes.clear();
    count = 0;
  };
  for (auto& t : toks) {
    unsigned int b = 0;
    if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
        std::sscanf(t.c_str() + 3, "%2x", &b) == 1) {
      bytes.push_back(static_cast<char>(b));
      ++count;
    } else {
      flush();
      out.push_back(std::move(t));
    }
  }
  flush();
  return out;
}

// Up to `start` copies of `content` off the front of each token, up to `stop` off
// the back.
void Strip(const std::string& content, int start, int stop, std::vector<std::string>* toks) {
  for (auto& t : *toks) {
    size_t b = 0, e = t.size();
    for (int k = 0; k < start && b < e && t.compare(b, content.size(), content) == 0; ++k) {
      b += content.size();
    }
    for (int k = 0; k < stop && e >= b + content.size() &&
                    t.compare(e - content.size(), content.size(), content) == 0;
         ++k) {
      e -= content.size();
    }
    t = t.substr(b, e - b);
  }
}

// The replacement back to spaces; the first token loses the space Metaspace
// prepended unless its scheme is never.
void Metaspace(const std::string& replacement, PrependScheme scheme,
               std::vector<std::string>* toks) {
  for (size_t k = 0; k < toks->size(); ++k) {
    std::string& t = (*toks)[k];
    t = absl::StrReplaceAll(t, {{replacement, " "}});
    if (k == 0 && scheme != PrependScheme::kNever && !t.empty() && t[0] == ' ') {
      t.erase(0, 1);
    }
  }
}

// All tokens as one string: byte-level characters back to bytes, the bytes read as
// (lossy) UTF-8.
std::string ByteLevel(const std::vector<std::string>& toks) {
  std::string bytes;
  for (const auto& t : toks) {
    std::string b;
    if (ByteLevelDecode(t, &b)) {
      bytes += b;
    } else {
      bytes += t;  // e.g. an added token: kept verbatim, as HF does
    }
  }
  return Utf8Lossy(bytes);
}

}  // namespace

absl::Status TokenDecoder::Load(const Json& j, const std::string& where) {
  WQ_RETURN_IF_ERROR(LoadSteps(j, where));
  has_decoder_ = !j.is_null();
  return absl::OkStatus();
}

absl::Status TokenDecoder::LoadSteps(const Json& j, const std::string& where) {
  if (j.is_null()) return absl::OkStatus();
  const std::string type = GetString(j, "type");
  Step step;
  if (type == "Sequence") {
    if (!j.contains("decoders") || !j["decoders"].is_array()) {
      return absl::InvalidArgumentError(where + ".decoders missing");
    }
    for (size_t i = 0; i < j["decoders"].size(); ++i) {
      WQ_RETURN_IF_ERROR(LoadSteps(j["decoders"][i], absl::StrCat(where, ".decoders[", i, "]")));
    }
    return absl::OkStatus();
  } else if (type == "Replace") {
    step.kind = Kind::kReplace;
    WQ_ASSIGN_OR_RETURN(step.a, tokenizer_json::StringPattern(j.value("pattern", Json()), where));
    step.b = GetString(j, "content");
  } else if (type == "ByteFallback") {
    step.kind = Kind::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = Kind::kFuse;
  } else if (type == "Strip") {
    step.kind = Kind::kStrip;
    step.a = GetString(j, "content", " ");
    step.start = j.value("start", 0);
    step.stop = j.value("stop", 0);
  } else if (type == "Metaspace") {
    step.kind = Kind::kMetaspace;
    step.a = GetString(j, "replacement", "\xE2\x96\x81");
    WQ_ASSIGN_OR_RETURN(step.scheme, tokenizer_json::ParsePrependScheme(j, where));
  } else if (type == "ByteLevel") {
    step.kind = Kind::kByteLevel;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ".type ", type,
        " unsupported (Sequence, Replace, ByteFallback, Fuse, Strip, Metaspace, ByteLevel)"));
  }
  steps_.push_back(step);
  return absl::OkStatus();
}

std::string TokenDecoder::Decode(std::vector<std::string> toks) const {
  for (const Step& d : steps_) {
    switch (d.kind) {
      case Kind::kReplace:
        for (auto& t : toks) t = absl::StrReplaceAll(t, {{d.a, d.b}});
        break;
      case Kind::kByteFallback:
        toks = ByteFallback(std::move(toks));
        break;
      case Kind::kFuse: {
        std::string all;
        for (auto& t : toks) all += t;
        toks.assign(1, std::move(all));
        break;
      }
      case Kind::kStrip:
        Strip(d.a, d.start, d.stop, &toks);
        break;
      case Kind::kMetaspace:
        Metaspace(d.a, d.scheme, &toks);
        break;
      case Kind::kByteLevel:
        toks.assign(1, ByteLevel(toks));
        break;
    }
  }
  std::string text;
  for (size_t k = 0; k < toks.size(); ++k) {
    if (k > 0 && !has_decoder_) text += ' ';
    text += toks[k];
  }
  return text;
}

}  // namespace windquant::model
