// The GGUF container (version 3, little-endian; docs/gguf.md): a header (magic, version,
// tensor and key counts), the metadata key/value pairs, the tensor infos (name, dims with
// the row length first, type, offset in the data section) and the data section, every
// tensor starting at a multiple of the alignment (32).
//
// GgufWriter streams a file whose tensors are declared up front: Open writes the header,
// AppendTensor the bytes of the tensors in declared order (one tensor in memory at a
// time), Finish fsyncs and renames the temporary onto the path (a reader never sees half a
// file). GgufFile maps a file read-only and checks its header: every count, string and
// tensor lies inside the file; one-line errors naming the file. Memory: the writer holds
// the metadata bytes and the tensor list; the reader the parsed header (the data stays
// in the mapping). Writer thread-compatible; reader const methods thread-safe.
#ifndef WINDQUANT_COMMON_EXPORT_GGUF_FILE_H_
#define WINDQUANT_COMMON_EXPORT_GGUF_FILE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/base/atomic_file_writer.h"
#include "common/export/gguf_format.h"

namespace windquant::exporter::gguf {

// A tensor of the file. dims[0] is the row length (ggml's ne[0]): a [out, in] linear is
// {in, out}.
struct TensorInfo {
  std::string name;
  std::vector<int64_t> dims;
  TensorType type = TensorType::kF32;
  uint64_t offset = 0;  // in the data section (set by the writer / read)
  int64_t values() const;
  // Bytes of the tensor's data (rows x RowBytes); INVALID_ARGUMENT for a bad row length.
  absl::StatusOr<uint64_t> bytes() const;
};

// The metadata of a file, serialised as it is added (keys in the order added).
class Metadata {
 public:
  void AddU32(const std::string& key, uint32_t v);
  void AddI32(const std::string& key, int32_t v);
  void AddF32(const std::string& key, float v);
  void AddBool(const std::string& key, bool v);
  void AddString(const std::string& key, std::string_view v);
  void AddStringArray(const std::string& key, const std::vector<std::string>& v);
  void AddF32Array(const std::string& key, const std::vector<float>& v);
  void AddI32Array(const std::string& key, const std::vector<int32_t>& v);
  uint64_t count() const { return count_; }
  const std::string& bytes() const { return bytes_; }

 private:
  void Key(const std::string& key, ValueType type);
  std::string bytes_;
  uint64_t count_ = 0;
};

class GgufWriter {
 public:
  // Creates the temporary beside `path` and writes header, metadata and tensor infos
  // (offsets computed here). INVALID_ARGUMENT naming the tensor for an empty or duplicate
  // name or a row length that is not a multiple of its type's block; I/O errors name the file.
  static absl::StatusOr<std::unique_ptr<GgufWriter>> Open(const std::string& path,
                                                          const Metadata& metadata,
                                                          std::vector<TensorInfo> tensors);
  // The next declared tensor's bytes, whole. INTERNAL naming both when the name or the
  // size is not the declared one.
  absl::Status AppendTensor(const std::string& name, std::string_view bytes);
  // FAILED_PRECONDITION when tensors are missing; then fsync + rename.
  absl::Status Finish();

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  uint64_t tensor_bytes() const { return tensor_bytes_; }  // sum of the tensors' data bytes
  uint64_t file_bytes() const { return file_bytes_; }      // the whole file once finished

 private:
  GgufWriter() = default;
  absl::Status Pad(uint64_t to);

  base::AtomicFileWriter out_;
  std::string path_;
  std::vector<TensorInfo> tensors_;
  std::vector<uint64_t> sizes_;
  size_t next_ = 0;
  uint64_t data_start_ = 0, written_ = 0, tensor_bytes_ = 0, file_bytes_ = 0;
};

// A metadata value as read: numbers (any integer, float or bool type) in `number`,
// strings in `text`, arrays in `numbers` / `texts` with `element` their type.
struct Value {
  ValueType type = ValueType::kU32;
  double number = 0;
  std::string text;
  ValueType element = ValueType::kU32;
  std::vector<double> numbers;
  std::vector<std::string> texts;
};

class GgufFile {
 public:
  // Maps `path` and parses its header. Errors (one line, naming the file): NOT_FOUND,
  // INVALID_ARGUMENT "not a GGUF file" (magic) or an unsupported version, DATA_LOSS
  // "truncated" for anything that runs past the end (header, a string, a tensor's data),
  // DATA_LOSS for an unknown value or tensor type, a duplicate name, a misaligned offset.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  const std::map<std::string, Value>& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* Find(const std::string& name) const;  // nullptr when absent

  // Metadata getters: NOT_FOUND / INVALID_ARGUMENT naming the file and key.
  absl::StatusOr<double> Number(const std::string& key) const;
  absl::StatusOr<std::string> Text(const std::string& key) const;

  // The tensor's bytes (inside the mapping; valid for the object's life).
  absl::Span<const uint8_t> Bytes(const TensorInfo& t) const;
  // The tensor decoded to float32, row after row ([values]). UNIMPLEMENTED for a type
  // without a codec, naming the tensor.
  absl::StatusOr<std::vector<float>> Decode(const TensorInfo& t) const;
  uint64_t size_bytes() const { return size_; }

 private:
  GgufFile() = default;
  absl::Status Parse();

  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t data_start_ = 0;
  std::map<std::string, Value> metadata_;
  std::vector<TensorInfo> tensors_;
};

}  // namespace windquant::exporter::gguf

#endif  // WINDQUANT_COMMON_EXPORT_GGUF_FILE_H_
