#include "common/base/flags.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <string>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace mtb {
namespace {

absl::Mutex registry_mutex;

std::map<std::string, std::string>& Aliases() {
  static auto* aliases = new std::map<std::string, std::string>();
  return *aliases;
}

std::set<std::string>& SetFlags() {
  static auto* names = new std::set<std::string>();
  return *names;
}

std::string Canonical(const std::string& name) {
  auto alias = Aliases().find(name);
  return alias == Aliases().end() ? name : alias->second;
}

std::string ProgramName(const char* argv0) {
  std::string name = argv0 != nullptr ? argv0 : "program";
  size_t slash = name.rfind('/');
  return slash == std::string::npos ? name : name.substr(slash + 1);
}

bool IsOurFlag(const absl::CommandLineFlag& flag) {
  const std::string file = flag.Filename();
  return !absl::StrContains(file, "absl/") && !flag.IsRetired();
}

void PrintUsage(const char* argv0, absl::string_view usage) {
  std::cout << ProgramName(argv0) << ": " << usage << "\n\nFlags:\n";
  std::map<std::string, const absl::CommandLineFlag*> sorted;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (IsOurFlag(*flag)) sorted[std::string(name)] = flag;
  }
  std::map<std::string, std::vector<std::string>> aliases_of;
  for (const auto& [alias, canonical] : Aliases()) {
    aliases_of[canonical].push_back(alias);
  }
  for (const auto& [name, flag] : sorted) {
    std::cout << "  --" << name;
    for (const std::string& alias : aliases_of[name]) {
      std::cout << " (alias --" << alias << ")";
    }
    std::cout << "  default: \"" << flag->DefaultValue() << "\"\n      "
              << flag->Help() << "\n";
  }
}

}  // namespace

void RegisterFlagAlias(absl::string_view alias, absl::string_view canonical) {
  absl::MutexLock lock(&registry_mutex);
  Aliases()[std::string(alias)] = std::string(canonical);
}

absl::StatusOr<std::vector<std::string>> ParseCommandLine(int argc,
                                                          char** argv) {
  absl::MutexLock lock(&registry_mutex);
  std::vector<std::string> positional;
  if (argc > 0) positional.push_back(argv[0]);
  for (int index = 1; index < argc; ++index) {
    const std::string arg = argv[index];
    if (arg == "--") {
      for (++index; index < argc; ++index) positional.push_back(argv[index]);
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    const std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
    const size_t equals = body.find('=');
    std::string name = Canonical(body.substr(0, equals));
    const bool has_value = equals != std::string::npos;
    std::string value = has_value ? body.substr(equals + 1) : "";

    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && !has_value && absl::StartsWith(name, "no")) {
      const std::string negated = Canonical(name.substr(2));
      absl::CommandLineFlag* bool_flag = absl::FindCommandLineFlag(negated);
      if (bool_flag != nullptr && bool_flag->IsOfType<bool>()) {
        flag = bool_flag;
        name = negated;
        value = "false";
      }
    }
    if (flag == nullptr || flag->IsRetired()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag ", arg.substr(0, arg.find('=')),
                       " (see --help)"));
    }
    if (!has_value && value.empty()) {
      if (flag->IsOfType<bool>()) {
        value = "true";
      } else if (index + 1 < argc) {
        value = argv[++index];
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", name, " needs a value"));
      }
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid value for --", name, ": '", value, "' (", error, ")"));
    }
    SetFlags().insert(name);
  }
  return positional;
}

absl::Status RefuseOperands(const std::vector<std::string>& positional) {
  if (positional.size() <= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "unexpected argument '", positional[1], "'",
      positional.size() > 2 ? absl::StrCat(" (and ", positional.size() - 2, " more)") : "",
      ": this tool takes flags only (--name=value; see --help)"));
}

std::vector<std::string> ParseCommandLineOrExit(int argc, char** argv,
                                                absl::string_view usage,
                                                Operands operands) {
  for (int index = 1; index < argc; ++index) {
    const std::string arg = argv[index];
    if (arg == "--") break;
    if (arg == "--help" || arg == "-help" || arg == "-h" ||
        arg == "--helpfull") {
      PrintUsage(argv[0], usage);
      std::exit(kExitOk);
    }
  }
  absl::StatusOr<std::vector<std::string>> positional =
      ParseCommandLine(argc, argv);
  if (positional.ok() && operands == Operands::kNone) {
    if (absl::Status refused = RefuseOperands(*positional); !refused.ok()) {
      positional = refused;
    }
  }
  if (!positional.ok()) {
    std::cerr << ProgramName(argc > 0 ? argv[0] : nullptr) << ": "
              << positional.status().message() << "\n";
    std::exit(kExitUsage);
  }
  return *std::move(positional);
}

bool FlagWasSet(absl::string_view name) {
  absl::MutexLock lock(&registry_mutex);
  return SetFlags().count(Canonical(std::string(name))) > 0;
}

namespace {
constexpr char kDeterministicPayload[] = "mtb/deterministic_failure";
}  // namespace

absl::Status MarkDeterministic(absl::Status status) {
  if (!status.ok()) status.SetPayload(kDeterministicPayload, absl::Cord("1"));
  return status;
}

bool IsDeterministic(const absl::Status& status) {
  return status.GetPayload(kDeterministicPayload).has_value();
}

int ExitCodeFor(const absl::Status& status) {
  if (status.ok()) return kExitOk;
  if (IsDeterministic(status)) return kExitDeterministicFailure;
  if (status.code() == absl::StatusCode::kInvalidArgument) return kExitUsage;
  return kExitFailure;
}

int ReportAndExitCode(absl::string_view program, const absl::Status& status) {
  if (!status.ok()) std::cerr << program << ": " << status.message() << "\n";
  return ExitCodeFor(status);
}

}  // namespace mtb
