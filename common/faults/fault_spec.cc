#include "common/faults/fault_spec.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace mtb {
namespace {

struct KindRules {
  FaultKind kind;
  std::vector<std::string> required;
  std::vector<std::string> optional;
};

const std::map<std::string, KindRules>& Kinds() {
  static const auto* kinds = new std::map<std::string, KindRules>{
      {"kill", {FaultKind::kKill, {"rank", "step", "phase"}, {}}},
      {"nan", {FaultKind::kNan, {"rank", "step"}, {}}},
      {"hang", {FaultKind::kHang, {"rank", "step"}, {"phase"}}},
      {"slow", {FaultKind::kSlow, {"rank", "ms"}, {"every"}}},
      {"exit", {FaultKind::kExit, {"rank", "step", "code"}, {}}},
      {"corrupt", {FaultKind::kCorrupt, {"rank", "step"}, {}}},
  };
  return *kinds;
}

std::string KindName(FaultKind kind) {
  for (const auto& [name, rules] : Kinds()) {
    if (rules.kind == kind) return name;
  }
  return "?";
}

absl::Status Bad(absl::string_view spec, absl::string_view part,
                 absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("--fault=", spec, ": '", part, "' ", why));
}

}  // namespace

FaultGrammar TrainerFaultGrammar() {
  FaultGrammar grammar;
  grammar.phases = {"data", "forward", "backward", "optimizer", "checkpoint_write",
                    "checkpoint_before_ready", "checkpoint_before_latest"};
  grammar.default_phase = "forward";
  return grammar;
}

FaultGrammar SweepFaultGrammar(std::string tool, std::vector<std::string> phases,
                               std::string step_name) {
  FaultGrammar grammar;
  grammar.phases = std::move(phases);
  grammar.tool = std::move(tool);
  grammar.kinds = {FaultKind::kKill, FaultKind::kHang, FaultKind::kSlow,
                   FaultKind::kExit};
  grammar.kind_notes = {{FaultKind::kNan, "it has no loss to make NaN"},
                        {FaultKind::kCorrupt, "it saves no checkpoint to corrupt"}};
  grammar.step_name = std::move(step_name);
  return grammar;
}

absl::StatusOr<std::vector<Fault>> ParseFaults(absl::string_view spec,
                                               const FaultGrammar& grammar) {
  std::vector<Fault> faults;
  if (absl::StripAsciiWhitespace(spec).empty()) return faults;
  for (absl::string_view one : absl::StrSplit(spec, ';', absl::SkipWhitespace())) {
    one = absl::StripAsciiWhitespace(one);
    const size_t colon = one.find(':');
    const std::string kind_name(one.substr(0, colon));
    auto kind = Kinds().find(kind_name);
    if (kind == Kinds().end()) {
      std::vector<std::string> names;
      for (const auto& [name, rules] : Kinds()) names.push_back(name);
      return Bad(spec, kind_name,
                 absl::StrCat("is not a fault kind (", absl::StrJoin(names, ", "), ")"));
    }
    const KindRules& rules = kind->second;
    if (!grammar.kinds.empty() &&
        std::find(grammar.kinds.begin(), grammar.kinds.end(), rules.kind) ==
            grammar.kinds.end()) {
      std::vector<std::string> names;
      for (FaultKind accepted : grammar.kinds) names.push_back(KindName(accepted));
      const auto note = grammar.kind_notes.find(rules.kind);
      return Bad(spec, kind_name,
                 absl::StrCat("is not a fault ", grammar.tool, " injects (",
                              absl::StrJoin(names, ", "), ")",
                              note == grammar.kind_notes.end() ? "" : ": ",
                              note == grammar.kind_notes.end() ? "" : note->second));
    }
    std::vector<std::string> allowed = rules.required;
    allowed.insert(allowed.end(), rules.optional.begin(), rules.optional.end());
    Fault fault;
    fault.kind = rules.kind;
    std::set<std::string> seen;
    if (colon == absl::string_view::npos) {
      return Bad(spec, one, absl::StrCat("needs ", absl::StrJoin(rules.required, ", ")));
    }
    for (absl::string_view pair : absl::StrSplit(one.substr(colon + 1), ',')) {
      const std::vector<std::string> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
      if (kv.size() != 2 || kv[0].empty()) {
        return Bad(spec, pair, "is not key=value");
      }
      const std::string& key = kv[0];
      const std::string& value = kv[1];
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        return Bad(spec, key, absl::StrCat("is not a key of ", kind_name, " (",
                                           absl::StrJoin(allowed, ", "), ")"));
      }
      if (!seen.insert(key).second) return Bad(spec, key, "is given twice");
      if (key == "phase") {
        if (std::find(grammar.phases.begin(), grammar.phases.end(), value) ==
            grammar.phases.end()) {
          return Bad(spec, value, absl::StrCat("is not a phase (",
                                               absl::StrJoin(grammar.phases, ", "), ")"));
        }
        fault.phase = value;
        continue;
      }
      int64_t number = 0;
      if (!absl::SimpleAtoi(value, &number)) {
        return Bad(spec, pair, "needs a whole number");
      }
      if (key == "rank") {
        if (number < 0) return Bad(spec, pair, "must be >= 0");
        fault.rank = static_cast<int>(number);
      } else if (key == "step") {
        if (number < 1) return Bad(spec, pair, "must be >= 1 (steps count from 1)");
        fault.step = number;
      } else if (key == "ms") {
        if (number < 1) return Bad(spec, pair, "must be >= 1");
        fault.ms = number;
      } else if (key == "every") {
        if (number < 1) return Bad(spec, pair, "must be >= 1");
        fault.every = number;
      } else if (key == "code") {
        if (number < 1 || number > 255) return Bad(spec, pair, "must be in [1, 255]");
        fault.code = static_cast<int>(number);
      }
    }
    for (const std::string& key : rules.required) {
      if (!seen.count(key)) {
        return Bad(spec, one, absl::StrCat("lacks ", key, " (", kind_name, " needs ",
                                           absl::StrJoin(rules.required, ", "), ")"));
      }
    }
    faults.push_back(fault);
  }
  if (faults.empty()) {
    // ";" or " ; ": a spec that says nothing is a mistake, not "no faults".
    return absl::InvalidArgumentError(absl::StrCat(
        "--fault=", spec, ": names no fault (KIND:key=value,... separated by ';'; "
        "leave the flag out for none)"));
  }
  return faults;
}

