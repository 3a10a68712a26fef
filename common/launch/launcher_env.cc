// Vocabulary: a *family* is one launcher's set of variables (torchrun, Open
// MPI, Slurm, PMI); it is *present* when its rank or size variable is set
// (Slurm: also SLURM_STEP_ID); the *first* present family in that order
// describes this rank and the others are checked against it.
#include "common/launch/launcher_env.h"

#include <cstdint>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/status.h"

namespace mtb {
namespace {

struct Family {
  const char* name;
  const char* rank;
  const char* size;
  const char* local_rank;  // nullptr: the family has none
  const char* local_size;
};

constexpr Family kTorchrun = {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};
constexpr Family kOpenMpi = {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                             "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"};
constexpr Family kPmi = {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"};
// Slurm's local size is not one variable: SLURM_STEP_TASKS_PER_NODE below.
constexpr Family kSlurm = {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr};
// Precedence: torchrun's first (they are ours and the innermost launcher's),
// Slurm before PMI because srun --mpi=pmi2 sets both and Slurm's say more.
constexpr Family kFamilies[] = {kTorchrun, kOpenMpi, kSlurm, kPmi};

bool Is(const Family& family, const Family& kind) {
  return absl::string_view(family.name) == kind.name;
}

// What one family says about this process.
struct Description {
  const Family* family = nullptr;
  int rank = 0;
  int world_size = 1;
  std::optional<int> local_rank;
  std::optional<int> local_world_size;
  std::optional<int> group_rank;
};

std::optional<std::string> Lookup(const EnvMap& env, const std::string& name) {
  auto found = env.find(name);
  if (found == env.end()) return std::nullopt;
  return found->second;
}

bool Present(const EnvMap& env, const Family& family) {
  if (Is(family, kSlurm) && env.count("SLURM_STEP_ID") == 0) return false;
  return env.count(family.rank) > 0 || env.count(family.size) > 0;
}

absl::StatusOr<int> ParseCount(const std::string& name, const std::string& value, int minimum) {
  int parsed = 0;
  if (!absl::SimpleAtoi(value, &parsed)) {
    return absl::InvalidArgumentError(absl::StrCat(name, "='", value, "' is not an integer"));
  }
  if (parsed < minimum) {
    return absl::InvalidArgumentError(absl::StrCat(name, "=", parsed, " must be >= ", minimum));
  }
  return parsed;
}

absl::StatusOr<std::optional<int>> ParseOptional(const EnvMap& env, const char* name, int minimum) {
  if (name == nullptr) return std::optional<int>();
  std::optional<std::string> value = Lookup(env, name);
  if (!value.has_value()) return std::optional<int>();
  ASSIGN_OR_RETURN(const int parsed, ParseCount(name, *value, minimum));
  return std::optional<int>(parsed);
}

// This node's task count from Slurm's compressed per-node list.
absl::StatusOr<std::optional<int>> SlurmLocalWorldSize(const EnvMap& env,
                                                       std::optional<int> node_id) {
  for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    std::optional<std::string> value = Lookup(env, name);
    if (!value.has_value()) continue;
    absl::StatusOr<std::vector<int>> counts = ExpandTasksPerNode(*value);
    if (!counts.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": ", counts.status().message()));
    }
    const int node = node_id.value_or(0);
    if (node >= static_cast<int>(counts->size())) {
      return absl::InvalidArgumentError(absl::StrCat("SLURM_NODEID=", node, " but ", name, "='",
                                                     *value, "' lists ", counts->size(),
                                                     " node(s)"));
    }
    return std::optional<int>((*counts)[node]);
  }
  return std::optional<int>();
}

absl::StatusOr<Description> Describe(const EnvMap& env, const Family& family) {
  std::optional<std::string> rank = Lookup(env, family.rank);
  std::optional<std::string> size = Lookup(env, family.size);
  if (!rank.has_value() || !size.has_value()) {
    const char* set = rank.has_value() ? family.rank : family.size;
    const char* unset = rank.has_value() ? family.size : family.rank;
    return absl::InvalidArgumentError(
        absl::StrCat(set, "=", env.at(set), " is set but ", unset, " is not"));
  }
  Description description;
  description.family = &family;
  ASSIGN_OR_RETURN(description.world_size, ParseCount(family.size, *size, 1));
  ASSIGN_OR_RETURN(description.rank, ParseCount(family.rank, *rank, 0));
  if (description.rank >= description.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(family.rank, "=", description.rank,
                                                   " must be < ", family.size, "=",
                                                   description.world_size));
  }
  ASSIGN_OR_RETURN(description.local_rank, ParseOptional(env, family.local_rank, 0));
  if (Is(family, kSlurm)) {
    ASSIGN_OR_RETURN(description.group_rank, ParseOptional(env, "SLURM_NODEID", 0));
    ASSIGN_OR_RETURN(description.local_world_size,
                     SlurmLocalWorldSize(env, description.group_rank));
  } else {
    ASSIGN_OR_RETURN(description.local_world_size, ParseOptional(env, family.local_size, 1));
    // Open MPI maps by slot by default: a host's ranks are consecutive.
    if (Is(family, kOpenMpi) && description.local_world_size.has_value()) {
      description.group_rank = description.rank / *description.local_world_size;
    }
  }
  return description;
}

