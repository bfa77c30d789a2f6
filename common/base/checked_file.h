// Checked files: small state files (an evaluator's queued plans, its λ) that
// carry their own length and SHA-256, so that a file cut short (a crash of
// the disk, not of the writer: writes are atomic) or altered is recognised
// and never trusted. Format: the header line
//   "WQCHECKED1 <payload bytes, decimal> <lowercase hex sha256 of the payload>\n"
// then the payload. Written with WriteFileAtomic (temporary, fsync, rename):
// a failed write leaves the previous file as it was. Thread-compatible.
#ifndef WINDQUANT_COMMON_BASE_CHECKED_FILE_H_
#define WINDQUANT_COMMON_BASE_CHECKED_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace windquant::base {

// Writes `payload` with its header to `path` atomically; INTERNAL naming the path.
absl::Status WriteCheckedFile(const std::string& path, absl::string_view payload);

// The payload of a checked file. NOT_FOUND when there is none; DATA_LOSS
// naming the path and what is wrong (no header, truncated, longer than its
// header says, checksum mismatch); INTERNAL for a read error.
absl::StatusOr<std::string> ReadCheckedFile(const std::string& path);

}  // namespace windquant::base

#endif  // WINDQUANT_COMMON_BASE_CHECKED_FILE_H_
