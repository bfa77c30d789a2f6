#include "common/model/safetensors_stream_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace windquant::model {

uint64_t StreamTensor::num_bytes() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return static_cast<uint64_t>(n * DtypeSize(dtype));
}

absl::StatusOr<std::unique_ptr<SafetensorsStreamWriter>> SafetensorsStreamWriter::Open(
    const std::string& path, std::vector<StreamTensor> tensors,
    const std::map<std::string, std::string>& metadata) {
  std::unique_ptr<SafetensorsStreamWriter> w(new SafetensorsStreamWriter());
  w->path_ = path;
  nlohmann::json header = nlohmann::json::object();
  std::map<std::string, std::string> meta = {{"format", "pt"}};
  for (const auto& [k, v] : metadata) meta[k] = v;
  header["__metadata__"] = meta;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const StreamTensor& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || !names.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor name \"", t.name, "\" empty, reserved or repeated"));
    }
    for (int64_t d : t.shape) {
      if (d < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": tensor ", t.name, ": negative dimension"));
      }
    }
    const uint64_t n = t.num_bytes();
    header[t.name] = {
        {"dtype", DtypeName(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
    w->ends_.push_back(offset);
  }
  w->tensors_ = std::move(tensors);
  w->data_size_ = offset;
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  w->data_offset_ = 8 + text.size();

  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  std::random_device rd;
  w->tmp_path_ = absl::StrCat(path, ".tmp.", getpid(), ".", rd());
  w->file_ = std::fopen(w->tmp_path_.c_str(), "wb");
  if (w->file_ == nullptr) {
    return absl::InternalError(
        absl::StrCat(w->tmp_path_, ": cannot create: ", std::strerror(errno)));
  }
  char len[8];
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  if (std::fwrite(len, 1, 8, w->file_) != 8 ||
      std::fwrite(text.data(), 1, text.size(), w->file_) != text.size()) {
    return absl::InternalError(absl::StrCat(path, ": header write failed"));
  }
  while (w->cursor_ < w->ends_.size() && w->ends_[w->cursor_] == 0) ++w->cursor_;
  return w;
}

SafetensorsStreamWriter::~SafetensorsStreamWriter() {
  if (file_ != nullptr) std::fclose(file_);
  if (!finished_ && !tmp_path_.empty()) ::unlink(tmp_path_.c_str());
}

const StreamTensor* SafetensorsStreamWriter::current() const {
  return cursor_ < ends_.size() ? &tensors_[cursor_] : nullptr;
}

absl::Status SafetensorsStreamWriter::Append(std::string_view bytes) {
  if (file_ == nullptr) return absl::FailedPreconditionError(absl::StrCat(path_, ": not open"));
  if (written_ + bytes.size() > data_size_) {
    return absl::FailedPreconditionError(absl::StrCat(path_, ": ", written_ + bytes.size(),
                                                      " data bytes appended, the header declares ",
                                                      data_size_));
  }
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
    return absl::InternalError(absl::StrCat(path_, ": write failed: ", std::strerror(errno)));
  }
  written_ += bytes.size();
  // O(1) per call: a file of a 70B model declares ~10^5 tensors.
  while (cursor_ < ends_.size() && written_ >= ends_[cursor_]) ++cursor_;
  return absl::OkStatus();
}

absl::Status SafetensorsStreamWriter::Finish() {
  if (file_ == nullptr) return absl::FailedPreconditionError(absl::StrCat(path_, ": not open"));
  if (written_ != data_size_) {
    const StreamTensor* t = current();
    return absl::FailedPreconditionError(absl::StrCat(path_, ": ", data_size_ - written_,
                                                      " data bytes missing (tensor ",
                                                      t != nullptr ? t->name : "?", ")"));
  }
  const bool flushed = std::fflush(file_) == 0 && ::fsync(fileno(file_)) == 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!flushed || !closed) return absl::InternalError(absl::StrCat(path_, ": fsync/close failed"));
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    return absl::InternalError(absl::StrCat(path_, ": rename failed: ", std::strerror(errno)));
  }
  finished_ = true;
  return absl::OkStatus();
}

}  // namespace windquant::model
