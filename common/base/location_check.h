// Locations named by a flag or a config key (a model folder, an output path) are
// checked before any work, so that a mistyped path is one line naming the flag or key
// and the path, never an empty success or a new tree of folders somewhere unexpected.
// A command creates its output folder (or file) itself, but never the folders above
// it: only the last component of an output path may be missing. Thread-safe.
#ifndef WINDQUANT_COMMON_BASE_LOCATION_CHECK_H_
#define WINDQUANT_COMMON_BASE_LOCATION_CHECK_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace windquant::base {

// `dir`, named by `what` ("--model", "model.dir"), is an existing folder (or a symlink
// to one). NOT_FOUND "--model: DIR: no such folder"; INVALID_ARGUMENT "...: not a
// folder" / "...: symlink loop" / "--model: empty path".
absl::Status CheckInputDir(const std::string& dir, absl::string_view what);

// The folder that `path` (an output folder or file, named by `what`: "--out",
// "output.dir") goes into exists; `path` itself may be missing (it is created).
// NOT_FOUND "--out: a/b/c: parent folder a/b does not exist (only the last folder of
// an output path is created)"; INVALID_ARGUMENT when the parent is not a folder.
absl::Status CheckOutputParent(const std::string& path, absl::string_view what);

}  // namespace windquant::base

#endif  // WINDQUANT_COMMON_BASE_LOCATION_CHECK_H_
