#include "common/net/health_client.h"

#include "common/net/channel.h"
#include "common/net/status_convert.h"

namespace windquant::net {

absl::StatusOr<ServingStatus> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                          const std::string& service, absl::Duration timeout) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  ConfigureContext(context, timeout);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response.status();
}

std::string ServingStatusName(ServingStatus status) {
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(status);
}

}  // namespace windquant::net
