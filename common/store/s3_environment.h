// S3 settings from the process environment, for process edges only (the
// service mains and CLI commands): libraries take store::S3Options and never
// read the environment. AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN (optional), AWS_ENDPOINT_URL (optional: MinIO, Ceph, moto,
// ...) and AWS_REGION or AWS_DEFAULT_REGION (default us-east-1), the names the
// AWS tools use.
#ifndef WINDQUANT_COMMON_STORE_S3_ENVIRONMENT_H_
#define WINDQUANT_COMMON_STORE_S3_ENVIRONMENT_H_

#include "common/store/artifact_store.h"

namespace windquant::store {

S3Options S3OptionsFromEnvironment();

}  // namespace windquant::store

#endif  // WINDQUANT_COMMON_STORE_S3_ENVIRONMENT_H_
