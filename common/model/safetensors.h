// SafetensorsFile: one .safetensors file, memory-mapped (or held in memory),
// with its header parsed and validated. No torch here on purpose: the parser
// is also built alone under libFuzzer (common/model/safetensors_fuzz.cc,
// scripts/fuzz-safetensors.sh); conversion to at::Tensor is in checkpoint.cc.
//
// Format (https://github.com/huggingface/safetensors): 8-byte little-endian
// header length N, N bytes of JSON header
//   {"__metadata__": {"k": "v"}, "<name>": {"dtype": "F32", "shape": [..],
//    "data_offsets": [begin, end]}, ...}
// then the data; offsets are relative to the start of the data. Validation
// follows the reference implementation: offsets inside the data, sizes equal
// to shape x dtype size, and the tensors, sorted by offset, cover the data
// exactly (no overlap, no gap, nothing after the last one).
//
// Thread-safety: immutable after construction; all methods may be called
// concurrently. Mapping a file reads nothing but the pages that are touched:
// the header at Open, and a tensor's bytes when its Data() is used.
#ifndef WINDQUANT_COMMON_MODEL_SAFETENSORS_H_
#define WINDQUANT_COMMON_MODEL_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace windquant::model {

// The dtypes of the safetensors format. Only kF32, kF16 and kBF16 convert to
// float32 (Checkpoint); the others are parsed so that quantized files (packed
// codes in U8, INT8 salient weights) are valid files too.
enum class Dtype {
  kBool,
  kU8,
  kI8,
  kF8E5M2,
  kF8E4M3,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kF64,
  kI64,
  kU64
};

// "F32" -> kF32; NotFound-style InvalidArgument for an unknown name.
absl::StatusOr<Dtype> DtypeFromName(std::string_view name);
// kF32 -> "F32".
const char* DtypeName(Dtype dtype);
// Bytes per element.
int64_t DtypeSize(Dtype dtype);

struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::kF32;
  std::vector<int64_t> shape;
  // Offsets relative to the start of the data section, [begin, end).
  uint64_t begin = 0;
  uint64_t end = 0;
  int64_t num_elements() const;
  uint64_t num_bytes() const { return end - begin; }
};

// Header limit: the reference implementation refuses headers over 100 MB.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

class SafetensorsFile {
 public:
  // Maps `path` read-only and validates the header. Errors (one line, naming
  // the file and, where it applies, the tensor): NOT_FOUND for a missing
  // file, DATA_LOSS for a truncated file / header length beyond the file /
  // offsets outside the data, overlapping or not covering it,
  // INVALID_ARGUMENT for invalid JSON, an unknown dtype or a bad shape.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  // Parses a file held in memory (takes ownership of the bytes); `source` is
  // the name used in errors. Same validation as Open. Used by the fuzzer.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> FromBuffer(std::string bytes,
                                                                     std::string source);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // Tensors sorted by offset.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // nullptr when absent.
  const TensorInfo* Find(std::string_view name) const;
  // The raw bytes of a tensor of this file (little-endian, unaligned).
  std::string_view Data(const TensorInfo& info) const;
  // Tells the kernel that this process is done with the pages of `info` for now
  // (madvise MADV_DONTNEED on the whole pages inside its bytes): a caller that has
  // copied a tensor out of the mapping does not keep a second, file-backed copy
  // resident. Data() stays valid (the pages are read again on access). No-op for
  // FromBuffer files.
  void ReleasePages(const TensorInfo& info) const;
  // Offset of the data section in the file (8 + header length).
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return size_; }

 private:
  SafetensorsFile() = default;
  absl::Status Parse();

  std::string path_;
  std::string buffer_;           // FromBuffer
  void* mapping_ = nullptr;      // Open
  const char* bytes_ = nullptr;  // start of the file
  uint64_t size_ = 0;
  uint64_t data_offset_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;  // name -> position in tensors_
  std::map<std::string, std::string> metadata_;
};

}  // namespace windquant::model

#endif  // WINDQUANT_COMMON_MODEL_SAFETENSORS_H_
