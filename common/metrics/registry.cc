#include "common/metrics/registry.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/metrics/text_format.h"

namespace windquant::metrics {
namespace {

constexpr absl::string_view kPrefix = "windquant_";

// Units that have a base unit instead (seconds, bytes, ratio); STYLE.md wants base units.
constexpr absl::string_view kNonBaseUnits[] = {
    "ms",      "milliseconds", "us",        "microseconds", "ns",        "nanoseconds", "mins",
    "minutes", "hours",        "days",      "kb",           "kib",       "mb",          "mib",
    "gb",      "gib",          "kilobytes", "megabytes",    "gigabytes", "percent"};

// Suffixes Prometheus derives from histograms/summaries; a family must not collide.
constexpr absl::string_view kReservedSuffixes[] = {"_bucket", "_sum", "_count"};

bool IsLowerSnake(absl::string_view s) {
  if (s.empty() || !(s[0] >= 'a' && s[0] <= 'z') || s.back() == '_') return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok || (c == '_' && s[i + 1] == '_')) return false;
  }
  return true;
}

}  // namespace

absl::Status ValidateMetricName(absl::string_view name, MetricType type) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("metric name '", name, "': ", why));
  };
  if (!IsLowerSnake(name)) return bad("must be lower_snake_case ([a-z][a-z0-9_]*, no '__')");
  if (!absl::StartsWith(name, kPrefix)) return bad("must start with 'windquant_'");
  std::vector<absl::string_view> parts = absl::StrSplit(name.substr(kPrefix.size()), '_');
  if (parts.size() < 2) return bad("must be windquant_<part>_<what>[_<unit>]");
  for (absl::string_view part : parts) {
    for (absl::string_view unit : kNonBaseUnits) {
      if (part == unit) {
        return bad(absl::StrCat("use base units (seconds, bytes, ratio), not '", unit, "'"));
      }
    }
  }
  const bool ends_total = parts.back() == "total";
  if (type == MetricType::kCounter) {
    if (!ends_total) return bad("counters must end in '_total'");
    if (parts.size() < 3) return bad("counters must be windquant_<part>_<what>[_<unit>]_total");
  } else if (ends_total) {
    return bad("only counters may end in '_total'");
  }
  for (absl::string_view suffix : kReservedSuffixes) {
    if (absl::EndsWith(name, suffix)) return bad(absl::StrCat("'", suffix, "' is reserved"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLabelName(absl::string_view name, MetricType type) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("label name '", name, "': ", why));
  };
  if (name.empty()) return bad("must not be empty");
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return bad("must match [a-zA-Z_][a-zA-Z0-9_]*");
  }
  if (absl::StartsWith(name, "__")) return bad("names starting with '__' are reserved");
  if (type == MetricType::kHistogram && name == "le") return bad("reserved in histograms");
  return absl::OkStatus();
}

template <typename T>
Family<T>::Family(std::string name, std::string help, std::vector<std::string> label_names,
                  std::vector<double> bounds)
    : FamilyBase(std::move(name), std::move(help), std::move(label_names)),
      bounds_(std::move(bounds)) {}

template <typename T>
T& Family<T>::Labels(const std::vector<std::string>& label_values) {
  if (label_values.size() != label_names().size()) {
    // Label names are compile-time constants at every call site: a mismatch is a bug.
    std::fprintf(stderr, "metrics: %s has %zu labels (%s), got %zu values\n", name().c_str(),
                 label_names().size(), absl::StrJoin(label_names(), ",").c_str(),
                 label_values.size());
    std::abort();
  }
  absl::MutexLock lock(&mu_);
  std::unique_ptr<T>& child = children_[label_values];
  if (child == nullptr) {
    if constexpr (std::is_same_v<T, Histogram>) {
      child = std::make_unique<Histogram>(bounds_);
    } else {
      child = std::make_unique<T>();
    }
  }
  return *child;
}

