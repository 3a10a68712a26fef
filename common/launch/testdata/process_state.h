// Test helper shared by the launcher's tests and their rank binary.
#ifndef MTB_COMMON_LAUNCH_TESTDATA_PROCESS_STATE_H_
#define MTB_COMMON_LAUNCH_TESTDATA_PROCESS_STATE_H_

#include <sys/types.h>

namespace mtb {

// True when `pid` no longer runs: it has no /proc entry, or it is a zombie
// nobody has reaped yet (orphans of a killed launcher may stay zombies where
// PID 1 does not reap).
bool ProcessIsGone(pid_t pid);

}  // namespace mtb

#endif  // MTB_COMMON_LAUNCH_TESTDATA_PROCESS_STATE_H_
