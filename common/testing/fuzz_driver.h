// A standalone driver for libFuzzer-style targets, for builds without clang's
// -fsanitize=fuzzer (the default gcc build, where the targets link gRPC and
// torch): it calls the target's LLVMFuzzerTestOneInput for a bounded time with
// random byte strings and seeded mutations (bit flips, byte sets, inserts,
// erases, duplications, splices, truncations) of the target's valid seed
// messages (WqFuzzSeeds). No coverage feedback: the mutations stay close to
// valid messages, so most inputs reach the handlers' validation.
//
//   fuzz_target [--time SECONDS] [--seed N] [--max-len BYTES] [--crash FILE]
//
// Prints "<name>: N executions in T s ..." and exits 0. A crash (abort,
// segfault) writes the input that caused it to --crash (default
// ./<name>.crash) and kills the process, which fails the ctest. The same
// target file builds with clang -fsanitize=fuzzer (libFuzzer's own main)
// when the driver is left out.
#ifndef WINDQUANT_COMMON_TESTING_FUZZ_DRIVER_H_
#define WINDQUANT_COMMON_TESTING_FUZZ_DRIVER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <grpcpp/support/status.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace windquant::testing {

// Defined by each target: valid inputs to start mutating from.
std::vector<std::string> WqFuzzSeeds();

// Aborts with `what` on stderr: a target's invariant failed.
[[noreturn]] void FuzzFail(const std::string& what);

// The invariants of a refused call `s` to method number `method` of a service: a one-line
// error, never INTERNAL or UNKNOWN, and no change of state (`state_changed`; `state` names
// it in the failure, e.g. "the queue"). FuzzFail otherwise.
void CheckRefusedCall(int method, const grpc::Status& s, bool state_changed,
                      const std::string& state);

}  // namespace windquant::testing

#endif  // WINDQUANT_COMMON_TESTING_FUZZ_DRIVER_H_
