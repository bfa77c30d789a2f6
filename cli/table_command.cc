// `windquant table build|dump|diff|rebase-plan`: unit tables as files, for
// comparing the one-process table with the distributed learner's merged one
// (output.dir/unit_table.pb) and for measuring a distributed plan with the
// one-process evaluator (tests/distributed_equivalence_test.sh).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/command.h"
#include "cli/open_session.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/config/run_config.h"
#include "common/model/llama_weights.h"
#include "common/quant/action.h"
#include "common/quant/plan.h"
#include "common/quant/plan_io.h"
#include "common/quant/quantization_session.h"
#include "common/quant/unit_table.h"
#include "windquant/v1/types.pb.h"

namespace windquant::cli {
namespace {

using nlohmann::json;

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
    "        A may be one stage's table (layers [a, b), e.g. an actor's cached\n"
    "        stage-*.table.pb): it is then compared with B's units of those layers.\n"
    "  rebase-plan --plan PLAN --from A.pb --to B.pb --out DIR\n"
    "        reads PLAN (plan.json / plan.bin) against table A and writes the same actions\n"
    "        as a plan of table B (B's fingerprint) to DIR/plan.json and DIR/plan.bin, after\n"
    "        checking that A and B have the same layout (so `windquant eval --plan` can\n"
    "        measure a distributed run's plan with the one-process evaluator)\n";

absl::StatusOr<quant::UnitTable> ReadTable(const std::string& path) {
  WQ_ASSIGN_OR_RETURN(const std::string bytes, base::ReadFile(path));
  v1::UnitTable proto;
  if (!proto.ParseFromString(bytes)) {
    return absl::DataLossError(absl::StrCat(path, ": not a windquant.v1.UnitTable"));
  }
  absl::StatusOr<quant::UnitTable> table = quant::UnitTable::FromProto(proto);
  if (!table.ok())
    return absl::Status(table.status().code(), absl::StrCat(path, ": ", table.status().message()));
  WQ_RETURN_IF_ERROR(table->Validate());
  return table;
}

const char* MatrixName(int m) {
  return m >= 0 && m < model::kNumMatrices ? model::kMatrixNames[m] : "?";
}

std::string ActionLabel(int a) { return std::string(quant::ActionName(quant::kAllActions[a])); }

// Layout differences (exact fields); empty when the layouts agree.
std::vector<std::string> LayoutDifferences(const quant::UnitTable& a, const quant::UnitTable& b) {
  std::vector<std::string> out;
  auto header = [&](const char* name, auto x, auto y) {
    if (x != y) out.push_back(absl::StrCat("table.", name, ": ", x, " vs ", y));
  };
  header("first_layer", a.first_layer, b.first_layer);
  header("end_layer", a.end_layer, b.end_layer);
  header("num_layers", a.num_layers, b.num_layers);
  header("chunk_size", a.chunk_size, b.chunk_size);
  header("salient_fraction", a.salient_fraction, b.salient_fraction);
  header("fixed_fp16_params", a.fixed_fp16_params, b.fixed_fp16_params);
  header("units", a.units.size(), b.units.size());
  const size_t n = std::min(a.units.size(), b.units.size());
  for (size_t i = 0; i < n && out.size() < 20; ++i) {
    const quant::Unit& x = a.units[i];
    const quant::Unit& y = b.units[i];
    auto field = [&](const char* name, int64_t u, int64_t v) {
      if (u != v) out.push_back(absl::StrCat(quant::UnitName(x), ".", name, ": ", u, " vs ", v));
    };
    field("id", x.id, y.id);
    field("layer", x.layer, y.layer);
    field("matrix", x.matrix, y.matrix);
    field("chunk", x.chunk, y.chunk);
    field("rows", x.rows, y.rows);
    field("cols", x.cols, y.cols);
    field("col_begin", x.col_begin, y.col_begin);
    field("salient_count", x.salient_count, y.salient_count);
  }
  return out;
}

absl::Status Build(Args& args) {
  const std::string config_path = args.Get("config");
  const std::vector<std::string> sets = args.GetAll("set");
  const std::string out = args.Get("out");
  const bool no_cache = args.Has("no-cache");
  WQ_RETURN_IF_ERROR(args.Finish(1));
  if (config_path.empty()) return absl::InvalidArgumentError("build: --config is required");
  if (out.empty()) return absl::InvalidArgumentError("build: --out is required");
  WQ_ASSIGN_OR_RETURN(config::RunConfig cfg, config::LoadRunConfig(config_path, sets));
  WQ_ASSIGN_OR_RETURN(auto session, OpenSession(cfg, !no_cache, /*load_eval_text=*/false));
  v1::UnitTable proto;
  session->table().ToProto(&proto);
  const std::filesystem::path parent = std::filesystem::path(out).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
  }
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic(out, proto.SerializeAsString()));
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
  WQ_ASSIGN_OR_RETURN(const quant::UnitTable t, ReadTable(args.positional()[1]));
  if (!as_json) {
    std::printf("fingerprint %s, layers [%d, %d) of %d, chunk %d, salient %g, %zu units\n",
                t.fingerprint.c_str(), t.first_layer, t.end_layer, t.num_layers, t.chunk_size,
                t.salient_fraction, t.units.size());
  }
  for (const quant::Unit& u : t.units) {
    if (as_json) {
      json j = {{"id", u.id},
                {"layer", u.layer},
                {"matrix", MatrixName(u.matrix)},
                {"chunk", u.chunk},
                {"rows", u.rows},
                {"cols", u.cols},
                {"col_begin", u.col_begin},
                {"salient_count", u.salient_count}};
      j["features"] = std::vector<double>(u.features.begin(), u.features.end());
      j["bits"] = std::vector<double>(u.bits.begin(), u.bits.end());
      j["error"] = std::vector<double>(u.error.begin(), u.error.end());
      std::printf("%s\n", j.dump().c_str());
      continue;
    }
    std::printf("%s rows %lld cols %lld salient %lld\n", quant::UnitName(u).c_str(),
                static_cast<long long>(u.rows), static_cast<long long>(u.cols),
                static_cast<long long>(u.salient_count));
    std::printf("  features");
    for (float f : u.features) std::printf(" %.6g", f);
    std::printf("\n");
    for (int a = 0; a < quant::kNumActions; ++a) {
      std::printf("  %-5s bits %12.1f  error %.9g\n", ActionLabel(a).c_str(), u.bits[a],
                  u.error[a]);
    }
  }
  return absl::OkStatus();
}

