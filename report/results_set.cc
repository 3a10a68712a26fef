#include "report/results_set.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "report/report.pb.h"

namespace mtb::report {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

absl::StatusOr<std::vector<std::string>> JsonFilesIn(const std::string& dir) {
  DIR* listing = ::opendir(dir.c_str());
  if (listing == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": cannot list"));
  }
  std::vector<std::string> paths;
  while (dirent* entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    if (absl::EndsWith(name, ".json")) paths.push_back(absl::StrCat(dir, "/", name));
  }
  ::closedir(listing);
  std::sort(paths.begin(), paths.end());
  return paths;
}

template <typename Result>
absl::Status ParseAs(const std::string& path, const std::string& json,
                     std::vector<Result>* into) {
  Result result;
  RETURN_IF_ERROR(Annotate(FromJson(json, &result), path));
  into->push_back(std::move(result));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<ResultFile>> ReadResultFiles(
    const std::vector<std::string>& arguments,
    std::vector<std::string>* skipped) {
  std::vector<std::string> paths;
  std::vector<bool> found_in_directory;
  for (const std::string& argument : arguments) {
    if (IsDirectory(argument)) {
      ASSIGN_OR_RETURN(std::vector<std::string> inside, JsonFilesIn(argument));
      paths.insert(paths.end(), inside.begin(), inside.end());
      found_in_directory.insert(found_in_directory.end(), inside.size(), true);
    } else {
      paths.push_back(argument);
      found_in_directory.push_back(false);
    }
  }
  if (paths.empty()) {
    return absl::InvalidArgumentError(
        "no result files: give result JSON files or directories holding them");
  }
  std::vector<ResultFile> files;
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string& path = paths[i];
    absl::StatusOr<std::string> json = ReadFileToString(path);
    if (!json.ok()) return absl::DataLossError(json.status().message());
    ResultEnvelope envelope;
    if (absl::Status status = FromJsonIgnoringUnknownFields(*json, &envelope);
        !status.ok()) {
      return absl::DataLossError(
          absl::StrCat(path, ": not a result file (", status.message(), ")"));
    }
    ResultFile file;
    file.path = path;
    file.context = envelope.has_run_context() ? envelope.run_context()
                                              : envelope.context();
    file.tool = file.context.tool();
    if (file.tool.empty() && found_in_directory[i]) {
      if (skipped != nullptr) skipped->push_back(path);
      continue;
    }
    if (file.tool.empty()) {
      return absl::DataLossError(absl::StrCat(
          path, ": not a MiniTrainBench result (no run_context.tool)"));
    }
    absl::Status parsed = absl::OkStatus();
    if (file.tool == "trainer") {
      parsed = ParseAs(path, *json, &file.trainer);
    } else if (file.tool == "comm_bench" || file.tool == "comm_bench_nccl") {
      parsed = ParseAs(path, *json, &file.comm_bench);
    } else if (file.tool == "tp_check") {
      parsed = ParseAs(path, *json, &file.tp_check);
    } else if (file.tool == "moe_comm") {
      parsed = ParseAs(path, *json, &file.moe_comm);
    }
    if (!parsed.ok()) return absl::DataLossError(parsed.message());
    files.push_back(std::move(file));
  }
  if (files.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no result files: ", absl::StrJoin(arguments, ", "),
        " hold(s) only JSON files that are not results"));
  }
  return files;
}

std::vector<std::string> ProvenanceDifferences(
    const std::vector<ResultFile>& files) {
  using Field = std::pair<const char*, std::function<std::string(const RunContext&)>>;
  const std::vector<Field> fields = {
      {"git_commit", [](const RunContext& c) { return c.git_commit(); }},
      {"git_dirty", [](const RunContext& c) { return std::string(c.git_dirty() ? "dirty" : "clean"); }},
      {"build_mode", [](const RunContext& c) { return c.build_mode(); }},
      {"hostname", [](const RunContext& c) { return c.hostname(); }},
      {"libtorch_version", [](const RunContext& c) { return c.libtorch_version(); }},
      {"gloo_version", [](const RunContext& c) { return c.gloo_version(); }},
      {"nccl_version", [](const RunContext& c) { return c.nccl_version(); }},
      {"protobuf_version", [](const RunContext& c) { return c.protobuf_version(); }},
      {"blas_library", [](const RunContext& c) { return c.blas_library(); }},
  };
  std::vector<std::string> differences;
  for (const auto& [name, value_of] : fields) {
    std::map<std::string, std::vector<std::string>> by_value;
    for (const ResultFile& file : files) {
      // A field a tool does not record (comm_bench links no LibTorch, a CPU
      // build no NCCL) is not a difference of provenance but of kind.
      const std::string value = value_of(file.context);
      if (!value.empty()) by_value[value].push_back(file.path);
    }
    if (by_value.size() <= 1) continue;
    std::vector<std::string> parts;
    for (const auto& [value, paths] : by_value) {
      parts.push_back(absl::StrCat(absl::StrJoin(paths, ", "), ": ", value));
    }
    differences.push_back(absl::StrCat(name, " differs: ", absl::StrJoin(parts, "; ")));
  }
  return differences;
}

}  // namespace mtb::report
