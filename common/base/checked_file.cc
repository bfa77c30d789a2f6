#include "common/base/checked_file.h"

#include <cstdint>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/files.h"

namespace windquant::base {
namespace {

constexpr absl::string_view kMagic = "WQCHECKED1";

}  // namespace

absl::Status WriteCheckedFile(const std::string& path, absl::string_view payload) {
  std::string bytes = absl::StrCat(kMagic, " ", payload.size(), " ", Sha256Hex(payload), "\n");
  bytes.append(payload.data(), payload.size());
  return WriteFileAtomic(path, bytes);
}

absl::StatusOr<std::string> ReadCheckedFile(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  const size_t eol = bytes->find('\n');
  const std::vector<absl::string_view> header =
      absl::StrSplit(absl::string_view(*bytes).substr(0, eol), ' ');
  uint64_t size = 0;
  if (eol == std::string::npos || header.size() != 3 || header[0] != kMagic ||
      !absl::SimpleAtoi(header[1], &size) || header[2].size() != 64) {
    return absl::DataLossError(
        absl::StrCat(path, ": no checksum header (truncated or not a ", kMagic, " file)"));
  }
  std::string payload = bytes->substr(eol + 1);
  if (payload.size() != size) {
    return absl::DataLossError(absl::StrCat(path, ": ",
                                            payload.size() < size ? "truncated" : "too long", " (",
                                            payload.size(), " bytes, the header says ", size, ")"));
  }
  if (Sha256Hex(payload) != header[2]) {
    return absl::DataLossError(absl::StrCat(path, ": checksum mismatch (the file was altered)"));
  }
  return payload;
}

}  // namespace windquant::base
