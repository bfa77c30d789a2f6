#include "common/store/s3_environment.h"

#include <cstdlib>
#include <string>

namespace windquant::store {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

}  // namespace

S3Options S3OptionsFromEnvironment() {
  S3Options s3;
  s3.endpoint_url = Env("AWS_ENDPOINT_URL");
  s3.region = Env("AWS_REGION");
  if (s3.region.empty()) s3.region = Env("AWS_DEFAULT_REGION");
  if (s3.region.empty()) s3.region = "us-east-1";
  s3.access_key_id = Env("AWS_ACCESS_KEY_ID");
  s3.secret_access_key = Env("AWS_SECRET_ACCESS_KEY");
  s3.session_token = Env("AWS_SESSION_TOKEN");
  return s3;
}

}  // namespace windquant::store
