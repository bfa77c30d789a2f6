#include "common/export/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace windquant::exporter::gguf {
namespace {

// Limits that keep a hostile header from asking for absurd allocations.
constexpr uint64_t kMaxDims = 4;
constexpr uint64_t kMaxCount = uint64_t{1} << 32;

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));  // little-endian hosts
}
void PutString(std::string* out, std::string_view s) {
  Put<uint64_t>(out, s.size());
  out->append(s.data(), s.size());
}

uint64_t AlignUp(uint64_t x) { return (x + kAlignment - 1) / kAlignment * kAlignment; }

// Reads the header: every read checks the end of the file.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, const std::string& path)
      : data_(data), size_(size), path_(path) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  template <typename T>
  absl::StatusOr<T> Get(const char* what) {
    if (size_ - pos_ < sizeof(T)) return Truncated(what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  absl::StatusOr<std::string> String(const char* what) {
    WQ_ASSIGN_OR_RETURN(const uint64_t n, Get<uint64_t>(what));
    if (size_ - pos_ < n) return Truncated(what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  absl::Status Truncated(const std::string& what) const {
    return absl::DataLossError(absl::StrCat(path_, ": truncated GGUF file (", what, " at byte ",
                                            pos_, " runs past the file's ", size_, " bytes)"));
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& path_;
};

template <typename T>
absl::StatusOr<double> Number(Cursor* c, const char* what) {
  absl::StatusOr<T> v = c->Get<T>(what);
  if (!v.ok()) return v.status();
  return static_cast<double>(*v);
}

// One scalar of `type` as a number (the caller checked IsScalar).
absl::StatusOr<double> Scalar(Cursor* c, ValueType type, const std::string& what) {
  const char* w = what.c_str();
  switch (type) {
    case ValueType::kU8:
      return Number<uint8_t>(c, w);
    case ValueType::kI8:
      return Number<int8_t>(c, w);
    case ValueType::kU16:
      return Number<uint16_t>(c, w);
    case ValueType::kI16:
      return Number<int16_t>(c, w);
    case ValueType::kU32:
      return Number<uint32_t>(c, w);
    case ValueType::kI32:
      return Number<int32_t>(c, w);
    case ValueType::kF32:
      return Number<float>(c, w);
    case ValueType::kBool:
      return Number<uint8_t>(c, w);
    case ValueType::kU64:
      return Number<uint64_t>(c, w);
    case ValueType::kI64:
      return Number<int64_t>(c, w);
    case ValueType::kF64:
      return Number<double>(c, w);
    default:
      return absl::InternalError(absl::StrCat(what, ": not a scalar"));
  }
}

bool IsScalar(uint32_t t) {
  return t <= static_cast<uint32_t>(ValueType::kF64) &&
         t != static_cast<uint32_t>(ValueType::kString) &&
         t != static_cast<uint32_t>(ValueType::kArray);
}

// One metadata value of `type` (a scalar, a string or an array of either).
absl::StatusOr<Value> ReadValue(Cursor* c, uint32_t type, const std::string& what,
                                const std::string& path) {
  Value v;
  v.type = static_cast<ValueType>(type);
  if (type == static_cast<uint32_t>(ValueType::kString)) {
    WQ_ASSIGN_OR_RETURN(v.text, c->String(what.c_str()));
    return v;
  }
  if (IsScalar(type)) {
    WQ_ASSIGN_OR_RETURN(v.number, Scalar(c, v.type, what));
    return v;
  }
  if (type != static_cast<uint32_t>(ValueType::kArray)) {
    return absl::DataLossError(absl::StrCat(path, ": ", what, ": unknown value type ", type));
  }
  WQ_ASSIGN_OR_RETURN(const uint32_t el, c->Get<uint32_t>(what.c_str()));
  WQ_ASSIGN_OR_RETURN(const uint64_t n, c->Get<uint64_t>(what.c_str()));
  if (n > c->left()) return c->Truncated(what);  // every element takes a byte or more
  v.element = static_cast<ValueType>(el);
  for (uint64_t i = 0; i < n; ++i) {
    if (el == static_cast<uint32_t>(ValueType::kString)) {
      WQ_ASSIGN_OR_RETURN(std::string s, c->String(what.c_str()));
      v.texts.push_back(std::move(s));
    } else if (IsScalar(el)) {
      WQ_ASSIGN_OR_RETURN(const double x, Scalar(c, v.element, what));
      v.numbers.push_back(x);
    } else {
      return absl::DataLossError(absl::StrCat(path, ": ", what, ": array of type ", el));
    }
  }
  return v;
}

// One tensor info: name, dims (1..4, each in (0, 2^32]), type, offset.
absl::StatusOr<TensorInfo> ReadTensorInfo(Cursor* c, const std::string& path) {
  TensorInfo t;
  WQ_ASSIGN_OR_RETURN(t.name, c->String("a tensor name"));
  WQ_ASSIGN_OR_RETURN(const uint32_t n_dims, c->Get<uint32_t>("a tensor's dims"));
  if (n_dims == 0 || n_dims > kMaxDims) {
    return absl::DataLossError(absl::StrCat(path, ": tensor ", t.name, ": ", n_dims, " dims"));
  }
  for (uint32_t d = 0; d < n_dims; ++d) {
    WQ_ASSIGN_OR_RETURN(const uint64_t ne, c->Get<uint64_t>("a tensor's dims"));
    if (ne == 0 || ne > kMaxCount) {
      return absl::DataLossError(absl::StrCat(path, ": tensor ", t.name, ": dim ", d, " = ", ne));
    }
    t.dims.push_back(static_cast<int64_t>(ne));
  }
  WQ_ASSIGN_OR_RETURN(const uint32_t type, c->Get<uint32_t>("a tensor type"));
  const std::optional<TensorType> tt = TensorTypeFrom(type);
  if (!tt.has_value()) {
    return absl::DataLossError(absl::StrCat(path, ": tensor ", t.name, ": unknown type ", type));
  }
  t.type = *tt;
  WQ_ASSIGN_OR_RETURN(t.offset, c->Get<uint64_t>("a tensor offset"));
  return t;
}

}  // namespace

int64_t TensorInfo::values() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

absl::StatusOr<uint64_t> TensorInfo::bytes() const {
  if (dims.empty()) return absl::InvalidArgumentError(absl::StrCat("tensor ", name, ": no dims"));
  absl::StatusOr<uint64_t> row = RowBytes(type, dims[0]);
  if (!row.ok())
    return absl::InvalidArgumentError(absl::StrCat("tensor ", name, ": ", row.status().message()));
  uint64_t rows = 1;
  for (size_t i = 1; i < dims.size(); ++i) {
    if (dims[i] <= 0)
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", name, ": dim ", i, " is ", dims[i]));
    rows *= static_cast<uint64_t>(dims[i]);
  }
  return *row * rows;
}

void Metadata::Key(const std::string& key, ValueType type) {
  PutString(&bytes_, key);
  Put<uint32_t>(&bytes_, static_cast<uint32_t>(type));
  ++count_;
}
void Metadata::AddU32(const std::string& key, uint32_t v) {
  Key(key, ValueType::kU32);
  Put(&bytes_, v);
}
void Metadata::AddI32(const std::string& key, int32_t v) {
  Key(key, ValueType::kI32);
  Put(&bytes_, v);
}
void Metadata::AddF32(const std::string& key, float v) {
  Key(key, ValueType::kF32);
  Put(&bytes_, v);
}
void Metadata::AddBool(const std::string& key, bool v) {
  Key(key, ValueType::kBool);
  Put<uint8_t>(&bytes_, v ? 1 : 0);
}
void Metadata::AddString(const std::string& key, std::string_view v) {
  Key(key, ValueType::kString);
  PutString(&bytes_, v);
}
void Metadata::AddStringArray(const std::string& key, const std::vector<std::string>& v) {
  Key(key, ValueType::kArray);
  Put<uint32_t>(&bytes_, static_cast<uint32_t>(ValueType::kString));
  Put<uint64_t>(&bytes_, v.size());
  for (const std::string& s : v) PutString(&bytes_, s);
}
void Metadata::AddF32Array(const std::string& key, const std::vector<float>& v) {
  Key(key, ValueType::kArray);
  Put<uint32_t>(&bytes_, static_cast<uint32_t>(ValueType::kF32));
  Put<uint64_t>(&bytes_, v.size());
  for (float x : v) Put(&bytes_, x);
}
void Metadata::AddI32Array(const std::string& key, const std::vector<int32_t>& v) {
  Key(key, ValueType::kArray);
  Put<uint32_t>(&bytes_, static_cast<uint32_t>(ValueType::kI32));
  Put<uint64_t>(&bytes_, v.size());
  for (int32_t x : v) Put(&bytes_, x);
}

absl::StatusOr<std::unique_ptr<GgufWriter>> GgufWriter::Open(const std::string& path,
                                                             const Metadata& metadata,
                                                             std::vector<TensorInfo> tensors) {
  std::unique_ptr<GgufWriter> w(new GgufWriter());
  w->path_ = path;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (TensorInfo& t : tensors) {
    if (t.name.empty() || !names.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": empty or duplicate tensor name '", t.name, "'"));
    }
    WQ_ASSIGN_OR_RETURN(const uint64_t bytes, t.bytes());
    t.offset = offset;
    w->sizes_.push_back(bytes);
    w->tensor_bytes_ += bytes;
    offset = AlignUp(offset + bytes);
  }
  std::string head;
  Put<uint32_t>(&head, kMagic);
  Put<uint32_t>(&head, kVersion);
  Put<uint64_t>(&head, tensors.size());
  Put<uint64_t>(&head, metadata.count());
  head += metadata.bytes();
  for (const TensorInfo& t : tensors) {
    PutString(&head, t.name);
    Put<uint32_t>(&head, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) Put<uint64_t>(&head, static_cast<uint64_t>(d));
    Put<uint32_t>(&head, static_cast<uint32_t>(t.type));
    Put<uint64_t>(&head, t.offset);
  }
  w->tensors_ = std::move(tensors);
  WQ_RETURN_IF_ERROR(w->out_.Open(path));
  WQ_RETURN_IF_ERROR(w->out_.Append(head));
  w->written_ = head.size();
  w->data_start_ = AlignUp(head.size());
  WQ_RETURN_IF_ERROR(w->Pad(w->data_start_));
  return w;
}

absl::Status GgufWriter::Pad(uint64_t to) {
  if (to <= written_) return absl::OkStatus();
  const std::string zeros(to - written_, '\0');
  written_ = to;
  return out_.Append(zeros);
}

absl::Status GgufWriter::AppendTensor(const std::string& name, std::string_view bytes) {
  if (next_ >= tensors_.size() || tensors_[next_].name != name || sizes_[next_] != bytes.size()) {
    return absl::InternalError(absl::StrCat(
        path_, ": tensor ", name, " (", bytes.size(), " bytes) where the declaration has ",
        next_ < tensors_.size() ? tensors_[next_].name : "nothing", " (",
        next_ < tensors_.size() ? sizes_[next_] : 0, " bytes)"));
  }
  WQ_RETURN_IF_ERROR(Pad(data_start_ + tensors_[next_].offset));
  WQ_RETURN_IF_ERROR(out_.Append(absl::string_view(bytes.data(), bytes.size())));
  written_ += bytes.size();
  ++next_;
  return absl::OkStatus();
}

absl::Status GgufWriter::Finish() {
  if (next_ != tensors_.size()) {
    return absl::FailedPreconditionError(absl::StrCat(path_, ": tensor ", tensors_[next_].name,
                                                      " and ", tensors_.size() - next_ - 1,
                                                      " more were never written"));
  }
  file_bytes_ = written_;
  return out_.Commit().status();
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ > 0) {
    void* m = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      return absl::InternalError(absl::StrCat(path, ": mmap: ", std::strerror(errno)));
    }
    f->data_ = static_cast<const uint8_t*>(m);
  }
  ::close(fd);
  WQ_RETURN_IF_ERROR(f->Parse());
  return f;
}

