// Small file helpers: whole-file reads and atomic writes (temporary name in
// the same directory, fsync, then rename), so a reader never sees a
// half-written file. Thread-compatible.
#ifndef WINDQUANT_COMMON_BASE_FILES_H_
#define WINDQUANT_COMMON_BASE_FILES_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace windquant::base {

// Reads a whole regular file (a symlink to one is fine). NOT_FOUND,
// INVALID_ARGUMENT (a FIFO, device, socket or directory: refused without
// blocking; a symlink loop) and INTERNAL name the path.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// OK when `path` is a regular file (following symlinks); otherwise the error
// ReadFile would give, without reading. Never blocks (a FIFO is not opened).
absl::Status CheckRegularFile(const std::string& path);

// Writes `data` to `path` atomically; creates parent directories.
absl::Status WriteFileAtomic(const std::string& path, absl::string_view data);

// Lowercase hex SHA-256 of `data`.
std::string Sha256Hex(absl::string_view data);

// True if there is a directory entry at `path` (a dangling or looping symlink
// counts: opening it gives the error that names it). Never throws.
bool PathExists(const std::string& path);

// Builds the folder `dir` all or nothing: `fill` writes into a new temporary
// sibling folder (same file system), which becomes `dir` by a rename only when
// `fill` succeeds and is removed otherwise, so no reader and no failure (disk
// full, bad input found half-way) ever leaves a half-written `dir`. An
// existing non-empty `dir` is refused (ALREADY_EXISTS naming it) unless
// `replace`, when it is replaced whole (never merged with the new files).
// The check WriteDirAtomic starts with, for commands that want to refuse
// before hours of work: OK when `dir` is absent or an empty folder, or when
// `replace` and it is a folder; ALREADY_EXISTS naming it otherwise.
absl::Status CheckOutputDir(const std::string& dir, bool replace);
absl::Status WriteDirAtomic(const std::string& dir, bool replace,
                            const std::function<absl::Status(const std::string& tmp_dir)>& fill);

}  // namespace windquant::base

#endif  // WINDQUANT_COMMON_BASE_FILES_H_
