#include "common/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace windquant::model {
namespace {

struct DtypeEntry {
  Dtype dtype;
  const char* name;
  int64_t size;
};

constexpr DtypeEntry kDtypes[] = {
    {Dtype::kBool, "BOOL", 1},      {Dtype::kU8, "U8", 1},          {Dtype::kI8, "I8", 1},
    {Dtype::kF8E5M2, "F8_E5M2", 1}, {Dtype::kF8E4M3, "F8_E4M3", 1}, {Dtype::kI16, "I16", 2},
    {Dtype::kU16, "U16", 2},        {Dtype::kF16, "F16", 2},        {Dtype::kBF16, "BF16", 2},
    {Dtype::kI32, "I32", 4},        {Dtype::kU32, "U32", 4},        {Dtype::kF32, "F32", 4},
    {Dtype::kF64, "F64", 8},        {Dtype::kI64, "I64", 8},        {Dtype::kU64, "U64", 8},
};

// Short, single-line rendering of a JSON value for error messages.
std::string Show(const nlohmann::json& j) {
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

}  // namespace

absl::StatusOr<Dtype> DtypeFromName(std::string_view name) {
  for (const DtypeEntry& e : kDtypes) {
    if (name == e.name) return e.dtype;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype \"", std::string(name), "\""));
}

const char* DtypeName(Dtype dtype) {
  for (const DtypeEntry& e : kDtypes) {
    if (e.dtype == dtype) return e.name;
  }
  return "?";
}

int64_t DtypeSize(Dtype dtype) {
  for (const DtypeEntry& e : kDtypes) {
    if (e.dtype == dtype) return e.size;
  }
  return 0;
}

int64_t TensorInfo::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_ != nullptr) munmap(mapping_, size_);
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  // O_NONBLOCK: a FIFO is refused below instead of blocking the open forever.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP) return absl::InvalidArgumentError(absl::StrCat(path, ": symlink loop"));
    std::string msg = absl::StrCat(path, ": cannot open: ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(msg) : absl::PermissionDeniedError(msg);
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->size_ = static_cast<uint64_t>(st.st_size);
  if (file->size_ < 8) {
    ::close(fd);
    return absl::DataLossError(absl::StrCat(path, ": truncated file: ", file->size_,
                                            " bytes, the header length alone needs 8"));
  }
  void* m = mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) {
    return absl::InternalError(absl::StrCat(path, ": mmap: ", std::strerror(errno)));
  }
  file->mapping_ = m;
  file->bytes_ = static_cast<const char*>(m);
  absl::Status s = file->Parse();
  if (!s.ok()) return s;
  return file;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::FromBuffer(std::string bytes,
                                                                             std::string source) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = std::move(source);
  file->buffer_ = std::move(bytes);
  file->bytes_ = file->buffer_.data();
  file->size_ = file->buffer_.size();
  absl::Status s = file->Parse();
  if (!s.ok()) return s;
  return file;
}

namespace {

// The "__metadata__" entry `v` (null, or an object of strings) into `metadata`.
absl::Status ParseMetadata(const std::string& p, const nlohmann::json& v,
                           std::map<std::string, std::string>* metadata) {
  if (v.is_null()) return absl::OkStatus();
  if (!v.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(p, ": __metadata__: expected an object of strings"));
  }
  for (auto m = v.begin(); m != v.end(); ++m) {
    if (!m.value().is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(p, ": __metadata__.", m.key(),
                                                     ": expected a string, got ", Show(m.value())));
    }
    (*metadata)[m.key()] = m.value().get<std::string>();
  }
  return absl::OkStatus();
}

// The entry's "shape" into info->shape; returns the bytes it needs in info->dtype.
absl::StatusOr<uint64_t> ParseShape(const std::string& where, const nlohmann::json& v,
                                    TensorInfo* info) {
  auto sh = v.find("shape");
  if (sh == v.end() || !sh->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(where, "shape: missing or not an array"));
  }
  uint64_t elements = 1;
  for (const nlohmann::json& d : *sh) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 62)) {
      return absl::InvalidArgumentError(absl::StrCat(where, "shape: invalid dimension ", Show(d)));
    }
    uint64_t dim = d.get<uint64_t>();
    if (__builtin_mul_overflow(elements, dim, &elements) || elements > (uint64_t{1} << 62)) {
      return absl::InvalidArgumentError(absl::StrCat(where, "shape: too many elements"));
    }
    info->shape.push_back(static_cast<int64_t>(dim));
  }
  uint64_t expected_bytes = 0;
  if (__builtin_mul_overflow(elements, static_cast<uint64_t>(DtypeSize(info->dtype)),
                             &expected_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(where, "shape: too many bytes"));
  }
  return expected_bytes;
}

