// A typed client of grpc.health.v1 (the protocol every windquant server answers):
// readiness checks in the CLI, deploy/local scripts and tests.
// Thread-safety: thread-safe.
#ifndef WINDQUANT_COMMON_NET_HEALTH_CLIENT_H_
#define WINDQUANT_COMMON_NET_HEALTH_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/channel.h"

namespace windquant::net {

using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

// Health.Check of `service` ("" = the server as a whole). Errors: the RPC's status
// (NOT_FOUND for a service the server does not know, UNAVAILABLE when unreachable).
absl::StatusOr<ServingStatus> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                          const std::string& service, absl::Duration timeout);

// "SERVING", "NOT_SERVING", "UNKNOWN", "SERVICE_UNKNOWN".
std::string ServingStatusName(ServingStatus status);

}  // namespace windquant::net

#endif  // WINDQUANT_COMMON_NET_HEALTH_CLIENT_H_