GgufFile::~GgufFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

absl::Status GgufFile::Parse() {
  Cursor c(data_, size_, path_);
  if (size_ < 4 || std::memcmp(data_, "GGUF", 4) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": not a GGUF file (no GGUF magic)"));
  }
  WQ_RETURN_IF_ERROR(c.Get<uint32_t>("magic").status());
  WQ_ASSIGN_OR_RETURN(version_, c.Get<uint32_t>("version"));
  if (version_ != 2 && version_ != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": GGUF version ", version_, " (windquant reads 2 and 3)"));
  }
  WQ_ASSIGN_OR_RETURN(const uint64_t n_tensors, c.Get<uint64_t>("tensor count"));
  WQ_ASSIGN_OR_RETURN(const uint64_t n_kv, c.Get<uint64_t>("key count"));
  if (n_tensors > kMaxCount || n_kv > kMaxCount) return c.Truncated("the counts");
  for (uint64_t k = 0; k < n_kv; ++k) {
    WQ_ASSIGN_OR_RETURN(std::string key, c.String("a key"));
    WQ_ASSIGN_OR_RETURN(const uint32_t type, c.Get<uint32_t>("a value type"));
    WQ_ASSIGN_OR_RETURN(Value v, ReadValue(&c, type, absl::StrCat("key ", key), path_));
    if (!metadata_.emplace(key, std::move(v)).second) {
      return absl::DataLossError(absl::StrCat(path_, ": duplicate key ", key));
    }
  }
  std::set<std::string> names;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    WQ_ASSIGN_OR_RETURN(TensorInfo t, ReadTensorInfo(&c, path_));
    if (!names.insert(t.name).second) {
      return absl::DataLossError(absl::StrCat(path_, ": duplicate tensor ", t.name));
    }
    tensors_.push_back(std::move(t));
  }
  uint64_t alignment = kAlignment;
  if (auto it = metadata_.find("general.alignment"); it != metadata_.end()) {
    alignment = static_cast<uint64_t>(it->second.number);
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
      return absl::DataLossError(absl::StrCat(path_, ": general.alignment ", alignment));
    }
  }
  data_start_ = (c.pos() + alignment - 1) / alignment * alignment;
  for (const TensorInfo& t : tensors_) {
    absl::StatusOr<uint64_t> bytes = t.bytes();
    if (!bytes.ok())
      return absl::DataLossError(absl::StrCat(path_, ": ", bytes.status().message()));
    if (t.offset % alignment != 0) {
      return absl::DataLossError(absl::StrCat(path_, ": tensor ", t.name, ": offset ", t.offset,
                                              " is not a multiple of ", alignment));
    }
    if (data_start_ > size_ || t.offset > size_ - data_start_ ||
        *bytes > size_ - data_start_ - t.offset) {
      return absl::DataLossError(absl::StrCat(path_, ": truncated GGUF file (tensor ", t.name,
                                              "'s data ends past the file's ", size_, " bytes)"));
    }
  }
  return absl::OkStatus();
}

