// doctor: what a rank of `bazel run //doctor` does (main.cc launches the
// ranks). Each node's local rank 0 checks its host (build, host, network);
// with more than one rank, every rank joins the group for the rendezvous
// checks; rank 0 writes the result. docs/doctor.md lists every check.
#ifndef MTB_DOCTOR_DOCTOR_H_
#define MTB_DOCTOR_DOCTOR_H_

#include <string>
#include <vector>

#include "common/collective/transport.h"
#include "common/launch/rank_env.h"
#include "common/launch/timeouts.h"
#include "common/results/results.pb.h"
#include "doctor/doctor.pb.h"

namespace mtb::doctor {

inline constexpr int kDoctorSchemaVersion = 1;

struct DoctorOptions {
  // Where checkpoints will go: its write+fsync bandwidth and free space.
  std::string checkpoint_dir;
  int disk_check_mb = 64;
  // 0: any.
  int expected_world_size = 0;
  int nnodes = 1;
  // Resolved result path; empty: results/doctor_<UTC time>.json.
  std::string out;
  TimeoutOptions timeouts;
  // --transport: what the group's collectives run on.
  collective::Transport transport = collective::Transport::kAuto;
  int argc = 0;
  char** argv = nullptr;
};

// The build, host and network checks of this host (probes the machine: a
// matmul, a disk write, name resolution; ~2 s).
std::vector<DoctorCheck> HostChecks(const DoctorOptions& options,
                                    const RunContext& context);

// One rank: returns its exit code (0: no check failed, 1: one did).
int RunDoctorRank(const DoctorOptions& options, const RankEnv& rank_env);

}  // namespace mtb::doctor

#endif  // MTB_DOCTOR_DOCTOR_H_
