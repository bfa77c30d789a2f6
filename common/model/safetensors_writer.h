// SafetensorsWriter: builds a .safetensors file from tensors (stored as F32,
// F16 or BF16) or raw bytes, and writes it atomically (common/base
// WriteFileAtomic). The header is padded with spaces so the data starts
// 8-byte aligned; tensors are laid out back to back in the order they were
// added; the metadata carries {"format": "pt"} (transformers requires it).
// Used by pretrain, the fits and the unit-table cache, and by the tests that build bad
// files. Memory: every added tensor's bytes until the writer goes (a file too large for
// that: SafetensorsStreamWriter). Thread-compatible.
#ifndef WINDQUANT_COMMON_MODEL_SAFETENSORS_WRITER_H_
#define WINDQUANT_COMMON_MODEL_SAFETENSORS_WRITER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/status.h"
#include "common/model/safetensors.h"

namespace windquant::model {

class SafetensorsWriter {
 public:
  SafetensorsWriter();

  // Adds `tensor` (any floating dtype, any device, any strides), converted to
  // `dtype`, which must be kF32, kF16 or kBF16. Errors: duplicate or empty
  // name, unsupported dtype, a torch error (message included).
  absl::Status Add(const std::string& name, const at::Tensor& tensor, Dtype dtype = Dtype::kF32);
  // Adds raw little-endian bytes of any dtype; `bytes.size()` must equal
  // product(shape) * DtypeSize(dtype).
  absl::Status AddRaw(const std::string& name, Dtype dtype, std::vector<int64_t> shape,
                      std::string bytes);
  // Sets a "__metadata__" string entry ("format" is "pt" unless changed).
  void SetMetadata(const std::string& key, const std::string& value);

  // The complete file contents.
  std::string Serialize() const;
  // Serialize()'s bytes written to `path` atomically (parent directories created),
  // streamed from the entries (no serialised copy in memory).
  absl::Status Write(const std::string& path) const;

  size_t num_tensors() const { return entries_.size(); }

 private:
  struct Entry {
    std::string name;
    Dtype dtype;
    std::vector<int64_t> shape;
    std::string bytes;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace windquant::model

#endif  // WINDQUANT_COMMON_MODEL_SAFETENSORS_WRITER_H_
