// Status propagation helpers used across windquant (absl::Status everywhere,
// converted to grpc::Status only at the service edge).
#ifndef WINDQUANT_COMMON_BASE_STATUS_MACROS_H_
#define WINDQUANT_COMMON_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define WQ_CONCAT_INNER_(a, b) a##b
#define WQ_CONCAT_(a, b) WQ_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define WQ_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::absl::Status wq_status_ = (expr);      \
    if (!wq_status_.ok()) return wq_status_; \
  } while (0)

// `WQ_ASSIGN_OR_RETURN(auto x, MakeX());` assigns the value of an
// absl::StatusOr or returns its error.
#define WQ_ASSIGN_OR_RETURN(lhs, rexpr) \
  WQ_ASSIGN_OR_RETURN_IMPL_(WQ_CONCAT_(wq_statusor_, __LINE__), lhs, rexpr)
#define WQ_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                              \
  if (!statusor.ok()) return statusor.status();         \
  lhs = std::move(statusor).value()

#endif  // WINDQUANT_COMMON_BASE_STATUS_MACROS_H_
