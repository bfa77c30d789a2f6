// libFuzzer target: parses arbitrary bytes as a safetensors file from memory
// (SafetensorsFile::FromBuffer: header length, JSON header, dtype/shape/offset
// validation) and, when the parse succeeds, touches every tensor's bytes so
// AddressSanitizer checks that the validated offsets really lie in the
// buffer. Built by scripts/fuzz-safetensors.sh against safetensors.cc only
// (no torch).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using windquant::model::SafetensorsFile;
  using windquant::model::TensorInfo;
  auto file = SafetensorsFile::FromBuffer(std::string(reinterpret_cast<const char*>(data), size),
                                          "fuzz.safetensors");
  if (!file.ok()) {
    // Errors are one line.
    if (file.status().message().find('\n') != std::string::npos) std::abort();
    return 0;
  }
  const SafetensorsFile& f = **file;
  uint64_t covered = 0;
  unsigned char sum = 0;
  for (const TensorInfo& t : f.tensors()) {
    if (t.begin != covered || t.end < t.begin) std::abort();  // sorted and contiguous
    covered = t.end;
    if (f.Find(t.name) != &t) std::abort();
    std::string_view bytes = f.Data(t);
    if (bytes.size() !=
        static_cast<size_t>(t.num_elements()) * windquant::model::DtypeSize(t.dtype)) {
      std::abort();
    }
    if (!bytes.empty()) sum ^= static_cast<unsigned char>(bytes.front() ^ bytes.back());
  }
  if (f.data_offset() + covered != f.file_size()) std::abort();
  return sum == 0xFFu ? 0 : 0;
}
