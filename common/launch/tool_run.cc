#include "common/launch/tool_run.h"

#include <sys/wait.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/results/atomic_file.h"

namespace mtb {

std::string TestTempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir == nullptr ? "/tmp" : dir;
}

ToolRun RunToolOutsideRanks(const std::string& binary, const std::string& name,
                            const std::string& args) {
  const std::string out = absl::StrCat(TestTempDir(), "/", name, ".stdout");
  const std::string err = absl::StrCat(TestTempDir(), "/", name, ".stderr");
  const std::string command = absl::StrCat(
      "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT ",
      binary, " ", args, " >", out, " 2>", err);
  const int status = std::system(command.c_str());
  ToolRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = ReadFileToString(out).value_or("");
  run.err = ReadFileToString(err).value_or("");
  return run;
}

}  // namespace mtb
