// All-or-nothing output folders: a command's output folder (an export, a
// pulled plan, a plan's files) is built in a temporary sibling folder and
// renamed into place, so no failure (disk full, bad input found half-way)
// and no reader ever sees a half-written folder, and an existing folder is
// refused or replaced whole, never mixed with the files of another run.
// Thread-compatible.
#ifndef WINDQUANT_COMMON_BASE_OUTPUT_DIR_H_
#define WINDQUANT_COMMON_BASE_OUTPUT_DIR_H_

#include <functional>
#include <string>

#include "absl/status/status.h"

namespace windquant::base {

// The check WriteDirAtomic starts with, for commands that refuse before
// hours of work: OK when `dir` is absent or an empty folder, or when
// `replace` and it is a folder; ALREADY_EXISTS naming it otherwise.
absl::Status CheckOutputDir(const std::string& dir, bool replace);

// Builds the folder `dir`: `fill` writes into a new temporary sibling folder
// (same file system), which becomes `dir` by one rename only when `fill`
// succeeds and is removed otherwise. An existing non-empty `dir` is refused
// (CheckOutputDir) unless `replace`, when the new folder is exchanged with it
// in one step (renameat2 RENAME_EXCHANGE) and the old one removed.
absl::Status WriteDirAtomic(const std::string& dir, bool replace,
                            const std::function<absl::Status(const std::string& tmp_dir)>& fill);

}  // namespace windquant::base

#endif  // WINDQUANT_COMMON_BASE_OUTPUT_DIR_H_