const TensorInfo* GgufFile::Find(const std::string& name) const {
  for (const TensorInfo& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

absl::StatusOr<double> GgufFile::Number(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return absl::NotFoundError(absl::StrCat(path_, ": no key ", key));
  if (!IsScalar(static_cast<uint32_t>(it->second.type))) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": key ", key, " is not a number"));
  }
  return it->second.number;
}

absl::StatusOr<std::string> GgufFile::Text(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return absl::NotFoundError(absl::StrCat(path_, ": no key ", key));
  if (it->second.type != ValueType::kString) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": key ", key, " is not a string"));
  }
  return it->second.text;
}

absl::Span<const uint8_t> GgufFile::Bytes(const TensorInfo& t) const {
  return absl::Span<const uint8_t>(data_ + data_start_ + t.offset, t.bytes().value_or(0));
}

absl::StatusOr<std::vector<float>> GgufFile::Decode(const TensorInfo& t) const {
  if (!HasCodec(t.type)) {
    return absl::UnimplementedError(absl::StrCat(path_, ": tensor ", t.name, ": GGUF type ",
                                                 TensorTypeName(t.type),
                                                 " has no decoder in windquant yet"));
  }
  const absl::Span<const uint8_t> all = Bytes(t);
  const int64_t n = t.dims[0];
  const uint64_t row = *RowBytes(t.type, n);
  std::vector<float> out(static_cast<size_t>(t.values()));
  for (uint64_t r = 0; r * row < all.size(); ++r) {
    WQ_RETURN_IF_ERROR(DecodeRow(t.type, all.subspan(r * row, row), n, out.data() + r * n));
  }
  return out;
}

}  // namespace windquant::exporter::gguf