// The entry's "data_offsets" into info->begin/end: inside the data_size bytes of data and
// exactly expected_bytes long.
absl::Status ParseDataOffsets(const std::string& where, const nlohmann::json& v, uint64_t data_size,
                              uint64_t expected_bytes, TensorInfo* info) {
  auto off = v.find("data_offsets");
  if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "data_offsets: expected [begin, end] of unsigned integers"));
  }
  info->begin = (*off)[0].get<uint64_t>();
  info->end = (*off)[1].get<uint64_t>();
  if (info->end < info->begin) {
    return absl::DataLossError(
        absl::StrCat(where, "data_offsets [", info->begin, ", ", info->end, "]: end before begin"));
  }
  if (info->end > data_size) {
    return absl::DataLossError(absl::StrCat(where, "data_offsets [", info->begin, ", ", info->end,
                                            "] outside the data (", data_size,
                                            " bytes): truncated file?"));
  }
  if (info->end - info->begin != expected_bytes) {
    return absl::DataLossError(
        absl::StrCat(where, "data_offsets [", info->begin, ", ", info->end, "] hold ",
                     info->end - info->begin, " bytes but ", DtypeName(info->dtype), " [",
                     absl::StrJoin(info->shape, ","), "] needs ", expected_bytes));
  }
  return absl::OkStatus();
}

// One tensor entry of the header (name -> {dtype, shape, data_offsets}).
absl::StatusOr<TensorInfo> ParseTensor(const std::string& p, const std::string& name,
                                       const nlohmann::json& v, uint64_t data_size) {
  const std::string where = absl::StrCat(p, ": tensor ", name, ": ");
  if (!v.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, "expected an object, got ", Show(v)));
  }
  TensorInfo info;
  info.name = name;
  auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(where, "dtype: missing or not a string"));
  }
  absl::StatusOr<Dtype> dtype = DtypeFromName(dt->get<std::string>());
  if (!dtype.ok()) return absl::InvalidArgumentError(absl::StrCat(where, dtype.status().message()));
  info.dtype = *dtype;
  absl::StatusOr<uint64_t> expected_bytes = ParseShape(where, v, &info);
  if (!expected_bytes.ok()) return expected_bytes.status();
  absl::Status s = ParseDataOffsets(where, v, data_size, *expected_bytes, &info);
  if (!s.ok()) return s;
  return info;
}

// The tensors (sorted by offsets) cover the data_size bytes of data exactly: no overlap,
// no gap, nothing after the last.
absl::Status CheckCoverage(const std::string& p, const std::vector<TensorInfo>& tensors,
                           uint64_t data_size) {
  uint64_t covered = 0;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo& t : tensors) {
    if (t.begin < covered) {
      return absl::DataLossError(absl::StrCat(p, ": tensor ", t.name, ": data_offsets [", t.begin,
                                              ", ", t.end, "] overlap tensor ", previous->name));
    }
    if (t.begin > covered) {
      return absl::DataLossError(absl::StrCat(p, ": tensor ", t.name, ": data_offsets [", t.begin,
                                              ", ", t.end, "] leave bytes [", covered, ", ",
                                              t.begin, ") of the data uncovered"));
    }
    covered = t.end;
    previous = &t;
  }
  if (covered != data_size) {
    return absl::DataLossError(absl::StrCat(
        p, ": ", data_size - covered, " bytes of data after the last tensor",
        previous ? absl::StrCat(" (", previous->name, ")") : "", " are not covered by any tensor"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SafetensorsFile::Parse() {
  const std::string& p = path_;
  if (size_ < 8) {
    return absl::DataLossError(
        absl::StrCat(p, ": truncated file: ", size_, " bytes, the header length alone needs 8"));
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes_[i]);
  if (n > size_ - 8) {
    return absl::DataLossError(absl::StrCat(p, ": header length ", n, " beyond the file (", size_,
                                            " bytes): truncated or not safetensors"));
  }
  if (n > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(p, ": header length ", n, " over the limit of ", kMaxHeaderBytes));
  }
  data_offset_ = 8 + n;
  const uint64_t data_size = size_ - data_offset_;

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes_ + 8, bytes_ + 8 + n);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(p, ": invalid JSON header: ", e.what()));
  }
  if (!header.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(p, ": invalid header: expected a JSON object, got ", Show(header)));
  }

  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      absl::Status s = ParseMetadata(p, it.value(), &metadata_);
      if (!s.ok()) return s;
      continue;
    }
    absl::StatusOr<TensorInfo> info = ParseTensor(p, it.key(), it.value(), data_size);
    if (!info.ok()) return info.status();
    tensors_.push_back(*std::move(info));
  }

  std::sort(tensors_.begin(), tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  absl::Status covered = CheckCoverage(p, tensors_, data_size);
  if (!covered.ok()) return covered;
  for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
  return absl::OkStatus();
}

const TensorInfo* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::string_view SafetensorsFile::Data(const TensorInfo& info) const {
  return std::string_view(bytes_ + data_offset_ + info.begin, info.end - info.begin);
}

void SafetensorsFile::ReleasePages(const TensorInfo& info) const {
  if (mapping_ == nullptr || info.num_bytes() == 0) return;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t begin = (data_offset_ + info.begin + page - 1) / page * page;
  const uint64_t end = (data_offset_ + info.end) / page * page;
  if (end > begin) {
    madvise(static_cast<char*>(mapping_) + begin, end - begin, MADV_DONTNEED);
  }
}

}  // namespace windquant::model
