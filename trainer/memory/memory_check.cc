#include "trainer/memory/memory_check.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "trainer/strategy/registry.h"

namespace mtb {
namespace {

constexpr double kTolerance = 0.10;
// Unattributed at the peak against the estimate's activations + logits.
constexpr double kUnattributedOverEstimate = 1.5;

std::string Mb(int64_t bytes) {
  return absl::StrFormat("%.3f MB", static_cast<double>(bytes) / 1e6);
}

}  // namespace

MemoryFormula MemoryFormulaFor(const TrainResult& result) {
  MemoryInputs in;
  in.parameters = result.model().parameter_count();
  in.world_size = std::max(1, result.memory_size());
  in.reshard_after_forward =
      !result.config().fsdp_keep_gathered_until_backward();
  in.prefetch = result.config().fsdp_prefetch();
  std::vector<int64_t> buckets;
  for (const BucketInfo& b : result.strategy().buckets()) {
    buckets.push_back(b.bytes());
  }
  absl::StatusOr<StrategyKind> kind = ParseStrategy(result.strategy().name());
  const HeldBounds bounds = EntryFor(kind.ok() ? *kind : StrategyKind::kDdp)
                                .bounds(in, buckets);
  MemoryFormula formula;
  formula.parameters = bounds.parameters;
  formula.parameters_in_flight = bounds.parameters_in_flight;
  formula.gradients = bounds.gradients;
  formula.gradients_in_flight = bounds.gradients_in_flight;
  formula.optimizer_state = bounds.optimizer_state;
  formula.collective_bound = bounds.collective_bound;
  return formula;
}

MemoryCheck CheckMemoryAtPeak(const TrainResult& result) {
  using Check = MemoryCheck::Check;
  MemoryCheck check;
  const MemoryFormula formula = MemoryFormulaFor(result);
  const std::string& strategy = result.strategy().name();
  const int64_t estimate_activations =
      result.memory_estimate().activations() + result.memory_estimate().logits();
  // low .. high, each named.
  auto within = [&](Check kind, const std::string& rank, const char* what,
                    int64_t actual, int64_t expected, int64_t in_flight) {
    const double low = (1 - kTolerance) * static_cast<double>(expected);
    const double high =
        (1 + kTolerance) * static_cast<double>(expected) + in_flight;
    if (actual < low || actual > high) {
      check.failures.push_back(
          {kind, absl::StrCat(strategy, " ", rank, ": ", what, " ", Mb(actual),
                              " is not within 10% of the closed form ",
                              Mb(expected),
                              in_flight > 0
                                  ? absl::StrCat(" (+ ", Mb(in_flight),
                                                 " in flight)")
                                  : "")});
    }
  };
  int counted = 0;
  for (const RankMemory& memory : result.memory()) {
    if (!memory.counted()) continue;
    ++counted;
    const MemoryAtPeak& at = memory.at_peak();
    const std::string rank = absl::StrCat("rank ", memory.rank());
    check.measurements.push_back(absl::StrFormat(
        "%s %s: peak %s at '%s' (step %d): parameters %s, gradients %s, "
        "AdamW %s, collective %s (bound %s), unattributed %s (%.2fx the "
        "estimate's activations + logits %s)",
        strategy, rank, Mb(at.peak_bytes()), at.where(), at.step(),
        Mb(at.parameter_bytes()), Mb(at.gradient_bytes()),
        Mb(at.optimizer_state_bytes()), Mb(at.collective_bytes()),
        Mb(formula.collective_bound), Mb(at.unattributed_bytes()),
        static_cast<double>(at.unattributed_bytes()) /
            static_cast<double>(std::max<int64_t>(1, estimate_activations)),
        Mb(estimate_activations)));
    within(Check::kParameters, rank, "parameters", at.parameter_bytes(),
           formula.parameters, formula.parameters_in_flight);
    within(Check::kGradients, rank, "gradients", at.gradient_bytes(),
           formula.gradients, formula.gradients_in_flight);
    within(Check::kOptimizerState, rank, "AdamW state",
           at.optimizer_state_bytes(), formula.optimizer_state, 0);
    within(Check::kTotal, rank, "parameters + gradients + AdamW state",
           at.parameter_bytes() + at.gradient_bytes() +
               at.optimizer_state_bytes(),
           formula.total(),
           formula.parameters_in_flight + formula.gradients_in_flight);
    if (at.collective_bytes() < 0 ||
        at.collective_bytes() > formula.collective_bound) {
      check.failures.push_back(
          {Check::kCollective,
           absl::StrCat(strategy, " ", rank, ": collective temporaries ",
                        Mb(at.collective_bytes()), " exceed the bound ",
                        Mb(formula.collective_bound))});
    }
    const double unattributed_bound =
        kUnattributedOverEstimate * static_cast<double>(estimate_activations);
    if (at.unattributed_bytes() < 0 ||
        at.unattributed_bytes() > unattributed_bound) {
      check.failures.push_back(
          {Check::kUnattributed,
           absl::StrCat(strategy, " ", rank, ": unattributed ",
                        Mb(at.unattributed_bytes()),
                        " is negative or above 1.5x the estimate's "
                        "activations + logits ",
                        Mb(estimate_activations))});
    }
    if (at.peak_bytes() != memory.peak_bytes()) {
      check.failures.push_back(
          {Check::kPeakFound,
           absl::StrCat(strategy, " ", rank, ": the breakdown's peak ",
                        at.peak_bytes(), " is not the allocator's peak ",
                        memory.peak_bytes())});
    }
  }
  if (counted == 0) {
    check.failures.push_back({Check::kPeakFound, "no rank's memory counted"});
  }
  return check;
}

}  // namespace mtb