template <typename T>
FamilySnapshot Family<T>::Collect() const {
  FamilySnapshot out;
  out.name = name();
  out.help = help();
  out.type = T::kType;
  out.label_names = label_names();
  absl::MutexLock lock(&mu_);
  out.metrics.reserve(children_.size());
  for (const auto& [values, child] : children_) {
    MetricSnapshot m;
    m.label_values = values;
    if constexpr (std::is_same_v<T, Histogram>) {
      m.histogram = child->Collect();
    } else {
      m.value = child->Value();
    }
    out.metrics.push_back(std::move(m));
  }
  return out;
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

Registry& Registry::Default() {
  static Registry* registry = new Registry();
  return *registry;
}

template <typename T>
absl::StatusOr<Family<T>*> Registry::Add(absl::string_view name, absl::string_view help,
                                         std::vector<std::string> label_names,
                                         std::vector<double> bounds) {
  if (absl::Status s = ValidateMetricName(name, T::kType); !s.ok()) return s;
  if (help.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("metric ", name, ": help text is required"));
  }
  std::set<absl::string_view> seen;
  for (const std::string& label : label_names) {
    if (absl::Status s = ValidateLabelName(label, T::kType); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("metric ", name, ": ", s.message()));
    }
    if (!seen.insert(label).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric ", name, ": duplicate label name '", label, "'"));
    }
  }
  if constexpr (std::is_same_v<T, Histogram>) {
    if (bounds.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("metric ", name, ": no bucket bounds"));
    }
    for (size_t i = 0; i < bounds.size(); ++i) {
      if (!std::isfinite(bounds[i]) || (i > 0 && !(bounds[i] > bounds[i - 1]))) {
        return absl::InvalidArgumentError(
            absl::StrCat("metric ", name,
                         ": bucket bounds must be finite and strictly increasing (bound ", i, ")"));
      }
    }
  }

  absl::MutexLock lock(&mu_);
  auto it = families_.find(name);
  if (it != families_.end()) {
    auto* existing = dynamic_cast<Family<T>*>(it->second.get());
    if (existing == nullptr || existing->help() != help || existing->label_names() != label_names ||
        existing->bounds() != bounds) {
      return absl::AlreadyExistsError(absl::StrCat(
          "metric ", name, ": already registered with a different type, help, labels or buckets"));
    }
    return existing;
  }
  const bool has_labels = !label_names.empty();
  auto family = std::make_unique<Family<T>>(std::string(name), std::string(help),
                                            std::move(label_names), std::move(bounds));
  Family<T>* raw = family.get();
  if (!has_labels) raw->Get();  // export 0 from the start
  families_.emplace(std::string(name), std::move(family));
  return raw;
}

absl::StatusOr<Family<Counter>*> Registry::AddCounter(absl::string_view name,
                                                      absl::string_view help,
                                                      std::vector<std::string> label_names) {
  return Add<Counter>(name, help, std::move(label_names), {});
}

absl::StatusOr<Family<Gauge>*> Registry::AddGauge(absl::string_view name, absl::string_view help,
                                                  std::vector<std::string> label_names) {
  return Add<Gauge>(name, help, std::move(label_names), {});
}

absl::StatusOr<Family<Histogram>*> Registry::AddHistogram(absl::string_view name,
                                                          absl::string_view help,
                                                          std::vector<double> bounds,
                                                          std::vector<std::string> label_names) {
  return Add<Histogram>(name, help, std::move(label_names), std::move(bounds));
}

std::vector<FamilySnapshot> Registry::Collect() const {
  std::vector<const FamilyBase*> families;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, family] : families_) families.push_back(family.get());
  }
  // Families are never removed, so collecting them outside mu_ is safe and keeps
  // registration from waiting on a long collection.
  std::vector<FamilySnapshot> out;
  out.reserve(families.size());
  for (const FamilyBase* family : families) out.push_back(family->Collect());
  return out;
}

std::string Registry::TextExposition() const { return FormatText(Collect()); }

}  // namespace windquant::metrics
