#include "common/model/safetensors_writer.h"

#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/model/safetensors_stream_writer.h"

namespace windquant::model {

SafetensorsWriter::SafetensorsWriter() { metadata_["format"] = "pt"; }

absl::Status SafetensorsWriter::Add(const std::string& name, const at::Tensor& tensor,
                                    Dtype dtype) {
  at::ScalarType target;
  switch (dtype) {
    case Dtype::kF32:
      target = at::kFloat;
      break;
    case Dtype::kF16:
      target = at::kHalf;
      break;
    case Dtype::kBF16:
      target = at::kBFloat16;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("safetensors writer: tensor ", name,
                                                     ": dtype ", DtypeName(dtype),
                                                     " not supported from a tensor (use AddRaw)"));
  }
  if (!tensor.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat("safetensors writer: tensor ", name, ": undefined tensor"));
  }
  try {
    at::Tensor t = tensor.detach().to(at::kCPU).to(target).contiguous();
    std::string bytes(static_cast<size_t>(t.numel()) * t.element_size(), '\0');
    if (!bytes.empty()) std::memcpy(bytes.data(), t.data_ptr(), bytes.size());
    return AddRaw(name, dtype, t.sizes().vec(), std::move(bytes));
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("safetensors writer: tensor ", name, ": ", e.what_without_backtrace()));
  }
}

absl::Status SafetensorsWriter::AddRaw(const std::string& name, Dtype dtype,
                                       std::vector<int64_t> shape, std::string bytes) {
  if (name.empty() || name == "__metadata__") {
    return absl::InvalidArgumentError(
        absl::StrCat("safetensors writer: invalid tensor name \"", name, "\""));
  }
  for (const Entry& e : entries_) {
    if (e.name == name) {
      return absl::AlreadyExistsError(
          absl::StrCat("safetensors writer: tensor ", name, ": added twice"));
    }
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("safetensors writer: tensor ", name, ": negative dimension"));
    }
    n *= d;
  }
  if (static_cast<uint64_t>(n * DtypeSize(dtype)) != bytes.size()) {
    return absl::InvalidArgumentError(absl::StrCat("safetensors writer: tensor ", name, ": ",
                                                   bytes.size(), " bytes for ", n, " elements of ",
                                                   DtypeName(dtype)));
  }
  entries_.push_back(Entry{name, dtype, std::move(shape), std::move(bytes)});
  return absl::OkStatus();
}

void SafetensorsWriter::SetMetadata(const std::string& key, const std::string& value) {
  metadata_[key] = value;
}

std::string SafetensorsWriter::Serialize() const {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const Entry& e : entries_) {
    header[e.name] = {{"dtype", DtypeName(e.dtype)},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + e.bytes.size()}}};
    offset += e.bytes.size();
  }
  std::string text = header.dump();
  // Pad with spaces (valid JSON whitespace) so the data starts 8-aligned.
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  std::string out;
  out.reserve(8 + text.size() + offset);
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += text;
  for (const Entry& e : entries_) out += e.bytes;
  return out;
}

absl::Status SafetensorsWriter::Write(const std::string& path) const {
  // Streamed (the same bytes as Serialize(), written atomically): no second copy of the
  // file in memory.
  std::vector<StreamTensor> tensors;
  tensors.reserve(entries_.size());
  for (const Entry& e : entries_) tensors.push_back({e.name, e.dtype, e.shape});
  std::map<std::string, std::string> metadata = metadata_;
  if (metadata.find("format") == metadata.end()) return base::WriteFileAtomic(path, Serialize());
  WQ_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsStreamWriter> out,
                      SafetensorsStreamWriter::Open(path, std::move(tensors), metadata));
  for (const Entry& e : entries_) WQ_RETURN_IF_ERROR(out->Append(e.bytes));
  return out->Finish();
}

}  // namespace windquant::model