absl::Status ValidateFaults(const std::vector<Fault>& faults, int world_size,
                            int64_t steps) {
  FaultBounds bounds;
  bounds.world_size = world_size;
  bounds.steps = steps;
  return ValidateFaults(faults, bounds);
}

namespace {

// "1-3 all_reduce, 4 all_gather": runs of equal phases.
std::string DescribePlan(const std::vector<std::string>& phase_of_step) {
  std::vector<std::string> runs;
  size_t begin = 0;
  for (size_t i = 1; i <= phase_of_step.size(); ++i) {
    if (i < phase_of_step.size() && phase_of_step[i] == phase_of_step[begin]) continue;
    runs.push_back(absl::StrCat(begin + 1, i - begin > 1 ? absl::StrCat("-", i) : "",
                                " ", phase_of_step[begin]));
    begin = i;
  }
  return absl::StrJoin(runs, ", ");
}

}  // namespace

absl::Status ValidateFaults(const std::vector<Fault>& faults,
                            const FaultBounds& bounds) {
  const bool planned = !bounds.phase_of_step.empty();
  for (const Fault& fault : faults) {
    const std::string prefix = absl::StrCat("--fault=", FaultToString(fault), ": ");
    if (fault.rank >= bounds.world_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix, "rank ", fault.rank, " is not a rank of the world size ",
          bounds.world_size));
    }
    if (fault.step > bounds.steps) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix, bounds.step_name, " ", fault.step, " is after the last ",
          bounds.step_name, " ", bounds.steps,
          planned ? absl::StrCat(" (", DescribePlan(bounds.phase_of_step), ")")
                  : ""));
    }
    if (planned && fault.step >= 1 && !fault.phase.empty() &&
        bounds.phase_of_step[fault.step - 1] != fault.phase) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix, bounds.step_name, " ", fault.step, " runs ",
          bounds.phase_of_step[fault.step - 1], ", not ", fault.phase, " (",
          DescribePlan(bounds.phase_of_step), ")"));
    }
  }
  return ValidateSlowFaults(faults, bounds.steps, bounds.first_step_timeout,
                            bounds.collective_timeout, bounds.step_name);
}

absl::Status ValidateSlowFaults(const std::vector<Fault>& faults, int64_t steps,
                                absl::Duration first_step_timeout,
                                absl::Duration collective_timeout,
                                absl::string_view step_name) {
  for (const Fault& fault : faults) {
    if (fault.kind != FaultKind::kSlow) continue;
    const std::string prefix = absl::StrCat("--fault=", FaultToString(fault), ": ");
    // It fires on the steps s in [1, steps] with s % every == 0.
    const bool on_first = fault.every == 1 && steps >= 1;
    const bool after_first = fault.every == 1 ? steps >= 2 : fault.every <= steps;
    if (!on_first && !after_first) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix, "every=", fault.every,
          step_name == "step" ? absl::StrCat(" fires on no step of --steps=", steps)
                              : absl::StrCat(" fires on none of the run's ", steps, " ",
                                             step_name, "s"),
          ": it would do nothing"));
    }
    const absl::Duration delay = absl::Milliseconds(fault.ms);
    const char* flag = after_first ? "collective_timeout" : "first_step_timeout";
    const absl::Duration timeout = after_first ? collective_timeout : first_step_timeout;
    if (delay >= timeout) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix, "the delay ", absl::FormatDuration(delay), " is not shorter than --", flag,
          "=", absl::FormatDuration(timeout), ": the other ranks would time out waiting for rank ",
          fault.rank, " (a slow rank is not a hung one: hang: tests a timeout)"));
    }
  }
  return absl::OkStatus();
}

const Fault* FindFault(const std::vector<Fault>& faults, FaultKind kind,
                       int rank, int64_t step, absl::string_view phase) {
  for (const Fault& fault : faults) {
    if (fault.kind != kind || fault.rank != rank) continue;
    if (kind == FaultKind::kSlow) {
      if (step % fault.every == 0) return &fault;
      continue;
    }
    if (fault.step == step && (fault.phase.empty() || fault.phase == phase)) {
      return &fault;
    }
  }
  return nullptr;
}

std::string FaultToString(const Fault& fault) {
  std::string out = absl::StrCat(KindName(fault.kind), ":rank=", fault.rank);
  if (fault.step >= 1) absl::StrAppend(&out, ",step=", fault.step);
  if (!fault.phase.empty()) absl::StrAppend(&out, ",phase=", fault.phase);
  if (fault.kind == FaultKind::kSlow) {
    absl::StrAppend(&out, ",ms=", fault.ms);
    if (fault.every != 1) absl::StrAppend(&out, ",every=", fault.every);
  }
  if (fault.kind == FaultKind::kExit) absl::StrAppend(&out, ",code=", fault.code);
  return out;
}

}  // namespace mtb
