#include "doctor/checks.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace mtb::doctor {
namespace {

TEST(Checks, TheReferenceBlasIsALoudWarningWithTheFix) {
  const DoctorCheck reference =
      CheckBlas("reference BLAS (/usr/lib/x86_64-linux-gnu/blas/libblas.so.3)");
  EXPECT_EQ(reference.status(), "warn");
  EXPECT_NE(reference.value().find("~20x slower than OpenBLAS"), std::string::npos);
  EXPECT_NE(reference.fix().find("libopenblas0-openmp"), std::string::npos);
  const DoctorCheck openblas = CheckBlas(
      "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64 "
      "(/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3)");
  EXPECT_EQ(openblas.status(), "pass");
  EXPECT_EQ(openblas.fix(), "");
}

TEST(Checks, ABf16MatmulFarBelowFp32IsAWarning) {
  DoctorCheck fp32 = MakeCheck("host", "matmul fp32", "pass", "40 GFLOP/s");
  fp32.set_measured(40);
  DoctorCheck slow = MakeCheck("host", "matmul bf16", "pass", "2 GFLOP/s");
  slow.set_measured(2);
  const DoctorCheck warned = CompareBf16ToFp32(slow, fp32);
  EXPECT_EQ(warned.status(), "warn");
  EXPECT_EQ(warned.value(), "2 GFLOP/s -- 20x slower than fp32 on this CPU");
  DoctorCheck fast = slow;
  fast.set_measured(30);
  EXPECT_EQ(CompareBf16ToFp32(fast, fp32).status(), "pass");
}

TEST(Checks, ALoopbackHostnameWarnsOnOneHostAndFailsAcrossHosts) {
  const std::vector<std::string> loopback = {"127.0.1.1"};
  EXPECT_EQ(CheckHostname("box", loopback, 1).status(), "warn");
  const DoctorCheck across = CheckHostname("box", loopback, 2);
  EXPECT_EQ(across.status(), "fail");
  EXPECT_NE(across.value().find("box -> 127.0.1.1 (loopback only"), std::string::npos);
  EXPECT_NE(across.fix().find("/etc/hosts"), std::string::npos);
  EXPECT_EQ(CheckHostname("box", std::vector<std::string>{"10.1.2.3", "127.0.1.1"}, 2)
                .status(),
            "pass");
  EXPECT_EQ(CheckHostname("box", absl::NotFoundError("box does not resolve"), 1)
                .status(),
            "fail");
}

TEST(Checks, ThisHostsNameResolves) {
  char name[256] = {0};
  ASSERT_EQ(::gethostname(name, sizeof(name) - 1), 0);
  absl::StatusOr<std::vector<std::string>> addresses = ResolveHostname(name);
  ASSERT_TRUE(addresses.ok()) << addresses.status();
  EXPECT_FALSE(addresses->empty());
}

TEST(Checks, AMissingGlooInterfaceFails) {
  EXPECT_EQ(CheckGlooInterface("").status(), "pass");
  EXPECT_EQ(CheckGlooInterface("lo").status(), "pass");
  const DoctorCheck missing = CheckGlooInterface("no_such_if0");
  EXPECT_EQ(missing.status(), "fail");
  EXPECT_EQ(missing.value(), "no_such_if0: no such interface");
}

TEST(Checks, AReachableAddressPassesAndAClosedPortFailsNamingTheAddress) {
  // A listening socket on a free port, then the same port closed.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int port = ntohs(address.sin_port);
  EXPECT_EQ(CheckReachable("master", "127.0.0.1", port, absl::Seconds(2)).status(),
            "pass");
  ::close(fd);
  const DoctorCheck closed =
      CheckReachable("master", "127.0.0.1", port, absl::Seconds(2));
  EXPECT_EQ(closed.status(), "fail");
  EXPECT_EQ(closed.value().rfind(
                "127.0.0.1:" + std::to_string(port) + " not reachable within 2s: ", 0),
            0u)
      << closed.value();
  EXPECT_NE(closed.fix().find("--master_addr"), std::string::npos);
}

TEST(Checks, AnUnroutableMasterFailsWithinItsTimeout) {
  // TEST-NET-1 (RFC 5737): never routed; either no route at once or no
  // answer until the timeout. Both fail and name the address.
  const DoctorCheck check =
      CheckReachable("master", "192.0.2.1", 29500, absl::Seconds(1));
  EXPECT_EQ(check.status(), "fail");
  EXPECT_EQ(check.value().rfind("192.0.2.1:29500 not reachable within 1s: ", 0), 0u)
      << check.value();
}

TEST(Checks, TheDiskCheckMeasuresAndLeavesNothingBehind) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/ckpt";
  const DoctorCheck check = CheckDisk(dir, 2);
  EXPECT_EQ(check.status(), "pass") << check.value();
  EXPECT_GT(check.measured(), 0);
  EXPECT_EQ(check.unit(), "MB/s");
  EXPECT_EQ(::rmdir(dir.c_str()), 0) << "a probe file was left in " << dir;
  const DoctorCheck unwritable = CheckDisk("/proc/no_such_dir", 1);
  EXPECT_EQ(unwritable.status(), "fail");
  EXPECT_NE(unwritable.fix().find("--checkpoint_dir"), std::string::npos);
}

