#include "common/net/rpc_metrics.h"

#include <cstring>

#include "absl/strings/match.h"
#include "common/metrics/metric_names.h"
#include "common/net/auth.h"
#include "common/net/status_convert.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"

namespace windquant::net {
namespace {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::InterceptorBatchMethods;

double SerializedSize(InterceptorBatchMethods* methods) {
  grpc::ByteBuffer* buffer = methods->GetSerializedSendMessage();
  return buffer != nullptr ? static_cast<double>(buffer->Length()) : 0.0;
}

class ServerInterceptor : public grpc::experimental::Interceptor {
 public:
  ServerInterceptor(RpcMetrics* metrics, bool byte_buffer_messages)
      : metrics_(metrics), byte_buffer_messages_(byte_buffer_messages) {}

  void Intercept(InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      metrics_->AddSentBytes(SerializedSize(methods));
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      void* message = methods->GetRecvMessage();
      if (message != nullptr) {
        metrics_->AddReceivedBytes(
            byte_buffer_messages_
                ? static_cast<double>(static_cast<grpc::ByteBuffer*>(message)->Length())
                : static_cast<double>(
                      static_cast<google::protobuf::MessageLite*>(message)->ByteSizeLong()));
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      metrics_->CountError(methods->GetSendStatus().error_code());
    }
    methods->Proceed();
  }

 private:
  RpcMetrics* metrics_;
  const bool byte_buffer_messages_;
};

class ClientInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit ClientInterceptor(RpcMetrics* metrics) : metrics_(metrics) {}

  void Intercept(InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      metrics_->AddSentBytes(SerializedSize(methods));
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      void* message = methods->GetRecvMessage();
      if (message != nullptr) {
        metrics_->AddReceivedBytes(static_cast<double>(
            static_cast<google::protobuf::MessageLite*>(message)->ByteSizeLong()));
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_STATUS)) {
      const grpc::Status* status = methods->GetRecvStatus();
      if (status != nullptr) metrics_->CountError(status->error_code());
    }
    methods->Proceed();
  }

 private:
  RpcMetrics* metrics_;
};

}  // namespace

absl::StatusOr<RpcMetrics> RpcMetrics::Create(metrics::Registry* registry) {
  RpcMetrics m;
  auto sent = metrics::CounterFamily(*registry, metrics::kNetSentBytesTotal);
  if (!sent.ok()) return sent.status();
  auto received = metrics::CounterFamily(*registry, metrics::kNetReceivedBytesTotal);
  if (!received.ok()) return received.status();
  auto errors = metrics::CounterFamily(*registry, metrics::kNetRpcErrorsTotal);
  if (!errors.ok()) return errors.status();
  m.sent_ = &(*sent)->Get();
  m.received_ = &(*received)->Get();
  m.errors_ = *errors;
  return m;
}

void RpcMetrics::CountError(grpc::StatusCode code) {
  if (code == grpc::StatusCode::OK) return;
  errors_->Labels({GrpcCodeName(code)}).Inc();
}

grpc::experimental::Interceptor* RpcMetricsServerInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  const char* method = info->method();
  const bool health = method != nullptr && absl::StartsWith(method, kHealthServicePathPrefix);
  return new ServerInterceptor(&metrics_, health);
}

grpc::experimental::Interceptor* RpcMetricsClientInterceptorFactory::CreateClientInterceptor(
    grpc::experimental::ClientRpcInfo* info) {
  static_cast<void>(info);
  return new ClientInterceptor(&metrics_);
}

}  // namespace windquant::net
