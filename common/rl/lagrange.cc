#include "common/rl/lagrange.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

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

double BatchLambda::Preview(double constraint_value) const {
  LagrangeMultiplier copy = multiplier_;
  return copy.Update(constraint_value);
}

bool BatchLambda::Rewind(int64_t batch) {
  if (batch < 0 || batch > this->batch() || std::isnan(history_[static_cast<size_t>(batch)])) {
    return false;
  }
  history_.resize(static_cast<size_t>(batch) + 1);
  multiplier_.set_lambda(history_.back());
  return true;
}

void BatchLambda::Adopt(int64_t batch, double lambda) {
  if (batch < 0) batch = 0;
  history_.resize(static_cast<size_t>(batch), std::numeric_limits<double>::quiet_NaN());
  history_.push_back(lambda);
  multiplier_.set_lambda(lambda);
}

// "lambda-v1 <multiplier> <lambda_0> ... <lambda_k>", doubles as %a (exact).
std::string BatchLambda::Serialize() const {
  std::string out = absl::StrFormat("lambda-v1 %a", multiplier_.lambda());
  for (double l : history_) absl::StrAppendFormat(&out, " %a", l);
  out += "\n";
  return out;
}

absl::Status BatchLambda::Parse(std::string_view text) {
  std::vector<std::string> words = absl::StrSplit(absl::string_view(text.data(), text.size()),
                                                  absl::ByAnyChar(" \n"), absl::SkipEmpty());
  if (words.size() < 3 || words[0] != "lambda-v1") {
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
  multiplier_.set_lambda(values[0]);
  history_.assign(values.begin() + 1, values.end());
  return absl::OkStatus();
}

}  // namespace windquant::rl
