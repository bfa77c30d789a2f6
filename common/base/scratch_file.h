// ScratchFile: an anonymous temporary file in a chosen directory, for data a process
// writes once and reads back in pieces (error-compensation factors spilled out of
// memory: common/quant/gptq.h). The file has no name from the moment it exists
// (O_TMPFILE, or a unique name unlinked at once where the file system lacks it), so
// nothing is left on disk when the process ends, however it ends; its pages are in the
// page cache, not in the process's resident memory.
// Append is serialized; Read is thread-safe (pread) and may run alongside Append.
#ifndef WINDQUANT_COMMON_BASE_SCRATCH_FILE_H_
#define WINDQUANT_COMMON_BASE_SCRATCH_FILE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"

namespace windquant::base {

class ScratchFile {
 public:
  // A new empty file in `dir` (created with its parents when missing). INTERNAL naming
  // the directory and the system's reason when it cannot be created there.
  static absl::StatusOr<std::unique_ptr<ScratchFile>> Create(const std::string& dir);
  ~ScratchFile();
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  // Writes `bytes` bytes at the end; returns where they start. INTERNAL naming the
  // directory on a write error (e.g. the disk is full); the file is then unchanged for
  // every earlier offset.
  absl::StatusOr<int64_t> Append(const void* data, int64_t bytes);
  // Reads `bytes` bytes at `offset` into `out`. OUT_OF_RANGE past what was appended;
  // INTERNAL naming the directory on a read error.
  absl::Status Read(int64_t offset, int64_t bytes, void* out) const;

  const std::string& dir() const { return dir_; }
  int64_t size() const;

 private:
  ScratchFile(int fd, std::string dir) : fd_(fd), dir_(std::move(dir)) {}
  const int fd_;
  const std::string dir_;
  mutable std::mutex mu_;
  int64_t size_ = 0;  // guarded by mu_
};

}  // namespace windquant::base

#endif  // WINDQUANT_COMMON_BASE_SCRATCH_FILE_H_
