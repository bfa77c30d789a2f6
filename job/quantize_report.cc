#include "job/quantize_report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/config/run_digest.h"
#include "common/report/html_report.h"
#include "common/search/bisection_result.h"
#include "job/learner_options.h"
#include "learner/final_rows.h"
#include "learner/run_records.h"
#include "learner/run_start.h"

namespace windquant::job {
namespace {

using nlohmann::json;

json Num(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

json PlanJson(const MeasuredPlan& m, const std::string& origin) {
  json j = {{"name", m.name},
            {"bits", m.bits},
            {"selection_ppl", Num(m.selection_ppl)},
            {"whole_ppl", Num(m.whole_ppl)},
            {"heldout_ppl", Num(m.heldout_ppl)}};
  if (m.name == "rl") j["origin"] = origin;
  return j;
}

// d = ppl / fp - 1, null when unknown.
json Degradation(double ppl, double fp) {
  return fp > 0 && ppl > 0 ? Num(ppl / fp - 1.0) : json(nullptr);
}

// The winner metric of a measured plan: held-out perplexity, else the whole text's.
double Metric(const MeasuredPlan& m, bool have_heldout) {
  return have_heldout ? m.heldout_ppl : m.whole_ppl;
}

// The uniform anchors in pairs (uniform, the Lagrangian plan at its bits), each
// pair with the ratio Lagrangian / uniform of the winner metric.
json AnchorsJson(const QuantizeReport& r) {
  json out = json::array();
  for (size_t i = 0; i + 1 < r.anchors.size(); i += 2) {
    const MeasuredPlan& u = r.anchors[i];
    const MeasuredPlan& l = r.anchors[i + 1];
    const double mu = Metric(u, r.have_heldout), ml = Metric(l, r.have_heldout);
    out.push_back({{"uniform", PlanJson(u, "")},
                   {"lagrange", PlanJson(l, "")},
                   {"lagrange_over_uniform", mu > 0 ? Num(ml / mu) : json(nullptr)}});
  }
  return out;
}

// The rows that chose their plan on the selection slice, each with its real
// evaluations, bits and d on the selection and held-out text.
json MethodRowsJson(const QuantizeReport& r) {
  json rows = json::array();
  for (const MeasuredPlan& m : r.plans) {
    int64_t evaluations = -1;
    if (m.name == "rl") evaluations = r.rl_evaluations;
    if (m.name == "search" && r.search != nullptr) evaluations = r.search->evaluations;
    if (m.name == "screened-search" && r.screened_search != nullptr) {
      evaluations = r.screened_search->evaluations;
    }
    if (m.name == "lagrange-bisect" && r.lagrange_bisect != nullptr) {
      evaluations = r.lagrange_bisect->evaluations;
    }
    if (m.name == "screened-bisect" && r.screened_bisect != nullptr) {
      evaluations = r.screened_bisect->evaluations;
    }
    if (evaluations < 0) continue;
    rows.push_back({{"plan", m.name},
                    {"bits", m.bits},
                    {"evaluations", evaluations},
                    {"selection_degradation", Degradation(m.selection_ppl, r.fp.selection_ppl)},
                    {"heldout_degradation", Degradation(m.heldout_ppl, r.fp.heldout_ppl)}});
  }
  return rows;
}

// The quality-target mode's summary (docs/lagrange.md): epsilon, the returned
// plan's bits and d on the selection and held-out text, whether it is within
// epsilon, and lambda per update (the batch's, as training_curve[].lambda).
json QualityTargetJson(const QuantizeReport& r) {
  const double eps = r.config->lagrange.max_ppl_increase();
  json q = {{"max_ppl_increase", eps},
            {"cap_bits", r.target_bits},
            {"compared_at_bits", r.compared_at_bits}};
  for (const MeasuredPlan& m : r.plans) {
    if (m.name != r.returned) continue;
    const json sel = Degradation(m.selection_ppl, r.fp.selection_ppl);
    q["returned"] = {{"plan", m.name},
                     {"bits", m.bits},
                     {"selection_degradation", sel},
                     {"heldout_degradation", Degradation(m.heldout_ppl, r.fp.heldout_ppl)},
                     {"whole_degradation", Degradation(m.whole_ppl, r.fp.whole_ppl)}};
    const bool within = sel.is_number() && sel.get<double>() <= eps;
    q["within_epsilon"] = within;
    if (!within) {
      q["note"] =
          "no measured plan was within epsilon on the selection slice: the returned plan is the "
          "least degraded one measured";
    }
  }
  json lambdas = json::array();
  for (const auto& u : r.training->curve) lambdas.push_back(u.lambda);
  q["lambda_per_update"] = lambdas;
  q["lambda_final"] = r.training->lambda;
  q["methods"] = MethodRowsJson(r);
  if (r.rl_start != nullptr) {
    q["rl_start"] = learner::RunStartJson(RunStartOf(*r.rl_start, r.target_bits));
  }
  return q;
}

// The run's numbers: slices, FP and every plan, the winner, the RL plan's
// origin, λ, counts and wall times.
json SummaryJson(const QuantizeReport& r) {
  const rl::RunResult& tr = *r.training;
  const EvaluationSlices& s = *r.slices;
  json report;
  report["config"] = r.config->source;
  report["fingerprint"] = r.fingerprint;
  report["commit"] = r.commit;
  report["config_digest"] = config::VariantDigest(*r.config);
  report["target_bits"] = r.target_bits;
  report["bits_note"] =
      "effective bits of the quantized decoder linears; embeddings, norms and lm_head keep the "
      "model's dtype (plan.json whole_model_bits counts them as stored)";
  report["tokens"] = {{"selection", s.selection.size()},
                      {"heldout", s.heldout.size()},
                      {"whole", s.selection.size() + s.heldout.size()},
                      {"calibration_slice", s.calibration.size()}};
  report["fp"] = {{"whole_ppl", Num(r.fp.whole_ppl)},
                  {"heldout_ppl", Num(r.fp.heldout_ppl)},
                  {"selection_ppl", Num(r.fp.selection_ppl)}};
  const std::string rl_origin = ReturnedPlanOrigin(tr.best.source);
  json plans = json::array();
  for (const MeasuredPlan& m : r.plans) plans.push_back(PlanJson(m, rl_origin));
  report["plans"] = plans;
  report["winner"] = r.winner;
  report["winner_metric"] = r.have_heldout ? "heldout_ppl" : "whole_ppl";
  const MeasuredPlan& rl = r.plans.front();
  report["returned_plan_origin"] = r.origin;
  for (const MeasuredPlan& m : r.plans) {
    if (m.name != r.returned) continue;
    report["returned"] = {{"plan", m.name},
                          {"origin", r.origin},
                          {"bits", m.bits},
                          {"selection_ppl", Num(m.selection_ppl)},
                          {"heldout_ppl", Num(m.heldout_ppl)},
                          {"whole_ppl", Num(m.whole_ppl)}};
  }
  report["rl"] = {{"source", tr.best.source},
                  {"origin", rl_origin},
                  {"update", tr.best.update},
                  {"bits", rl.bits},
                  {"selection_ppl", Num(rl.selection_ppl)},
                  {"whole_ppl", Num(rl.whole_ppl)},
                  {"heldout_ppl", Num(rl.heldout_ppl)}};
  report["lambda"] = tr.lambda;
  report["updates"] = tr.updates;
  report["resumed_from_update"] = tr.resumed_from_update;
  report["plan_evaluations"] = tr.evaluations;
  report["cache_hits"] = tr.cache_hits;
  report["rl_real_evaluations"] = r.rl_evaluations;
  // What each method's real evaluations read and screened: RL's read the selection
  // and calibration slices (the reward's two terms), the searches' the selection slice.
  const auto selection_tokens = static_cast<int64_t>(s.selection.size());
  report["rl_cost"] = search::EvaluationCostJson(
      r.rl_evaluations, selection_tokens + static_cast<int64_t>(s.calibration.size()),
      std::max(1, r.config->training.screen_samples));
  for (const auto& [key, q] : {std::pair<const char*, const SearchResult*>{"search", r.search},
                               {"screened_search", r.screened_search}}) {
    if (q == nullptr) continue;
    report[key] =
        search::SearchRowJson(*q, r.rl_evaluations, r.config->training.seed, selection_tokens);
  }
  for (const auto& [key, b] :
       {std::pair<const char*, const BisectionResult*>{"lagrange_bisect", r.lagrange_bisect},
        {"screened_bisect", r.screened_bisect}}) {
    if (b != nullptr)
      report[key] = search::BisectionRowJson(*b, r.rl_evaluations, selection_tokens);
  }
  if (r.config->lagrange.quality_target()) report["quality_target"] = QualityTargetJson(r);
  if (!r.anchors.empty()) {
    report["uniform_anchors"] = AnchorsJson(r);
    report["uniform_anchors_note"] = learner::kAnchorsNote;
  }
  report["wall_time_s"] = {{"prepare", r.prepare_s}, {"train", r.train_s}, {"total", r.total_s}};
  if (!r.exported.empty()) report["exported"] = r.exported;
  return report;
}

// The curriculum history and the training curve, one row per PPO update.
void AddTrainingJson(const QuantizeReport& r, json* report) {
  json stages = json::array();
  for (const auto& s : r.training->stages) {
    stages.push_back({{"stage", s.stage},
                      {"target_bits", s.target_bits},
                      {"update", s.update},
                      {"reason", s.reason}});
  }
  (*report)["curriculum"] = {{"target_bits", r.config->curriculum.target_bits},
                             {"history", stages}};
  json curve = json::array();
  for (const auto& u : r.training->curve) {
    curve.push_back({{"update", u.update},
                     {"stage", u.stage},
                     {"target_bits", u.target_bits},
                     {"mean_reward", Num(u.mean_reward)},
                     {"mean_ppl", Num(u.mean_ppl)},
                     {"mean_bits", Num(u.mean_bits)},
                     {"best_ppl", Num(u.best_ppl)},
                     {"best_bits", Num(u.best_bits)},
                     {"lambda", u.lambda},
                     {"entropy", Num(u.entropy)},
                     {"evaluations", u.evaluations},
                     {"seconds", u.seconds}});
  }
  (*report)["training_curve"] = curve;
}

std::string RoleText(const base::TextRange& r) {
  std::string text = r.tokens[1] == 0
                         ? absl::StrFormat("%s tokens [%d, end)", r.text, r.tokens[0])
                         : absl::StrFormat("%s tokens [%d, %d)", r.text, r.tokens[0], r.tokens[1]);
  if (r.windows > 0) absl::StrAppendFormat(&text, ", %d windows spread over it", r.windows);
  return text;
}

std::string SliceNote(const QuantizeReport& r) {
  const int64_t selection = static_cast<int64_t>(r.slices->selection.size());
  const int64_t heldout = static_cast<int64_t>(r.slices->heldout.size());
  const config::RunConfig& c = *r.config;
  const std::string roles = absl::StrFormat(
      "Text roles (disjoint): calibration %s; selection %s (%d tokens); held-out %s.",
      RoleText(config::CalibrationRange(c.calibration)), RoleText(c.evaluation.selection),
      selection, RoleText(c.evaluation.heldout));
  return r.have_heldout
             ? absl::StrFormat(
                   "Perplexities in the summary and the chart: the %d held-out tokens, which "
                   "no calibration or selection step read (report.json has all slices). %s",
                   heldout, roles)
             : absl::StrFormat(
                   "Perplexities in the summary and the chart: selection + held-out, %d tokens "
                   "(the held-out part is shorter than one window). %s",
                   selection + heldout, roles);
}

// The quality-target chart's data: epsilon, every plan measured in training
// (plans.jsonl; d against the FP selection perplexity measured at the end)
// and the final rows that chose their plan on the selection slice.
void AddDegradationPoints(const QuantizeReport& r, report::ReportData* d) {
  d->max_ppl_increase = r.config->lagrange.max_ppl_increase();
  const double fp = r.fp.selection_ppl;
  for (const learner::RunRecords::RecordedPlan& p :
       learner::RunRecords(r.config->output.dir).RecordedPlans()) {
    const double dp = p.perplexity / fp - 1.0;
    d->measured.push_back({p.effective_bits, std::isfinite(dp) ? dp : std::nan(""), ""});
  }
  for (const MeasuredPlan& m : r.plans) {
    if (m.name != "rl" && m.name != "search" && m.name != "screened-search" &&
        m.name != "lagrange-bisect" && m.name != "screened-bisect") {
      continue;
    }
    const double dm = SelectionDegradation(m, fp);
    d->measured.push_back({m.bits, dm, m.name == r.returned ? m.name + " (returned)" : m.name});
    if (m.name == r.returned && !(dm <= d->max_ppl_increase)) {
      d->notes.push_back(absl::StrFormat(
          "NO measured plan was within epsilon on the selection slice: the returned plan (%s, "
          "d = %.4f) is the least degraded one measured.",
          m.name, dm));
    }
  }
  d->notes.push_back(absl::StrFormat(
      "Quality target: the fewest bits with a relative perplexity increase d <= %g on the "
      "selection slice, under a cap of %g bits; lambda prices d - epsilon against the bits "
      "saved (docs/lagrange.md). The baselines and searches are measured at the RL plan's "
      "%.4f bits.",
      d->max_ppl_increase, r.target_bits, r.compared_at_bits));
  for (const auto& [name, b] :
       {std::pair<const char*, const BisectionResult*>{"lagrange-bisect", r.lagrange_bisect},
        {"screened-bisect", r.screened_bisect}}) {
    if (b == nullptr) continue;
    d->notes.push_back(search::BisectionNote(name, *b, r.target_bits, r.rl_evaluations));
  }
}

}  // namespace

std::string ReturnedPlanOrigin(const std::string& learner_source) {
  return learner::PlanOrigin(learner_source);  // the distributed report's names too
}

plan::Plan ReturnedPlan(const plan::UnitTable& table, const rl::RunResult& training,
                        double target_bits) {
  plan::Plan plan = plan::Plan::Make(table, training.best.actions,
                                     ReturnedPlanOrigin(training.best.source), target_bits);
  plan.policy_version = training.best.policy_version;
  return plan;
}

namespace {

// The HTML report's notes: the slices, the returned plan, the searches, what
// each method's evaluations read, the anchors, the config.
void AddNotes(const QuantizeReport& r, std::vector<std::string>* notes) {
  const config::RunConfig& cfg = *r.config;
  const rl::RunResult& tr = *r.training;
  notes->push_back(SliceNote(r));
  notes->push_back(
      "Training curves: perplexity and bits on the selection slice; the best plan is the "
      "lowest selection-slice perplexity within the final target.");
  notes->push_back(absl::StrFormat(
      "Returned plan: %s (%s of RL and the searches). RL: %s, "
      "from update %d; %d updates, %d plan evaluations in this process (%d real in the whole "
      "run), lambda %.4f%s.",
      r.origin,
      cfg.lagrange.quality_target() ? "the fewest bits within epsilon on the selection slice"
                                    : "the lowest selection perplexity",
      ReturnedPlanOrigin(tr.best.source), tr.best.update, tr.updates, tr.evaluations,
      r.rl_evaluations, tr.lambda,
      tr.resumed_from_update >= 0
          ? absl::StrFormat("; resumed from update %d", tr.resumed_from_update)
          : ""));
  if (r.search != nullptr) {
    notes->push_back(absl::StrFormat(
        "Search baseline: (1+1) local search from the Lagrangian plan with restarts, %d real "
        "plan evaluations on the selection slice (the RL run: %d), %d accepted moves, %d "
        "restarts.",
        r.search->evaluations, r.rl_evaluations, r.search->accepted, r.search->restarts));
  }
  if (r.screened_search != nullptr) {
    notes->push_back(absl::StrFormat(
        "Screened search: the same search, each measured plan the best-predicted of %d "
        "proposals by the reward model RL uses (RL's actors: %d samples per measured plan); %d "
        "real plan evaluations (the RL run: %d), %d accepted moves, %d restarts.",
        r.screened_search->screen, std::max(1, cfg.training.screen_samples),
        r.screened_search->evaluations, r.rl_evaluations, r.screened_search->accepted,
        r.screened_search->restarts));
  }
  notes->push_back(absl::StrFormat(
      "Tokens read per real evaluation: RL %d (the selection slice and the calibration slice of "
      "the reward's loss term), the searches and bisections %d (the selection slice).",
      r.slices->selection.size() + r.slices->calibration.size(), r.slices->selection.size()));
  for (size_t i = 0; i + 1 < r.anchors.size(); i += 2) {
    const MeasuredPlan& u = r.anchors[i];
    const MeasuredPlan& l = r.anchors[i + 1];
    notes->push_back(absl::StrFormat(
        "Anchor %s at its own %.4f bits: %s perplexity %.4f; the Lagrangian plan at the same "
        "bits %.4f (%.3fx).",
        u.name, u.bits, r.have_heldout ? "held-out" : "whole-text", Metric(u, r.have_heldout),
        Metric(l, r.have_heldout), Metric(l, r.have_heldout) / Metric(u, r.have_heldout)));
  }
  notes->push_back(
      absl::StrCat("Config ", cfg.source,
                   "; baselines (uniform within and above the target, greedy, lagrange, random, "
                   "search, screened-search) use the same unit table and operators."));
}

}  // namespace

report::ReportData MakeReportData(const QuantizeReport& r) {
  const bool have_heldout = r.have_heldout;
  auto metric = [have_heldout](const MeasuredPlan& m) {  // non-finite (overflow) = unknown
    const double ppl = Metric(m, have_heldout);
    return std::isfinite(ppl) ? ppl : std::nan("");
  };
  const config::RunConfig& cfg = *r.config;
  const rl::RunResult& tr = *r.training;
  report::ReportData d;
  const std::filesystem::path model_dir = std::filesystem::path(cfg.model.dir).lexically_normal();
  d.model_name = model_dir.has_filename() ? model_dir.filename().string()
                                          : model_dir.parent_path().filename().string();
  d.fingerprint = r.fingerprint;
  d.fp_perplexity = metric(r.fp);
  d.target_bits = r.target_bits;
  d.winner = r.winner;
  d.wall_time_s = r.total_s;
  const std::vector<int>& rl = r.plans.front().actions;
  for (size_t i = 0; i < r.table->units.size(); ++i) {
    const plan::Unit& u = r.table->units[i];
    d.units.push_back({u.layer, u.matrix, u.n(), u.bits[rl[i]] / static_cast<double>(u.n())});
  }
  for (const MeasuredPlan& m : r.plans) d.points.push_back({m.name, m.bits, metric(m)});
  const double nan = std::nan("");
  for (const rl::UpdateRecord& u : tr.curve) {
    report::TrainingRow row;
    row.update = u.update;
    row.mean_reward = u.mean_reward;
    row.best_perplexity = u.best_ppl > 0 ? u.best_ppl : nan;  // 0: no feasible plan yet
    row.bits = u.mean_bits;
    row.lambda = u.lambda;
    row.target_bits = u.target_bits;
    row.mean_perplexity = u.mean_ppl;
    d.curve.push_back(row);
  }
  if (cfg.lagrange.quality_target()) AddDegradationPoints(r, &d);
  AddNotes(r, &d.notes);
  return d;
}

absl::Status WriteQuantizeReport(const QuantizeReport& r) {
  json report = SummaryJson(r);
  AddTrainingJson(r, &report);
  // The HTML report's keys beside ours. Shared keys (fingerprint, target_bits,
  // winner, wall_time_s) already hold the same values.
  const report::ReportData html_data = MakeReportData(r);
  WQ_RETURN_IF_ERROR(report::ValidateReportData(html_data));
  const json html_json = json::parse(report::ToJson(html_data));
  for (const char* key : {"model_name", "fp_perplexity", "notes", "units", "points", "curve",
                          "max_ppl_increase", "measured"}) {
    if (html_json.contains(key)) report[key] = html_json.at(key);
  }
  const std::filesystem::path out_dir(r.config->output.dir);
  WQ_RETURN_IF_ERROR(
      base::WriteFileAtomic((out_dir / "report.json").string(), report.dump(2) + "\n"));
  return report::WriteHtmlReport(html_data, (out_dir / "report.html").string());
}

}  // namespace windquant::job
