// The three service roles (windquant-actor, -evaluator, -learner) as the service-main
// skeleton runs them (common/service/service_main.h): each role's name, port key, usage
// and loader, which builds the role's node from the run config (service_run_config.h,
// node_options.h, learner_options.h). The mains (services/) are one call each. One
// library per role (actor_role.cc, evaluator_role.cc, learner_role.cc), so that a main
// links its own role only.
#ifndef WINDQUANT_JOB_SERVICE_ROLES_H_
#define WINDQUANT_JOB_SERVICE_ROLES_H_

#include <string>

#include "common/service/service_main.h"

namespace windquant::job {

// Stage s of replica r (service.stage/replica or the pod ordinal WQ_POD_ORDINAL): loads its
// layers, serves windquant.v1.Actor, registers its unit table with the learner and runs
// rollout workers (DESIGN.md section 5).
service::ServiceMainOptions ActorRole();
// Owns the evaluation data, embeddings and head, drives calibration and plan evaluation
// through the actors, updates λ and reports to the learner (DESIGN.md section 5).
service::ServiceMainOptions EvaluatorRole();
// Merges the unit table, runs PPO, publishes policies, keeps the best plan and checkpoints,
// pushes to the artifact store (DESIGN.md section 5); its final report records
// `build_commit` (the main's base::BuildCommit).
service::ServiceMainOptions LearnerRole(const std::string& build_commit);

}  // namespace windquant::job

#endif  // WINDQUANT_JOB_SERVICE_ROLES_H_
