#include "job/open_session.h"

#include <cstdio>
#include <string>

#include "job/node_options.h"

namespace windquant::job {

absl::StatusOr<std::unique_ptr<quant::QuantizationSession>> OpenSession(
    const config::RunConfig& config, bool use_cache, bool load_eval_text, bool fit) {
  quant::SessionOptions so = SessionOptionsFrom(config);
  so.use_cache = use_cache;
  so.load_eval_text = load_eval_text;
  so.fit = fit;
  so.log = [](const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  };
  return quant::QuantizationSession::Create(so);
}

}  // namespace windquant::job