// Largest difference of one field over every unit (and action / feature).
struct Worst {
  double value = 0;
  std::string where;
  int64_t over = 0;  // entries out of tolerance
  void Add(double v, double tolerance, const std::string& w) {
    if (!(v <= tolerance)) ++over;  // NaN counts as out of tolerance
    if (!(v <= value)) {
      value = v;
      where = w;
    }
  }
};

double RelDiff(double x, double y) {
  if (x == y) return 0;
  const double scale = std::max(std::abs(x), std::abs(y));
  return std::abs(x - y) / scale;
}

absl::Status Diff(Args& args) {
  WQ_ASSIGN_OR_RETURN(const double error_rtol, args.GetDouble("error-rtol", 1e-3));
  WQ_ASSIGN_OR_RETURN(const double feature_atol, args.GetDouble("feature-atol", 1e-3));
  WQ_ASSIGN_OR_RETURN(const double bits_rtol, args.GetDouble("bits-rtol", 1e-12));
  const bool as_json = args.Has("json");
  WQ_RETURN_IF_ERROR(args.Finish(3));
  if (args.positional().size() != 3)
    return absl::InvalidArgumentError("diff: two tables A.pb B.pb are required");
  if (error_rtol < 0 || feature_atol < 0 || bits_rtol < 0) {
    return absl::InvalidArgumentError("diff: tolerances must be >= 0");
  }
  const std::string& pa = args.positional()[1];
  const std::string& pb = args.positional()[2];
  WQ_ASSIGN_OR_RETURN(const quant::UnitTable a, ReadTable(pa));
  WQ_ASSIGN_OR_RETURN(quant::UnitTable b, ReadTable(pb));
  if ((a.first_layer != b.first_layer || a.end_layer != b.end_layer) &&
      a.first_layer >= b.first_layer && a.end_layer <= b.end_layer) {
    // A is one stage's table: compare it with B's units of the same layers.
    std::vector<quant::Unit> part;
    for (const quant::Unit& u : b.units) {
      if (u.layer >= a.first_layer && u.layer < a.end_layer) part.push_back(u);
    }
    b.units = std::move(part);
    b.first_layer = a.first_layer;
    b.end_layer = a.end_layer;
  }
  const std::vector<std::string> layout = LayoutDifferences(a, b);
  Worst error, bits, features;
  std::array<Worst, quant::kNumActions> error_by_action;
  std::array<Worst, quant::kNumStaticFeatures> by_feature;
  int64_t units_ok = 0;
  if (layout.empty()) {
    for (size_t i = 0; i < a.units.size(); ++i) {
      const quant::Unit& x = a.units[i];
      const quant::Unit& y = b.units[i];
      const int64_t before = error.over + bits.over + features.over;
      for (int k = 0; k < quant::kNumActions; ++k) {
        const std::string w = absl::StrCat(quant::UnitName(x), " action ", ActionLabel(k));
        const double e = RelDiff(x.error[k], y.error[k]);
        error.Add(e, error_rtol, w);
        error_by_action[k].Add(e, error_rtol, w);
        bits.Add(RelDiff(x.bits[k], y.bits[k]), bits_rtol, w);
      }
      for (int f = 0; f < quant::kNumStaticFeatures; ++f) {
        const double d = std::abs(static_cast<double>(x.features[f]) - y.features[f]);
        const std::string w = absl::StrCat(quant::UnitName(x), " feature ", f);
        features.Add(d, feature_atol, w);
        by_feature[f].Add(d, feature_atol, w);
      }
      if (error.over + bits.over + features.over == before) ++units_ok;
    }
  }
  const bool ok = layout.empty() && error.over == 0 && bits.over == 0 && features.over == 0;
  if (as_json) {
    json j = {
        {"a", pa},
        {"b", pb},
        {"fingerprint_a", a.fingerprint},
        {"fingerprint_b", b.fingerprint},
        {"units", a.units.size()},
        {"units_within_tolerance", units_ok},
        {"layout_differences", layout},
        {"ok", ok},
        {"tolerance",
         {{"error_rtol", error_rtol}, {"feature_atol", feature_atol}, {"bits_rtol", bits_rtol}}},
        {"error_max_rel", error.value},
        {"error_where", error.where},
        {"error_over", error.over},
        {"bits_max_rel", bits.value},
        {"bits_where", bits.where},
        {"bits_over", bits.over},
        {"feature_max_abs", features.value},
        {"feature_where", features.where},
        {"feature_over", features.over}};
    json per_action = json::object();
    for (int k = 0; k < quant::kNumActions; ++k)
      per_action[ActionLabel(k)] = error_by_action[k].value;
    j["error_max_rel_by_action"] = per_action;
    json per_feature = json::array();
    for (const Worst& w : by_feature) per_feature.push_back(w.value);
    j["feature_max_abs_by_index"] = per_feature;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("A %s: %zu units, fingerprint %s\nB %s: %zu units, fingerprint %s\n", pa.c_str(),
                a.units.size(), a.fingerprint.substr(0, 16).c_str(), pb.c_str(), b.units.size(),
                b.fingerprint.substr(0, 16).c_str());
    for (const std::string& l : layout) std::printf("layout differs: %s\n", l.c_str());
    if (layout.empty()) {
      std::printf("layout: identical (ids, layers, matrices, chunks, shapes, salient counts)\n");
      std::printf("error proxy  max rel diff %.3e (tolerance %.1e, %lld over) at %s\n", error.value,
                  error_rtol, static_cast<long long>(error.over), error.where.c_str());
      for (int k = 0; k < quant::kNumActions; ++k) {
        std::printf("  action %-5s max rel diff %.3e\n", ActionLabel(k).c_str(),
                    error_by_action[k].value);
      }
      std::printf("bits         max rel diff %.3e (tolerance %.1e, %lld over) at %s\n", bits.value,
                  bits_rtol, static_cast<long long>(bits.over), bits.where.c_str());
      std::printf("features     max abs diff %.3e (tolerance %.1e, %lld over) at %s\n",
                  features.value, feature_atol, static_cast<long long>(features.over),
                  features.where.c_str());
      std::printf("units within tolerance: %lld of %zu\n", static_cast<long long>(units_ok),
                  a.units.size());
    }
    std::printf("%s\n", ok ? "EQUIVALENT" : "DIFFERENT");
  }
  if (!ok)
    return absl::FailedPreconditionError(
        absl::StrCat(pa, " and ", pb, " differ beyond the tolerances"));
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
  WQ_ASSIGN_OR_RETURN(const quant::UnitTable a, ReadTable(from));
  WQ_ASSIGN_OR_RETURN(const quant::UnitTable b, ReadTable(to));
  const std::vector<std::string> layout = LayoutDifferences(a, b);
  if (!layout.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("rebase-plan: ", from, " and ", to,
                                                      " have different layouts: ", layout.front()));
  }
  WQ_ASSIGN_OR_RETURN(quant::Plan plan, quant::ReadPlanFile(plan_path, a));
  const double bits_a = plan.Totals(a).effective_bits;
  plan.model_fingerprint = b.fingerprint;
  WQ_RETURN_IF_ERROR(quant::WritePlanFiles(plan, b, out));
  std::printf(
      "wrote %s/plan.json, plan.bin: plan %s, %zu units, effective bits %.6f (%.6f on %s)\n",
      out.c_str(), plan.plan_id.c_str(), plan.actions.size(), plan.Totals(b).effective_bits, bits_a,
      from.c_str());
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
