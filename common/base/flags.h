// Command-line parsing for every binary, on top of Abseil flags.
//
// absl::ParseCommandLine exits with status 1 on a bad flag; our rule is exit 2
// for usage errors with one line naming the flag (docs/errors.md), so the loop
// over argv lives here and uses Abseil only to find and set flags.
#ifndef MTB_COMMON_BASE_FLAGS_H_
#define MTB_COMMON_BASE_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mtb {

// Exit codes shared by every tool (documented in docs/errors.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the run failed or a check failed
inline constexpr int kExitUsage = 2;    // bad flags or input: nothing ran
// A failure that would only happen again if the run were repeated (a
// non-finite loss, a configuration the run cannot use): launchers never
// restart it (common/launch, --max_restarts).
inline constexpr int kExitDeterministicFailure = 3;
// Stopped on a preemption notice (SIGTERM) after saving its state: the work
// is resumable (the trainer: `--resume=latest`), so launchers neither
// restart it nor call it a failure (common/launch, docs/faults.md).
inline constexpr int kExitPreempted = 4;

// Makes --alias behave exactly as --canonical (e.g. nproc_per_node -> nproc).
// Call before parsing.
void RegisterFlagAlias(absl::string_view alias, absl::string_view canonical);

// Parses "--name=value", "--name value", "--bool_flag", "--nobool_flag" and
// "--" (the rest is positional). Returns the positional arguments, argv[0]
// first. Errors (unknown flag, missing or unparsable value) are kInvalidArgument
// with one line naming the flag.
absl::StatusOr<std::vector<std::string>> ParseCommandLine(int argc,
                                                          char** argv);

// Whether a binary takes positional arguments (operands) after its flags.
// Most take none: a stray word ("trainer foo.bin", a flag missing its
// dashes) would otherwise be accepted and ignored.
enum class Operands { kNone, kAllowed };

// ParseCommandLine, printing "<program>: <error>" and exiting 2 on error, and
// printing `usage` plus every flag defined outside Abseil and exiting 0 on
// --help. With Operands::kNone, any positional argument is an error (exit 2
// naming it).
std::vector<std::string> ParseCommandLineOrExit(int argc, char** argv,
                                                absl::string_view usage,
                                                Operands operands = Operands::kNone);

// The error for positional arguments a binary that takes none was given
// (`positional` as ParseCommandLine returns it, argv[0] first); OK when
// there are none.
absl::Status RefuseOperands(const std::vector<std::string>& positional);

// True when --name (or an alias of it) was given on the command line.
bool FlagWasSet(absl::string_view name);

// Marks `status` (not OK) as deterministic: ExitCodeFor maps it to
// kExitDeterministicFailure whatever its code. The mark is a payload, so it
// survives copies and Annotate.
absl::Status MarkDeterministic(absl::Status status);
bool IsDeterministic(const absl::Status& status);

// The exit code for a tool's final status: 0 for OK, 2 for kInvalidArgument
// (bad input caught before anything ran), 3 for a status marked
// deterministic, 1 otherwise.
int ExitCodeFor(const absl::Status& status);

// Prints "<program>: <message>" on stderr and exits with ExitCodeFor(status);
// returns 0 for an OK status, for `return ReportAndExitCode(...)` in main.
int ReportAndExitCode(absl::string_view program, const absl::Status& status);

}  // namespace mtb

#endif  // MTB_COMMON_BASE_FLAGS_H_
