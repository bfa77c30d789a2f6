#include "common/quant/table_fingerprint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/base/text_range.h"
#include "common/model/tokenizer.h"
#include "common/quant/unit_fit.h"

namespace windquant::quant {
namespace {

namespace fs = std::filesystem;

std::string Exact(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// Name, size, header digest and sampled-data digest of one safetensors file.
absl::StatusOr<std::string> FileKey(const fs::path& path) {
  const std::string where = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(where, ": cannot open"));
  std::error_code ec;
  const int64_t size = static_cast<int64_t>(fs::file_size(path, ec));
  if (ec) return absl::NotFoundError(absl::StrCat(where, ": ", ec.message()));
  unsigned char len_bytes[8];
  if (size < 8 || !in.read(reinterpret_cast<char*>(len_bytes), 8)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": not a safetensors file (no header)"));
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > static_cast<uint64_t>(size - 8)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": header of ", header_len, " bytes past the end of the file"));
  }
  std::string header(header_len, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(header_len))) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": truncated header"));
  }
  const int64_t data_begin = 8 + static_cast<int64_t>(header_len);
  const int64_t data_size = size - data_begin;
  const int64_t window = std::min(kModelKeySampleBytes, data_size);
  std::string samples;
  for (int i = 0; i < kModelKeySamples && window > 0; ++i) {
    const int64_t offset =
        data_begin +
        (kModelKeySamples == 1 ? 0 : (data_size - window) * i / (kModelKeySamples - 1));
    std::string buf(static_cast<size_t>(window), '\0');
    in.seekg(offset);
    if (!in.read(buf.data(), window)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": cannot read at offset ", offset));
    }
    samples += base::Sha256Hex(buf);
  }
  return absl::StrCat(path.filename().string(), ":", size, ":", base::Sha256Hex(header), ":",
                      base::Sha256Hex(samples));
}

}  // namespace

absl::StatusOr<std::string> ModelKey(const std::string& model_dir, int64_t chunk_size,
                                     const QuantizerOptions& q) {
  WQ_ASSIGN_OR_RETURN(std::string config, base::ReadFile(model_dir + "/config.json"));
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(model_dir, ec)) {
    if (absl::EndsWith(entry.path().filename().string(), ".safetensors")) {
      files.push_back(entry.path());
    }
  }
  if (ec) return absl::NotFoundError(absl::StrCat(model_dir, ": ", ec.message()));
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat(model_dir, ": no *.safetensors file"));
  }
  std::sort(files.begin(), files.end());
  std::string key = absl::StrCat("windquant.model_key.v2\n", config);
  for (const fs::path& f : files) {
    WQ_ASSIGN_OR_RETURN(std::string file_key, FileKey(f));
    absl::StrAppend(&key, "\n", file_key);
  }
  absl::StrAppend(&key, "\nchunk_size=", chunk_size);
  for (double v :
       {q.salient_fraction, static_cast<double>(q.clip_grid_points), q.clip_min_ratio,
        static_cast<double>(q.ternary_grid_points), q.ternary_min_ratio, q.ternary_max_ratio,
        static_cast<double>(q.refine_steps), static_cast<double>(q.binarize_steps), q.switch_margin,
        static_cast<double>(q.fp16_neighbors)}) {
    absl::StrAppend(&key, "\n", Exact(v));
  }
  return base::Sha256Hex(key);
}

std::string CalibrationKey(int samples, int seq_len, uint64_t seed,
                           const std::vector<int32_t>& calibration_ids) {
  std::string bytes = absl::StrCat("samples=", samples, " seq_len=", seq_len, " seed=", seed, "\n");
  bytes.append(reinterpret_cast<const char*>(calibration_ids.data()),
               calibration_ids.size() * sizeof(int32_t));
  return base::Sha256Hex(bytes);
}

std::string TableFingerprint(const std::string& model_key, const std::string& calibration_key) {
  return base::Sha256Hex(absl::StrCat(model_key, "\n", calibration_key));
}

absl::StatusOr<std::string> RunTableFingerprint(const std::string& model_dir,
                                                const UnitTableOptions& units,
                                                const CalibrationOptions& calibration,
                                                const std::vector<int32_t>& calibration_ids) {
  WQ_ASSIGN_OR_RETURN(const std::string model_key,
                      ModelKey(model_dir, units.chunk_size, QuantizerFor(units)));
  const CalibrationOptions& c = calibration;
  return TableFingerprint(model_key, CalibrationKey(c.samples, c.seq_len, c.seed, calibration_ids));
}

absl::StatusOr<std::string> RunTableFingerprint(const std::string& model_dir,
                                                const UnitTableOptions& units,
                                                const CalibrationOptions& calibration) {
  WQ_ASSIGN_OR_RETURN(
      std::unique_ptr<model::Tokenizer> tokenizer,
      model::Tokenizer::FromFile((std::filesystem::path(model_dir) / "tokenizer.json").string()));
  const base::TextEncoder encode = [&tok = *tokenizer](std::string_view text) {
    return tok.Encode(text, /*add_bos=*/false);
  };
  WQ_ASSIGN_OR_RETURN(const std::vector<int32_t> ids,
                      base::ReadTextRange(calibration.range(), "calibration", encode));
  return RunTableFingerprint(model_dir, units, calibration, ids);
}

}  // namespace windquant::quant
