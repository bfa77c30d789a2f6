// The one place where absl::Status and grpc::Status are mapped onto each other, and the
// input-validation helpers every service handler uses (DESIGN.md section 5: "every RPC
// validates its input and answers INVALID_ARGUMENT with a message naming the field").
//
// The canonical codes of absl and gRPC have the same numbers and meanings, so the
// mapping is one-to-one and keeps the message. Thread-safe (pure functions).
#ifndef WINDQUANT_COMMON_NET_STATUS_CONVERT_H_
#define WINDQUANT_COMMON_NET_STATUS_CONVERT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace windquant::net {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// "OK", "CANCELLED", ..., "UNAUTHENTICATED" (the label of windquant_net_rpc_errors_total);
// "UNKNOWN_CODE_<n>" outside the canonical range.
std::string GrpcCodeName(grpc::StatusCode code);

// Validation helpers: OK, or INVALID_ARGUMENT "<field>: <what>" (field is the proto path,
// e.g. "plan.effective_bits").
absl::Status RequireFinite(absl::string_view field, double value);
absl::Status RequireInRange(absl::string_view field, double value, double lo, double hi);
absl::Status RequirePositive(absl::string_view field, int64_t value);
absl::Status RequireNonNegative(absl::string_view field, int64_t value);
absl::Status RequireNonEmpty(absl::string_view field, absl::string_view value);
// Identifiers (plan ids, actor ids): 1..128 chars of [A-Za-z0-9._-], not "." or "..",
// so they are safe as artifact keys and file names (DESIGN.md section 6).
absl::Status RequireIdentifier(absl::string_view field, absl::string_view value);

}  // namespace windquant::net

#endif  // WINDQUANT_COMMON_NET_STATUS_CONVERT_H_
