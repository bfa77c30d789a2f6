// Compensation: how a plan's units are rounded when the plan is applied (the run config's
// quant.compensation; DESIGN.md section 8). Parsed once, when the config loads
// (common/config/run_config.cc, which names the key in its error); every component takes
// the enum, none compares the name. No torch here.
#ifndef WINDQUANT_COMMON_QUANT_COMPENSATION_H_
#define WINDQUANT_COMMON_QUANT_COMPENSATION_H_

#include <optional>
#include <string_view>

namespace windquant::quant {

enum class Compensation {
  // Every unit rounded on its own, exactly as the unit table scored it.
  kNone,
  // Each linear quantized column by column in unit order, the rounding error carried into
  // the columns not yet quantized through the calibration Hessian of its input (gptq.h):
  // the calibration pass also collects the stage's inputs for the factors.
  kGptq,
};

// The config spelling: "none" / "gptq".
constexpr std::string_view CompensationName(Compensation c) {
  return c == Compensation::kGptq ? "gptq" : "none";
}

// The value of a config spelling; nullopt for any other.
constexpr std::optional<Compensation> ParseCompensation(std::string_view name) {
  if (name == "none") return Compensation::kNone;
  if (name == "gptq") return Compensation::kGptq;
  return std::nullopt;
}

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_COMPENSATION_H_
