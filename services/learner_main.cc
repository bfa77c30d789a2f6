// windquant-learner: the learner service (job/service_roles.h: LearnerRole). The process's skeleton
// (flags, /metrics, signals, exit codes) is common/service/service_main.h.
#include "common/base/build_commit.h"
#include "common/service/service_main.h"
#include "job/service_roles.h"

int main(int argc, char** argv) {
  return windquant::service::RunServiceMain(
      argc, argv, windquant::job::LearnerRole(windquant::base::BuildCommit()));
}
