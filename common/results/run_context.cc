#include "common/results/run_context.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/stubs/common.h"

#ifndef MTB_BUILD_MODE
#define MTB_BUILD_MODE "unknown"
#endif

namespace mtb {
namespace {

// Runs a shell command, stores its standard output (trailing whitespace
// trimmed) in `output` and returns whether it ran and exited 0.
bool RunCommand(const std::string& command, std::string* output) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return false;
  std::array<char, 4096> buffer;
  output->clear();
  size_t bytes;
  while ((bytes = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    output->append(buffer.data(), bytes);
  }
  int status = pclose(pipe);
  while (!output->empty() &&
         (output->back() == '\n' || output->back() == ' ')) {
    output->pop_back();
  }
  return status == 0;
}

std::string ShellQuote(absl::string_view text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

std::string CpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (absl::StartsWith(line, "model name")) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
      }
    }
  }
  return "unknown";
}

}  // namespace

std::string NewRunId() {
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  // The random tail keeps two runs of one process in one second apart
  // (tests run several).
  std::random_device random;
  return absl::StrCat(host, "-", ::getpid(), "-",
                      absl::FormatTime("%Y%m%dT%H%M%S", absl::Now(),
                                       absl::UTCTimeZone()),
                      "-", absl::Hex(random(), absl::kZeroPad8));
}

std::string NowUtcRfc3339() {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(),
                          absl::UTCTimeZone());
}

std::string CheckoutDirectory() {
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  if (workspace != nullptr && workspace[0] != '\0') return workspace;
  std::array<char, 4096> cwd;
  if (getcwd(cwd.data(), cwd.size()) != nullptr) return cwd.data();
  return ".";
}

RunContext NewRunContext(absl::string_view tool, int argc, char** argv) {
  RunContext context;
  context.set_tool(std::string(tool));
  for (int i = 0; i < argc; ++i) context.add_argv(argv[i]);

  const std::string git =
      absl::StrCat("git -C ", ShellQuote(CheckoutDirectory()));
  std::string commit;
  if (RunCommand(git + " rev-parse HEAD 2>/dev/null", &commit) &&
      !commit.empty()) {
    context.set_git_commit(commit);
    std::string changes;
    RunCommand(git + " status --porcelain --untracked-files=no 2>/dev/null",
               &changes);
    context.set_git_dirty(!changes.empty());
  } else {
    context.set_git_commit("unknown");
  }

  context.set_build_mode(MTB_BUILD_MODE);
#ifdef MTB_CUDA_BUILD
  context.set_cuda_build(true);
#endif
  context.set_compiler(absl::StrCat("gcc ", __VERSION__));
  context.set_protobuf_version(
      google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION));
  context.set_cpu_model(CpuModel());
  context.set_cpu_cores(static_cast<int>(std::thread::hardware_concurrency()));

  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) == 0) {
    context.set_hostname(host.data());
  }
  struct utsname uts;
  if (uname(&uts) == 0) {
    context.set_os(absl::StrCat(uts.sysname, " ", uts.release, " ",
                                uts.machine));
  }
  const char* omp = std::getenv("OMP_NUM_THREADS");
  context.set_omp_num_threads_env(omp != nullptr ? omp : "");
  const char* openblas = std::getenv("OPENBLAS_NUM_THREADS");
  context.set_openblas_num_threads_env(openblas != nullptr ? openblas : "");
  context.set_world_size(1);
  context.set_backend("none");
  context.set_start_time_utc(NowUtcRfc3339());
  return context;
}

void FinishRunContext(RunContext* context) {
  context->set_end_time_utc(NowUtcRfc3339());
}

}  // namespace mtb
