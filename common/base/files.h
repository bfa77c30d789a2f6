// Small file helpers: whole-file reads and atomic writes (temporary name in
// the same directory, fsync, then rename), so a reader never sees a
// half-written file. Thread-compatible.
#ifndef WINDQUANT_COMMON_BASE_FILES_H_
#define WINDQUANT_COMMON_BASE_FILES_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace windquant::base {

// Opens a regular file (or a symlink to one) for reading, never blocking on a
// FIFO; the caller closes the descriptor. NOT_FOUND / INVALID_ARGUMENT (a
// directory, FIFO, ...) / INTERNAL name the path.
absl::StatusOr<int> OpenRegularFile(const std::string& path);

// Reads a whole file. NOT_FOUND / INTERNAL name the path.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Writes `data` to `path` atomically; creates parent directories.
absl::Status WriteFileAtomic(const std::string& path, absl::string_view data);

// Lowercase hex SHA-256 of `data`.
std::string Sha256Hex(absl::string_view data);

// True if the path exists.
bool PathExists(const std::string& path);

}  // namespace windquant::base

#endif  // WINDQUANT_COMMON_BASE_FILES_H_
