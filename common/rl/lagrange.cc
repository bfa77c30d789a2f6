#include "common/rl/lagrange.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace windquant::rl {

double ConstraintValue(const LagrangeOptions& options, const PlanEvaluation& evaluation,
                       double target_bits) {
  if (options.prices == "budget") return evaluation.effective_bits - target_bits;
  return evaluation.relative_ppl_increase;  // quality and target: g = d
}

double LagrangeMultiplier::Update(double d) {
  if (!std::isfinite(d)) {
    lambda_ = options_.lambda_max;
    return lambda_;
  }
  // DESIGN.md section 4: lambda <- clip(lambda + eta * (g - epsilon), 0, lambda_max).
  lambda_ = std::clamp(lambda_ + options_.eta * (d - options_.epsilon), 0.0, options_.lambda_max);
  return lambda_;
}

namespace {

// One episode's g - epsilon for the proportional and derivative terms; a
// non-finite g counts as a violation of 1 (it already sets the integral to
// lambda_max).
double Error(const LagrangeOptions& o, double constraint_value) {
  return std::isfinite(constraint_value) ? constraint_value - o.epsilon : 1.0;
}

}  // namespace

double BatchLambda::lambda() const {
  const LagrangeOptions& o = options();
  const double integral = multiplier_.lambda();
  if (o.kp == 0 && o.kd == 0) return integral;  // exactly the dual ascent's
  const double e = error_count_ > 0 ? error_sum_ / static_cast<double>(error_count_) : 0.0;
  const double previous = history_.back().previous_error;
  const double rise = std::isnan(previous) ? 0.0 : std::max(0.0, e - previous);
  return std::clamp(integral + o.kp * e + o.kd * rise, 0.0, o.lambda_max);
}

double BatchLambda::Preview(double constraint_value) const {
  BatchLambda copy = *this;
  copy.Observe(constraint_value);
  return copy.lambda();
}

void BatchLambda::Observe(double constraint_value) {
  multiplier_.Update(constraint_value);
  error_sum_ += Error(options(), constraint_value);
  ++error_count_;
}

double BatchLambda::EndBatch() {
  const double e = error_count_ > 0 ? error_sum_ / static_cast<double>(error_count_) : 0.0;
  history_.push_back({lambda(), multiplier_.lambda(), e});
  ClearErrors();
  return history_.back().lambda;
}

bool BatchLambda::Rewind(int64_t batch) {
  if (batch < 0 || batch > this->batch() ||
      std::isnan(history_[static_cast<size_t>(batch)].lambda)) {
    return false;
  }
  history_.resize(static_cast<size_t>(batch) + 1);
  multiplier_.set_lambda(history_.back().integral);
  ClearErrors();
  return true;
}

void BatchLambda::Adopt(int64_t batch, double lambda) {
  if (batch < 0) batch = 0;
  constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();
  history_.resize(static_cast<size_t>(batch), {kUnknown, kUnknown, kUnknown});
  history_.push_back({lambda, lambda, kUnknown});
  multiplier_.set_lambda(lambda);
  ClearErrors();
}

// "lambda-v2 <integral> <error sum> <error count>" and then, for each batch,
// "<lambda_k> <integral_k> <e_{k-1}>"; doubles as %a (exact).
std::string BatchLambda::Serialize() const {
  std::string out =
      absl::StrFormat("lambda-v2 %a %a %d", multiplier_.lambda(), error_sum_, error_count_);
  for (const BatchStart& b : history_) {
    absl::StrAppendFormat(&out, " %a %a %a", b.lambda, b.integral, b.previous_error);
  }
  out += "\n";
  return out;
}

// Also "lambda-v1 <multiplier> <lambda_0> ... <lambda_k>" (before kp and kd:
// the integral was lambda, no error recorded).
absl::Status BatchLambda::Parse(std::string_view text) {
  std::vector<std::string> words = absl::StrSplit(absl::string_view(text.data(), text.size()),
                                                  absl::ByAnyChar(" \n"), absl::SkipEmpty());
  const bool v1 = !words.empty() && words[0] == "lambda-v1";
  const bool v2 = !words.empty() && words[0] == "lambda-v2";
  if (!(v1 && words.size() >= 3) && !(v2 && words.size() >= 7 && (words.size() - 4) % 3 == 0)) {
    return absl::InvalidArgumentError("lambda state: not written by BatchLambda::Serialize");
  }
  std::vector<double> values;
  for (size_t i = 1; i < words.size(); ++i) {
    char* end = nullptr;
    const double v = std::strtod(words[i].c_str(), &end);
    if (end == words[i].c_str() || *end != '\0') {
      return absl::InvalidArgumentError(absl::StrCat("lambda state: bad number ", words[i]));
    }
    values.push_back(v);
  }
  std::vector<BatchStart> history;
  if (v1) {
    for (size_t i = 1; i < values.size(); ++i)
      history.push_back({values[i], values[i], std::numeric_limits<double>::quiet_NaN()});
    error_sum_ = 0;
    error_count_ = 0;
  } else {
    if (values[2] < 0 || values[2] != std::floor(values[2])) {
      return absl::InvalidArgumentError(absl::StrCat("lambda state: bad count ", words[3]));
    }
    for (size_t i = 3; i < values.size(); i += 3) {
      history.push_back({values[i], values[i + 1], values[i + 2]});
    }
    error_sum_ = values[1];
    error_count_ = static_cast<int64_t>(values[2]);
  }
  multiplier_.set_lambda(values[0]);
  history_ = std::move(history);
  return absl::OkStatus();
}

}  // namespace windquant::rl