TEST(Checks, TheDiskProbeIsAtMost64MibAndATenthOfTheFreeSpace) {
  constexpr int64_t kMib = int64_t{1} << 20;
  EXPECT_EQ(DiskProbeMib(64, 100000 * kMib), 64);
  EXPECT_EQ(DiskProbeMib(1000, 100000 * kMib), kMaxDiskProbeMib);
  EXPECT_EQ(DiskProbeMib(64, 200 * kMib), 20);
  EXPECT_EQ(DiskProbeMib(4, 200 * kMib), 4);
  EXPECT_EQ(DiskProbeMib(64, 9 * kMib), 0);  // even 1 MiB is more than 10%
  EXPECT_EQ(DiskProbeMib(64, 0), 0);
}

TEST(Checks, TheVerdictNamesEveryFailedCheckAndIgnoresWarnings) {
  DoctorResult result;
  *result.add_checks() = MakeCheck("build", "BLAS", "warn", "reference");
  EXPECT_EQ(Verdict(result), "pass");
  *result.add_checks() = MakeCheck("network", "master", "fail", "x");
  *result.add_checks() = MakeCheck("host", "disk", "fail", "y");
  EXPECT_EQ(Verdict(result), "fail: master, disk");
  EXPECT_NE(RenderTable(result).find("| network | master | FAIL | x |"),
            std::string::npos)
      << RenderTable(result);
}

TEST(Checks, TheLauncherCheckNamesTheLauncherItsVariablesAndTheStore) {
  const EnvMap srun = {{"SLURM_JOB_ID", "7"},       {"SLURM_STEP_ID", "0"},
                       {"SLURM_PROCID", "1"},       {"SLURM_NTASKS", "2"},
                       {"SLURM_LOCALID", "1"},      {"SLURM_STEP_TASKS_PER_NODE", "2"},
                       {"SLURM_STEP_NODELIST", "vm"}};
  absl::StatusOr<RankEnv> rank_env = ParseRankEnv(srun);
  ASSERT_TRUE(rank_env.ok()) << rank_env.status();
  const DoctorCheck slurm = CheckLauncher(srun, *rank_env);
  EXPECT_EQ(slurm.status(), "pass");
  EXPECT_EQ(slurm.value(), absl::StrCat("slurm (SLURM_PROCID, SLURM_NTASKS: srun): rank 1 of 2, "
                                        "local 1 of 2; store at vm:",
                                        PortFromJobId("slurm-7.0"), " (port from the job id)"));
  const EnvMap by_hand = {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"},
                          {"MASTER_PORT", "29500"}};
  rank_env = ParseRankEnv(by_hand);
  ASSERT_TRUE(rank_env.ok()) << rank_env.status();
  EXPECT_EQ(CheckLauncher(by_hand, *rank_env).value(),
            "torchrun (RANK, WORLD_SIZE: our launcher, torchrun or by hand): rank 0 of 1, local 0 "
            "of 1; store at 127.0.0.1:29500, hosted by rank 0");
}

}  // namespace
}  // namespace mtb::doctor
