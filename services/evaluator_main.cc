// windquant-evaluator: the evaluator service (job/service_roles.h: EvaluatorRole). The process's
// skeleton (flags, /metrics, signals, exit codes) is common/service/service_main.h.
#include "common/service/service_main.h"
#include "job/service_roles.h"

int main(int argc, char** argv) {
  return windquant::service::RunServiceMain(argc, argv, windquant::job::EvaluatorRole());
}
