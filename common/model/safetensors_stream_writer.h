// SafetensorsStreamWriter: writes a .safetensors file whose tensors are known
// up front (name, dtype, shape) but whose bytes arrive one piece at a time, so
// that a writer of a multi-gigabyte file holds at most the piece it is
// appending (SafetensorsWriter holds the whole file). The header (padded so
// the data starts 8-byte aligned, {"format": "pt"} metadata, tensors back to
// back in the declared order) is written by Open; Append adds the bytes of the
// tensors in that order; Finish checks that every declared byte arrived,
// fsyncs and renames the temporary file onto `path` (a reader never sees a
// half-written file).
// Memory: the declared tensor list and the header text. Thread-compatible.
#ifndef WINDQUANT_COMMON_MODEL_SAFETENSORS_STREAM_WRITER_H_
#define WINDQUANT_COMMON_MODEL_SAFETENSORS_STREAM_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/safetensors.h"

namespace windquant::model {

struct StreamTensor {
  std::string name;
  Dtype dtype = Dtype::kF32;
  std::vector<int64_t> shape;
  uint64_t num_bytes() const;
};

class SafetensorsStreamWriter {
 public:
  // Creates `path`'s parent directories and a temporary file beside it, and
  // writes the header. Errors: empty / duplicate / "__metadata__" names,
  // negative dimensions (INVALID_ARGUMENT naming the tensor), I/O (naming the
  // file).
  static absl::StatusOr<std::unique_ptr<SafetensorsStreamWriter>> Open(
      const std::string& path, std::vector<StreamTensor> tensors,
      const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsStreamWriter();  // removes the temporary file unless Finish succeeded
  SafetensorsStreamWriter(const SafetensorsStreamWriter&) = delete;
  SafetensorsStreamWriter& operator=(const SafetensorsStreamWriter&) = delete;

  // Appends bytes of the data section (the tensors' bytes in declared order;
  // a tensor may arrive in several pieces). FAILED_PRECONDITION past the end.
  absl::Status Append(std::string_view bytes);
  // The tensor the next Append belongs to (nullptr when all bytes arrived).
  const StreamTensor* current() const;
  // Fsyncs and renames onto `path`. FAILED_PRECONDITION when bytes are missing.
  absl::Status Finish();

  // Total file size once finished (header + data).
  uint64_t file_size() const { return data_offset_ + data_size_; }

 private:
  SafetensorsStreamWriter() = default;

  std::string path_, tmp_path_;
  std::FILE* file_ = nullptr;
  std::vector<StreamTensor> tensors_;
  std::vector<uint64_t> ends_;  // cumulative end offset of each tensor
  uint64_t data_offset_ = 0, data_size_ = 0, written_ = 0;
  size_t cursor_ = 0;  // first tensor whose end is past written_ (current())
  bool finished_ = false;
};

}  // namespace windquant::model

#endif  // WINDQUANT_COMMON_MODEL_SAFETENSORS_STREAM_WRITER_H_