// The job's id, for the derived port and the run id; empty when unknown.
std::string JobId(const EnvMap& env, const Family& family) {
  auto slurm_step = [&env]() -> std::string {
    std::optional<std::string> job = Lookup(env, "SLURM_JOB_ID");
    if (!job.has_value()) return "";
    return absl::StrCat("slurm-", *job, ".", Lookup(env, "SLURM_STEP_ID").value_or("0"));
  };
  if (Is(family, kSlurm)) return slurm_step();
  if (Is(family, kOpenMpi)) {
    if (auto id = Lookup(env, "OMPI_MCA_ess_base_jobid"); id.has_value() && !id->empty()) {
      return absl::StrCat("ompi-", *id);
    }
  }
  if (auto ns = Lookup(env, "PMIX_NAMESPACE"); ns.has_value() && !ns->empty()) {
    return absl::StrCat("pmix-", *ns);
  }
  // srun --mpi=pmi2 sets PMI_* inside a Slurm step.
  return slurm_step();
}

absl::StatusOr<std::string> MasterAddr(const EnvMap& env, const Description& rank) {
  if (Is(*rank.family, kSlurm)) {
    for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
      std::optional<std::string> nodelist = Lookup(env, name);
      if (!nodelist.has_value()) continue;
      absl::StatusOr<std::vector<std::string>> hosts = ExpandNodelist(*nodelist);
      if (!hosts.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(name, ": ", hosts.status().message()));
      }
      return hosts->front();
    }
    return absl::InvalidArgumentError(
        "MASTER_ADDR is not set and neither is SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST "
        "(the first host there runs task 0): set MASTER_ADDR");
  }
  if (rank.local_world_size.has_value() && *rank.local_world_size == rank.world_size) {
    return std::string("127.0.0.1");  // every rank on this host
  }
  const std::string locality =
      rank.local_world_size.has_value()
          ? absl::StrCat(rank.family->local_size, "=", *rank.local_world_size, " < ",
                         rank.family->size, "=", rank.world_size,
                         ": the ranks span more than one host")
          : absl::StrCat(rank.family->local_size, " is not set: the ranks may span hosts");
  return absl::InvalidArgumentError(
      absl::StrCat("MASTER_ADDR is not set (", locality,
                   "): give rank 0's host, e.g. mpirun -x MASTER_ADDR=node01, or --master_addr"));
}

}  // namespace

std::string DetectedLauncher(const EnvMap& env) {
  for (const Family& family : kFamilies) {
    if (Present(env, family)) return family.name;
  }
  return "none";
}

bool HasLauncherRankEnv(const EnvMap& env) { return DetectedLauncher(env) != "none"; }

absl::StatusOr<EnvMap> WithLauncherVariables(const EnvMap& env) {
  std::vector<const Family*> present;
  for (const Family& family : kFamilies) {
    if (Present(env, family)) present.push_back(&family);
  }
  if (present.empty()) return env;
  absl::StatusOr<Description> first = Describe(env, *present.front());
  // torchrun's own variables: ParseRankEnv words their errors.
  if (!first.ok() && Is(*present.front(), kTorchrun)) return env;
  RETURN_IF_ERROR(first.status());
  for (size_t i = 1; i < present.size(); ++i) {
    absl::StatusOr<Description> other = Describe(env, *present[i]);
    // An outer launch's variables are not ours to validate.
    if (!other.ok() || other->world_size != first->world_size) continue;
    if (other->rank != first->rank) {
      return absl::InvalidArgumentError(
          absl::StrCat(first->family->rank, "=", first->rank, " and ", other->family->rank, "=",
                       other->rank, " disagree while ", first->family->size, "=", first->world_size,
                       " and ", other->family->size, "=", other->world_size,
                       " say they are the same launch: unset the stale ones (", first->family->name,
                       "'s are read first; docs/launch.md)"));
    }
  }
  if (Is(*first->family, kTorchrun)) return env;

  EnvMap resolved = env;
  resolved["RANK"] = absl::StrCat(first->rank);
  resolved["WORLD_SIZE"] = absl::StrCat(first->world_size);
  if (first->local_rank.has_value()) resolved["LOCAL_RANK"] = absl::StrCat(*first->local_rank);
  if (first->local_world_size.has_value()) {
    resolved["LOCAL_WORLD_SIZE"] = absl::StrCat(*first->local_world_size);
  }
  if (first->group_rank.has_value()) resolved["GROUP_RANK"] = absl::StrCat(*first->group_rank);
  if (env.count("MASTER_ADDR") == 0) {
    ASSIGN_OR_RETURN(resolved["MASTER_ADDR"], MasterAddr(env, *first));
  }
  const std::string job_id = JobId(env, *first->family);
  if (env.count("MASTER_PORT") == 0) {
    if (job_id.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "MASTER_PORT is not set and ", first->family->name,
          " gave no job id to derive it from (SLURM_JOB_ID, OMPI_MCA_ess_base_jobid or "
          "PMIX_NAMESPACE): set MASTER_PORT or --master_port"));
    }
    resolved["MASTER_PORT"] = absl::StrCat(PortFromJobId(job_id));
  }
  if (env.count("TORCHELASTIC_RUN_ID") == 0 && !job_id.empty()) {
    resolved["TORCHELASTIC_RUN_ID"] = job_id;
  }
  return resolved;
}

