// doctor's checks of one host (build, host, network): each returns a
// DoctorCheck with its verdict and, when not "pass", the fix. The inputs a
// test needs to vary (the BLAS description, resolved addresses) are
// parameters; the functions that probe the machine say so.
#ifndef MTB_DOCTOR_CHECKS_H_
#define MTB_DOCTOR_CHECKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/base/host_memory.h"
#include "common/launch/launcher_env.h"
#include "common/launch/rank_env.h"
#include "common/results/results.pb.h"
#include "doctor/check_table.h"
#include "doctor/doctor.pb.h"

namespace mtb::doctor {

// LibTorch, Gloo, protobuf and Abseil versions from the run context.
DoctorCheck CheckLibraries(const RunContext& context);

// `blas` is DescribeBlasLibrary()'s text. Debian's reference BLAS makes fp32
// matmul ~20x slower than OpenBLAS: a loud warning with the fix.
DoctorCheck CheckBlas(const std::string& blas);

// LibTorch's intra-op threads, OMP_NUM_THREADS and OPENBLAS_CORETYPE (the
// kernel OpenBLAS picks; unset means auto-detect), against the cores.
DoctorCheck CheckThreads(int intra_op_threads, int cores,
                         const std::string& omp_num_threads,
                         const std::string& openblas_coretype);

DoctorCheck CheckMemory(const absl::StatusOr<HostMemory>& memory);

// Every GEMM library of `precision` ("fp32": oneDNN and BLAS; "bf16":
// LibTorch's oneDNN brgemm) on a 512^3 product on this process's threads
// (probes the machine, ~0.5 s): first "matmul <precision>", the fastest (the
// trainer's MFU peak takes the fastest too), then one "gemm <library>
// <precision>" row per library.
std::vector<DoctorCheck> CheckGemms(const std::string& precision);

// `bf16` with a warning when its GFLOP/s is below a quarter of `fp32`'s: a
// CPU without bf16 matmul units, where --precision=bf16 trains slower.
DoctorCheck CompareBf16ToFp32(DoctorCheck bf16, const DoctorCheck& fp32);

// The probe's size: `megabytes` MiB, but at most kMaxDiskProbeMib and 10%
// of `free_bytes`, so the probe never fills a disk; 0 when even 1 MiB is
// more than 10% of what is free.
inline constexpr int kMaxDiskProbeMib = 64;
int DiskProbeMib(int megabytes, int64_t free_bytes);

// Reads the free space first (statvfs), then writes DiskProbeMib MiB to a
// temporary file in `directory` (created if missing), fsyncs it and removes
// it: write+fsync MB/s and the free space. Fails when the directory cannot
// be written, or when its free space is below 4x `megabytes` (checkpoints
// will not fit; no probe is written when it is below 10 MiB).
DoctorCheck CheckDisk(const std::string& directory, int megabytes);

// The addresses `hostname` resolves to (getaddrinfo, IPv4 and IPv6).
absl::StatusOr<std::vector<std::string>> ResolveHostname(
    const std::string& hostname);

// Gloo binds the address the hostname resolves to: a loopback-only answer
// works on one host (a warning) and breaks multi-host runs (a failure when
// `nnodes` > 1).
DoctorCheck CheckHostname(const std::string& hostname,
                          const absl::StatusOr<std::vector<std::string>>& addresses,
                          int nnodes);

// GLOO_SOCKET_IFNAME (`ifname`, "" = unset): the interface must exist; unset,
// Gloo uses the hostname's address.
DoctorCheck CheckGlooInterface(const std::string& ifname);

// The kernel gives this process a free TCP port on 127.0.0.1.
DoctorCheck CheckFreePort();

// A TCP connection to address:port completes within `timeout` (a
// non-blocking connect and poll); the failure names the address.
DoctorCheck CheckReachable(const std::string& name, const std::string& address,
                           int port, absl::Duration timeout);

// Which launcher's variables made this process a rank (DetectedLauncher on
// `env`; common/launch/launcher_env.h) and the rank, world size and store
// endpoint they gave (`rank_env`, parsed from the same environment).
DoctorCheck CheckLauncher(const EnvMap& env, const RankEnv& rank_env);

}  // namespace mtb::doctor

#endif  // MTB_DOCTOR_CHECKS_H_
