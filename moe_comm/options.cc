#include "moe_comm/options.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/status.h"
#include "glog/logging.h"

namespace mtb::moe_comm {

MoeCommOptions DefaultOptions() {
  MoeCommOptions options;
  options.add_tokens_per_rank(1024);
  options.add_hidden(128);
  options.set_ffn_hidden(0);
  options.add_num_experts(0);
  options.add_top_k(2);
  options.add_capacity_factor(1.25);
  for (const char* skew : {"uniform", "zipf:0.5", "zipf:1", "zipf:1.5", "zipf:2"}) {
    options.add_skew(skew);
  }
  options.set_iters(20);
  options.set_warmup_iters(5);
  options.set_seed(1234);
  options.set_rtol(1e-4);
  options.set_atol(1e-4);
  options.set_aux_loss_weight(0.01);
  options.set_z_loss_weight(0.001);
  return options;
}

absl::StatusOr<std::vector<int>> ParseIntList(const std::string& flag,
                                              const std::string& text) {
  std::vector<int> values;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int value = 0;
    if (!absl::SimpleAtoi(part, &value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, "=", text, ": '", part, "' is not an integer"));
    }
    values.push_back(value);
  }
  return values;
}

absl::StatusOr<std::vector<double>> ParseDoubleList(const std::string& flag,
                                                    const std::string& text) {
  std::vector<double> values;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    double value = 0;
    if (!absl::SimpleAtod(part, &value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, "=", text, ": '", part, "' is not a number"));
    }
    values.push_back(value);
  }
  return values;
}

namespace {

absl::Status AtLeast(const std::string& flag, int64_t value, int64_t minimum) {
  if (value >= minimum) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", value, " must be >= ", minimum));
}

int ResolveExperts(int num_experts, int world_size) {
  return num_experts == 0 ? 2 * world_size : num_experts;
}

}  // namespace

absl::Status ValidateOptions(const MoeCommOptions& options, int world_size,
                             const std::string& world_label) {
  for (int n : options.tokens_per_rank()) RETURN_IF_ERROR(AtLeast("tokens_per_rank", n, 1));
  for (int d : options.hidden()) RETURN_IF_ERROR(AtLeast("hidden", d, 1));
  RETURN_IF_ERROR(AtLeast("ffn_hidden", options.ffn_hidden(), 0));
  RETURN_IF_ERROR(AtLeast("iters", options.iters(), 1));
  RETURN_IF_ERROR(AtLeast("warmup_iters", options.warmup_iters(), 0));
  int fewest_experts = -1;
  for (int given : options.num_experts()) {
    const int e = ResolveExperts(given, world_size);
    if (e < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--num_experts=", given, " must be >= 1 (0: 2 x ranks)"));
    }
    if (e % world_size != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--num_experts=", e, " is not divisible by ", world_label,
          " (each rank holds a contiguous block of experts)"));
    }
    if (fewest_experts < 0 || e < fewest_experts) fewest_experts = e;
  }
  for (int k : options.top_k()) {
    if (k != 1 && k != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("--top_k=", k, " must be 1 or 2"));
    }
    if (k > fewest_experts) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--top_k=", k, " exceeds --num_experts=", fewest_experts));
    }
  }
  for (double cf : options.capacity_factor()) {
    if (!(cf > 0) || !std::isfinite(cf)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--capacity_factor=", cf, " must be a finite number > 0 (a factor of "
          "--num_experts or more keeps every assignment)"));
    }
  }
  for (const std::string& text : options.skew()) {
    // ParseSkew's own suggestion names linear, which moe_comm does not take.
    absl::StatusOr<Skew> skew = ParseSkew("skew", text);
    if (!skew.ok() && absl::StartsWith(text, "zipf:")) return skew.status();
    if (!skew.ok() || skew->kind == Skew::Kind::kLinear) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--skew=", text, ": expected uniform or zipf:S (S a finite number >= 0, e.g. "
          "zipf:1.2); moe_comm draws routing from these two"));
    }
  }
  if (!(options.rtol() >= 0) || !(options.atol() >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rtol=", options.rtol(), " and --atol=", options.atol(),
        " must be >= 0"));
  }
  return absl::OkStatus();
}

std::vector<MoeConfig> ExpandSweep(const MoeCommOptions& options,
                                   int world_size) {
  std::vector<MoeConfig> configs;
  for (int n : options.tokens_per_rank())
    for (int d : options.hidden())
      for (int e : options.num_experts())
        for (int k : options.top_k())
          for (double cf : options.capacity_factor())
            for (const std::string& skew : options.skew()) {
              MoeConfig config;
              config.set_tokens_per_rank(n);
              config.set_hidden(d);
              config.set_ffn_hidden(options.ffn_hidden() == 0
                                        ? 4 * d
                                        : options.ffn_hidden());
              config.set_num_experts(ResolveExperts(e, world_size));
              config.set_top_k(k);
              config.set_capacity_factor(cf);
              config.set_skew(SkewToString(*ParseSkew("skew", skew)));
              configs.push_back(config);
            }
  return configs;
}

std::string DescribeConfig(const MoeConfig& config) {
  return absl::StrCat("N=", config.tokens_per_rank(), " D=", config.hidden(),
                      " F=", config.ffn_hidden(), " E=", config.num_experts(),
                      " k=", config.top_k(), " cf=", config.capacity_factor(),
                      " skew=", config.skew());
}

Skew SkewOf(const MoeConfig& config) {
  absl::StatusOr<Skew> skew = ParseSkew("skew", config.skew());
  CHECK(skew.ok()) << skew.status();
  return *skew;
}

absl::StatusOr<std::vector<Fault>> ResolveFaults(const std::string& spec,
                                                 const MoeCommOptions& options,
                                                 int world_size,
                                                 const TimeoutOptions& timeouts) {
  absl::StatusOr<std::vector<Fault>> faults = ParseFaults(
      spec, SweepFaultGrammar("moe_comm", {"dispatch", "combine"}, "configuration"));
  if (!faults.ok() || faults->empty()) return faults;
  FaultBounds bounds;
  bounds.world_size = world_size;
  bounds.steps = static_cast<int64_t>(ExpandSweep(options, world_size).size());
  bounds.step_name = "configuration";
  bounds.first_step_timeout = timeouts.first_step_timeout;
  bounds.collective_timeout = timeouts.collective_timeout;
  if (absl::Status valid = ValidateFaults(*faults, bounds); !valid.ok()) return valid;
  return faults;
}

}  // namespace mtb::moe_comm