absl::StatusOr<std::vector<std::string>> ExpandNodelist(absl::string_view nodelist) {
  auto bad = [&nodelist](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("nodelist '", nodelist, "' does not parse: ", why));
  };
  // Split at commas outside brackets.
  std::vector<std::string> names;
  std::string current;
  int depth = 0;
  for (char c : nodelist) {
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) return bad("']' without '['");
    if (c == ',' && depth == 0) {
      names.push_back(current);
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  if (depth != 0) return bad("'[' without ']'");
  names.push_back(current);

  std::vector<std::string> hosts;
  for (const std::string& name : names) {
    if (name.empty()) return bad("an empty host name");
    // Expand the first bracket group, then the rest of the name recursively.
    const size_t open = name.find('[');
    if (open == std::string::npos) {
      hosts.push_back(name);
      continue;
    }
    const size_t close = name.find(']', open);
    const std::string prefix = name.substr(0, open);
    const std::string ranges = name.substr(open + 1, close - open - 1);
    std::vector<std::string> suffixes = {""};
    if (close + 1 < name.size()) {
      ASSIGN_OR_RETURN(suffixes, ExpandNodelist(name.substr(close + 1)));
    }
    if (ranges.empty()) return bad("an empty '[]'");
    for (absl::string_view range : absl::StrSplit(ranges, ',')) {
      std::vector<std::string> ends = absl::StrSplit(range, '-');
      uint64_t low = 0, high = 0;
      if (ends.size() > 2 || ends[0].empty() || !absl::SimpleAtoi(ends[0], &low) ||
          (ends.size() == 2 && !absl::SimpleAtoi(ends[1], &high))) {
        return bad(absl::StrCat("'", range, "' is not a number or a range a-b"));
      }
      if (ends.size() == 1) high = low;
      if (high < low) return bad(absl::StrCat("'", range, "' runs backwards"));
      if (high - low >= 100000) return bad(absl::StrCat("'", range, "' is too long"));
      const size_t width = ends[0].size();  // "01-03": keep the padding
      for (uint64_t number = low; number <= high; ++number) {
        std::string digits = absl::StrCat(number);
        if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
        for (const std::string& suffix : suffixes) {
          hosts.push_back(absl::StrCat(prefix, digits, suffix));
        }
      }
    }
  }
  return hosts;
}

absl::StatusOr<std::vector<int>> ExpandTasksPerNode(absl::string_view tasks_per_node) {
  std::vector<int> counts;
  for (absl::string_view item : absl::StrSplit(tasks_per_node, ',')) {
    int count = 0;
    int repeat = 1;
    const size_t open = item.find("(x");
    absl::string_view number = item.substr(0, open);
    bool ok = absl::SimpleAtoi(number, &count) && count >= 0;
    if (ok && open != absl::string_view::npos) {
      ok = absl::EndsWith(item, ")") &&
           absl::SimpleAtoi(item.substr(open + 2, item.size() - open - 3), &repeat) && repeat >= 1;
    }
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", tasks_per_node, "' is not a task count list like 2(x3),1 ('", item, "')"));
    }
    counts.insert(counts.end(), repeat, count);
  }
  return counts;
}

int PortFromJobId(absl::string_view job_id) {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a, 64 bits
  for (unsigned char c : job_id) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return kDerivedPortBase + static_cast<int>(hash % kDerivedPortRange);
}

}  // namespace mtb
