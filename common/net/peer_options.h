// PeerOptions: what every channel and server of a windquant process reads of the
// run config's service section: TLS files, the bearer-token file, the message size
// limit and the control-call deadline. config::ServiceConfig embeds this struct
// (service.tls.*, service.max_message_bytes, service.rpc_deadline_ms), so the
// errors of channel.h and server.h name those keys. No gRPC here.
#ifndef WINDQUANT_COMMON_NET_PEER_OPTIONS_H_
#define WINDQUANT_COMMON_NET_PEER_OPTIONS_H_

#include <cstdint>
#include <string>

namespace windquant::net {

// service.tls.*: PEM file paths and the token file.
struct TlsOptions {
  std::string cert_file, key_file, ca_file;  // empty = plaintext
  bool require_client_cert = false;
  std::string bearer_token_file;  // empty = no token check
};

struct PeerOptions {
  int64_t max_message_bytes = 64 << 20;  // both ways
  // Deadline of control calls; calls whose work follows the model (calibration,
  // forward passes, unit-table registration) derive theirs from the work
  // (common/transport/work_deadline.h).
  int64_t rpc_deadline_ms = 30000;
  TlsOptions tls;
};

}  // namespace windquant::net

#endif  // WINDQUANT_COMMON_NET_PEER_OPTIONS_H_
