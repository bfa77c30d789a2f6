#include "common/net/status_convert.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace windquant::net {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode share the canonical numbering (0..16).
  // One line, whatever a message echoes of a peer's request.
  return grpc::Status(static_cast<grpc::StatusCode>(static_cast<int>(status.code())),
                      absl::StrReplaceAll(status.message(), {{"\n", "\\n"}, {"\r", "\\r"}}));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(static_cast<int>(status.error_code())),
                      status.error_message());
}

std::string GrpcCodeName(grpc::StatusCode code) {
  static constexpr const char* kNames[] = {"OK",
                                           "CANCELLED",
                                           "UNKNOWN",
                                           "INVALID_ARGUMENT",
                                           "DEADLINE_EXCEEDED",
                                           "NOT_FOUND",
                                           "ALREADY_EXISTS",
                                           "PERMISSION_DENIED",
                                           "RESOURCE_EXHAUSTED",
                                           "FAILED_PRECONDITION",
                                           "ABORTED",
                                           "OUT_OF_RANGE",
                                           "UNIMPLEMENTED",
                                           "INTERNAL",
                                           "UNAVAILABLE",
                                           "DATA_LOSS",
                                           "UNAUTHENTICATED"};
  const int c = static_cast<int>(code);
  if (c < 0 || c >= static_cast<int>(sizeof(kNames) / sizeof(kNames[0]))) {
    return absl::StrCat("UNKNOWN_CODE_", c);
  }
  return kNames[c];
}

absl::Status RequireFinite(absl::string_view field, double value) {
  if (std::isfinite(value)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, ": must be finite, got ", value));
}

absl::Status RequireInRange(absl::string_view field, double value, double lo, double hi) {
  if (std::isfinite(value) && value >= lo && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": must be in [", lo, ", ", hi, "], got ", value));
}

absl::Status RequirePositive(absl::string_view field, int64_t value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, ": must be > 0, got ", value));
}

absl::Status RequireNonNegative(absl::string_view field, int64_t value) {
  if (value >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, ": must be >= 0, got ", value));
}

absl::Status RequireNonEmpty(absl::string_view field, absl::string_view value) {
  if (!value.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, ": must not be empty"));
}

absl::Status RequireIdentifier(absl::string_view field, absl::string_view value) {
  if (value.empty() || value.size() > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must be 1..128 characters, got ", value.size()));
  }
  if (value == "." || value == "..") {
    return absl::InvalidArgumentError(absl::StrCat(field, ": must not be '.' or '..'"));
  }
  for (char ch : value) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": only [A-Za-z0-9._-] allowed, got byte ",
                       static_cast<int>(static_cast<unsigned char>(ch))));
    }
  }
  return absl::OkStatus();
}

}  // namespace windquant::net
