// Test helper for smoke tests of a multi-rank binary as users run it: starts
// the binary (a path relative to the test's runfiles, "tp_check/tp_check")
// outside any rank environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
// MASTER_PORT unset, so it launches its own ranks), waits, and returns its
// exit code and what it printed. testonly.
#ifndef MTB_COMMON_LAUNCH_TOOL_RUN_H_
#define MTB_COMMON_LAUNCH_TOOL_RUN_H_

#include <string>

namespace mtb {

struct ToolRun {
  int exit_code = -1;  // -1 when it did not exit normally
  std::string out;
  std::string err;
};

// $TEST_TMPDIR.
std::string TestTempDir();

// Runs `binary args`, capturing stdout and stderr in
// $TEST_TMPDIR/<name>.stdout and .stderr.
ToolRun RunToolOutsideRanks(const std::string& binary, const std::string& name,
                            const std::string& args);

}  // namespace mtb

#endif  // MTB_COMMON_LAUNCH_TOOL_RUN_H_
