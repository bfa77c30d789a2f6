// `windquant table build|dump|diff|rebase-plan`: unit tables as files, for
// comparing the one-process table with the distributed learner's merged one
// (output.dir/unit_table.pb) and for measuring a distributed plan with the
// one-process evaluator (tests/distributed_equivalence_test.sh). The work is
// job/unit_table_files.h and job/unit_table_diff.h.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/command.h"
#include "common/base/location_check.h"
#include "common/base/status_macros.h"
#include "common/config/run_config.h"
#include "job/open_session.h"
#include "job/unit_table_diff.h"
#include "job/unit_table_files.h"

namespace windquant::cli {
namespace {

constexpr char kUsage[] =
    "usage: windquant table VERB [flags]\n"
    "\n"
    "verbs:\n"
    "  build --config FILE [--set k=v]... --out TABLE.pb [--no-cache]\n"
    "        the one-process unit table of the run config (QuantizationSession: calibration\n"
    "        and fits, or the quant.cache_dir entry), written as windquant.v1.UnitTable\n"
    "  dump TABLE.pb [--json]\n"
    "        every unit: id, layer, matrix, chunk, shape, salient count, features, and per\n"
    "        action its effective bits and error proxy (one JSON object per line with --json)\n"
    "  diff A.pb B.pb [--error-rtol R] [--feature-atol F] [--bits-rtol B] [--json]\n"
    "        compares two tables unit by unit: the layout (ids, layers, matrices, chunks,\n"
    "        shapes, salient counts, table header) exactly; per action the error proxy within\n"
    "        relative tolerance R (default 1e-3) and the effective bits within B (default\n"
    "        1e-12); every static feature within absolute tolerance F (default 1e-3).\n"
    "        Fingerprints are shown, not compared (the one-process and the distributed\n"
    "        fingerprints are computed differently). Prints the largest difference of each\n"
    "        field and the unit where it occurs; fails when any is out of tolerance.\n"
    "        A may be one stage's table (layers [a, b), e.g. an actor's fit cache entry\n"
    "        quant.cache_dir/KEY/unit_table.pb): it is then compared with B's units of\n"
    "        those layers.\n"
    "  rebase-plan --plan PLAN --from A.pb --to B.pb --out DIR\n"
    "        reads PLAN (plan.json / plan.bin) against table A and writes the same actions\n"
    "        as a plan of table B (B's fingerprint) to DIR/plan.json and DIR/plan.bin, after\n"
    "        checking that A and B have the same layout (so `windquant eval --plan` can\n"
    "        measure a distributed run's plan with the one-process evaluator)\n";

absl::Status Build(Args& args) {
  const std::string config_path = args.Get("config");
  const std::vector<std::string> sets = args.GetAll("set");
  const std::string out = args.Get("out");
  const bool no_cache = args.Has("no-cache");
  WQ_RETURN_IF_ERROR(args.Finish(1));
  if (config_path.empty()) return absl::InvalidArgumentError("build: --config is required");
  if (out.empty()) return absl::InvalidArgumentError("build: --out is required");
  WQ_RETURN_IF_ERROR(base::CheckOutputParent(out, "--out"));
  WQ_ASSIGN_OR_RETURN(config::RunConfig cfg, config::LoadRunConfig(config_path, sets));
  WQ_RETURN_IF_ERROR(base::CheckInputDir(cfg.model.dir, "model.dir"));
  WQ_ASSIGN_OR_RETURN(auto session, job::OpenSession(cfg, !no_cache, /*load_eval_text=*/false));
  WQ_RETURN_IF_ERROR(job::WriteUnitTableFile(session->table(), out));
  std::printf("wrote %s: %zu units, fingerprint %s (%s)\n", out.c_str(),
              session->table().units.size(), session->fingerprint().substr(0, 16).c_str(),
              session->from_cache() ? "from cache" : "built");
  return absl::OkStatus();
}

absl::Status Dump(Args& args) {
  const bool as_json = args.Has("json");
  WQ_RETURN_IF_ERROR(args.Finish(2));
  if (args.positional().size() != 2)
    return absl::InvalidArgumentError("dump: one TABLE.pb is required");
  WQ_ASSIGN_OR_RETURN(const plan::UnitTable t, job::ReadUnitTableFile(args.positional()[1]));
  std::fputs(job::DumpUnitTable(t, as_json).c_str(), stdout);
  return absl::OkStatus();
}

absl::Status Diff(Args& args) {
  job::TableDiffTolerances tol;
  WQ_ASSIGN_OR_RETURN(tol.error_rtol, args.GetDouble("error-rtol", tol.error_rtol));
  WQ_ASSIGN_OR_RETURN(tol.feature_atol, args.GetDouble("feature-atol", tol.feature_atol));
  WQ_ASSIGN_OR_RETURN(tol.bits_rtol, args.GetDouble("bits-rtol", tol.bits_rtol));
  const bool as_json = args.Has("json");
  WQ_RETURN_IF_ERROR(args.Finish(3));
  if (args.positional().size() != 3)
    return absl::InvalidArgumentError("diff: two tables A.pb B.pb are required");
  if (tol.error_rtol < 0 || tol.feature_atol < 0 || tol.bits_rtol < 0) {
    return absl::InvalidArgumentError("diff: tolerances must be >= 0");
  }
  const std::string& pa = args.positional()[1];
  const std::string& pb = args.positional()[2];
  WQ_ASSIGN_OR_RETURN(const plan::UnitTable a, job::ReadUnitTableFile(pa));
  WQ_ASSIGN_OR_RETURN(plan::UnitTable b, job::ReadUnitTableFile(pb));
  job::TableDiff diff = job::DiffUnitTables(a, std::move(b), tol);
  diff.path_a = pa;
  diff.path_b = pb;
  std::fputs(job::FormatTableDiff(diff, as_json).c_str(), stdout);
  if (!diff.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(pa, " and ", pb, " differ beyond the tolerances"));
  }
  return absl::OkStatus();
}

absl::Status RebasePlan(Args& args) {
  const std::string plan_path = args.Get("plan");
  const std::string from = args.Get("from");
  const std::string to = args.Get("to");
  const std::string out = args.Get("out");
  WQ_RETURN_IF_ERROR(args.Finish(1));
  if (plan_path.empty() || from.empty() || to.empty() || out.empty()) {
    return absl::InvalidArgumentError("rebase-plan: --plan, --from, --to and --out are required");
  }
  WQ_RETURN_IF_ERROR(base::CheckOutputParent(out, "--out"));
  WQ_ASSIGN_OR_RETURN(const job::RebasedPlan r, job::RebasePlanFile(plan_path, from, to, out));
  std::printf(
      "wrote %s/plan.json, plan.bin: plan %s, %zu units, effective bits %.6f (%.6f on %s)\n",
      out.c_str(), r.plan_id.c_str(), r.units, r.bits_to, r.bits_from, from.c_str());
  return absl::OkStatus();
}

absl::Status RunTable(Args& args) {
  if (args.positional().empty()) {
    return absl::InvalidArgumentError(
        "missing verb: build, dump, diff or rebase-plan (see --help)");
  }
  const std::string verb = args.positional()[0];
  if (verb == "build") return Build(args);
  if (verb == "dump") return Dump(args);
  if (verb == "diff") return Diff(args);
  if (verb == "rebase-plan") return RebasePlan(args);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown verb '", verb, "' (build, dump, diff, rebase-plan)"));
}

}  // namespace

WQ_REGISTER_COMMAND(table, "table",
                    "build, dump, compare unit tables; move a plan between equal tables", kUsage,
                    RunTable);

}  // namespace windquant::cli
