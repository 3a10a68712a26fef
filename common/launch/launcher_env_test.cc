// Faked environments of srun and mpirun (as Slurm 22.05 and Open MPI 4.1 set
// them on this machine) through WithLauncherVariables and ParseRankEnv.
#include "common/launch/launcher_env.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/launch/rank_env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mtb {
namespace {

using ::testing::ElementsAre;

// Task `procid` of `srun --ntasks=4 --nodes=2` in job 4242, step 0.
EnvMap Srun(int procid) {
  return {{"SLURM_JOB_ID", "4242"},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_PROCID", std::to_string(procid)},
          {"SLURM_NTASKS", "4"},
          {"SLURM_LOCALID", std::to_string(procid % 2)},
          {"SLURM_NODEID", std::to_string(procid / 2)},
          {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
          {"SLURM_STEP_NODELIST", "gpu[07-08]"},
          {"SLURM_JOB_NODELIST", "gpu[05,07-08]"}};
}

// Rank `rank` of `mpirun -np 2` on one host.
EnvMap Mpirun(int rank) {
  return {{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
          {"OMPI_COMM_WORLD_SIZE", "2"},
          {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(rank)},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
          {"OMPI_MCA_ess_base_jobid", "1087963137"},
          {"PMIX_NAMESPACE", "1087963137"},
          {"PMIX_RANK", std::to_string(rank)}};
}

EnvMap With(EnvMap env, const EnvMap& extra) {
  for (const auto& [name, value] : extra) env[name] = value;
  return env;
}

void ExpectInvalid(const EnvMap& env, const std::string& substring) {
  absl::StatusOr<RankEnv> parsed = ParseRankEnv(env);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(parsed.status().message(), substring)) << parsed.status();
}

TEST(ExpandNodelist, ExpandsTheBracketFormsUsersMeet) {
  EXPECT_THAT(*ExpandNodelist("node[01-03,7],gpu5"),
              ElementsAre("node01", "node02", "node03", "node7", "gpu5"));
  EXPECT_THAT(*ExpandNodelist("vm"), ElementsAre("vm"));
  EXPECT_THAT(*ExpandNodelist("a[8-10]"), ElementsAre("a8", "a9", "a10"));
  EXPECT_THAT(*ExpandNodelist("r[1-2]n[1-2]"), ElementsAre("r1n1", "r1n2", "r2n1", "r2n2"));
  EXPECT_THAT(*ExpandNodelist("x[009-011]-ib"), ElementsAre("x009-ib", "x010-ib", "x011-ib"));
}

TEST(ExpandNodelist, MalformedListsAreInvalidNamingTheList) {
  for (const char* bad :
       {"node[01-03", "node]1[", "node[]", "node[3-1]", "node[a-b]", "a,,b", "node[1-2-3]"}) {
    absl::StatusOr<std::vector<std::string>> hosts = ExpandNodelist(bad);
    ASSERT_FALSE(hosts.ok()) << bad;
    EXPECT_EQ(hosts.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(hosts.status().message(), bad)) << hosts.status();
  }
}

TEST(ExpandTasksPerNode, ExpandsSlurmsRepeatCounts) {
  EXPECT_THAT(*ExpandTasksPerNode("2(x3),1"), ElementsAre(2, 2, 2, 1));
  EXPECT_THAT(*ExpandTasksPerNode("4"), ElementsAre(4));
  EXPECT_FALSE(ExpandTasksPerNode("2(x").ok());
  EXPECT_FALSE(ExpandTasksPerNode("2(x0)").ok());
  EXPECT_FALSE(ExpandTasksPerNode("two").ok());
}

TEST(PortFromJobId, IsStableInRangeAndDiffersBetweenJobs) {
  const int port = PortFromJobId("slurm-4242.0");
  EXPECT_EQ(port, PortFromJobId("slurm-4242.0"));
  EXPECT_GE(port, kDerivedPortBase);
  EXPECT_LT(port, kDerivedPortBase + kDerivedPortRange);
  EXPECT_NE(port, PortFromJobId("slurm-4242.1"));
  EXPECT_NE(port, PortFromJobId("slurm-4243.0"));
}

TEST(LauncherEnv, SrunTasksBecomeRanksMeetingOnTheStepsFirstHost) {
  for (int procid = 0; procid < 4; ++procid) {
    EXPECT_TRUE(HasRankEnv(Srun(procid)));
    absl::StatusOr<RankEnv> parsed = ParseRankEnv(Srun(procid));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->launcher, "slurm");
    EXPECT_EQ(parsed->rank, procid);
    EXPECT_EQ(parsed->world_size, 4);
    EXPECT_EQ(parsed->local_rank, procid % 2);
    EXPECT_EQ(parsed->local_world_size, 2);
    EXPECT_EQ(parsed->group_rank, procid / 2);
    EXPECT_EQ(parsed->master_addr, "gpu07") << "the step's first host, not the job's";
    EXPECT_EQ(parsed->master_port, PortFromJobId("slurm-4242.0"));
    EXPECT_EQ(parsed->run_id, "slurm-4242.0");
    EXPECT_EQ(parsed->HostsStore(), procid == 0) << "nobody hosts it for us under srun";
  }
}

TEST(LauncherEnv, GivenMasterAddrAndPortWinOverDerivedOnes) {
  absl::StatusOr<RankEnv> parsed =
      ParseRankEnv(With(Srun(1), {{"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29400"}}));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->master_addr, "10.0.0.1");
  EXPECT_EQ(parsed->master_port, 29400);
}

TEST(LauncherEnv, AnSbatchScriptsOwnShellIsNotARank) {
  EnvMap batch = Srun(0);
  batch.erase("SLURM_STEP_ID");
  EXPECT_FALSE(HasRankEnv(batch));
  EXPECT_EQ(DetectedLauncher(batch), "none");
}

TEST(LauncherEnv, MpirunOnOneHostMeetsOnLoopbackAtTheJobsPort) {
  for (int rank = 0; rank < 2; ++rank) {
    absl::StatusOr<RankEnv> parsed = ParseRankEnv(Mpirun(rank));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->launcher, "openmpi");
    EXPECT_EQ(parsed->rank, rank);
    EXPECT_EQ(parsed->world_size, 2);
    EXPECT_EQ(parsed->local_rank, rank);
    EXPECT_EQ(parsed->local_world_size, 2);
    EXPECT_EQ(parsed->master_addr, "127.0.0.1");
    EXPECT_EQ(parsed->master_port, PortFromJobId("ompi-1087963137"));
  }
}

TEST(LauncherEnv, MpirunAcrossHostsNeedsMasterAddr) {
  EnvMap across =
      With(Mpirun(3), {{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  ExpectInvalid(across,
                "MASTER_ADDR is not set (OMPI_COMM_WORLD_LOCAL_SIZE=2 < OMPI_COMM_WORLD_SIZE=4");
  absl::StatusOr<RankEnv> parsed = ParseRankEnv(With(across, {{"MASTER_ADDR", "node01"}}));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->master_addr, "node01");
  EXPECT_EQ(parsed->group_rank, 1) << "by-slot mapping: ranks 2 and 3 on the second host";
}

TEST(LauncherEnv, PmiWithoutLocalityNeedsMasterAddrAndUsesThePmixNamespace) {
  const EnvMap pmi = {{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"PMIX_NAMESPACE", "job7"}};
  EXPECT_EQ(DetectedLauncher(pmi), "pmi");
  ExpectInvalid(pmi, "MASTER_ADDR is not set (MPI_LOCALNRANKS is not set");
  absl::StatusOr<RankEnv> parsed = ParseRankEnv(With(pmi, {{"MPI_LOCALNRANKS", "2"}}));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->rank, 1);
  EXPECT_EQ(parsed->master_addr, "127.0.0.1");
  EXPECT_EQ(parsed->master_port, PortFromJobId("pmix-job7"));
}

TEST(LauncherEnv, NoJobIdAndNoMasterPortIsInvalid) {
  ExpectInvalid({{"PMI_RANK", "0"}, {"PMI_SIZE", "1"}, {"MPI_LOCALNRANKS", "1"}},
                "MASTER_PORT is not set and pmi gave no job id");
}

TEST(LauncherEnv, TorchrunVariablesComeFirstAndAnOuterLaunchIsIgnored) {
  // torchrun --nproc=2 inside `srun --ntasks=1`: srun's one task is the agent.
  EnvMap nested = {{"SLURM_JOB_ID", "5"},        {"SLURM_STEP_ID", "0"},  {"SLURM_PROCID", "0"},
                   {"SLURM_NTASKS", "1"},        {"RANK", "1"},           {"WORLD_SIZE", "2"},
                   {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}};
  absl::StatusOr<RankEnv> parsed = ParseRankEnv(nested);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->launcher, "torchrun");
  EXPECT_EQ(parsed->rank, 1);
  EXPECT_EQ(parsed->master_port, 29500);
}

TEST(LauncherEnv, DisagreeingVariablesOfOneLaunchAreInvalidNamingBoth) {
  // A stale `export RANK=0 WORLD_SIZE=4` in the shell srun started from.
  ExpectInvalid(With(Srun(2), {{"RANK", "0"}, {"WORLD_SIZE", "4"}}),
                "RANK=0 and SLURM_PROCID=2 disagree while WORLD_SIZE=4 and SLURM_NTASKS=4 say "
                "they are the same launch");
  ExpectInvalid(With(Mpirun(1), {{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}}),
                "OMPI_COMM_WORLD_RANK=1 and PMI_RANK=0 disagree");
  // Agreeing variables of one launch are fine (srun --mpi=pmi2): Slurm's
  // say more than PMI's and are read first.
  absl::StatusOr<RankEnv> pmi2 =
      ParseRankEnv(With(Srun(2), {{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}}));
  ASSERT_TRUE(pmi2.ok()) << pmi2.status();
  EXPECT_EQ(pmi2->launcher, "slurm");
  EXPECT_EQ(pmi2->master_addr, "gpu07");
}

TEST(LauncherEnv, HalfSetOrMalformedLauncherVariablesAreInvalid) {
  EnvMap half = Mpirun(0);
  half.erase("OMPI_COMM_WORLD_SIZE");
  ExpectInvalid(half, "OMPI_COMM_WORLD_RANK=0 is set but OMPI_COMM_WORLD_SIZE is not");
  ExpectInvalid(With(Srun(0), {{"SLURM_NTASKS", "four"}}), "SLURM_NTASKS='four' is not an integer");
  ExpectInvalid(With(Srun(0), {{"SLURM_PROCID", "4"}}), "SLURM_PROCID=4 must be < SLURM_NTASKS=4");
  ExpectInvalid(With(Srun(0), {{"SLURM_STEP_NODELIST", "gpu[07-"}}),
                "SLURM_STEP_NODELIST: nodelist 'gpu[07-' does not parse");
  ExpectInvalid(With(Srun(0), {{"SLURM_NODEID", "2"}}),
                "SLURM_NODEID=2 but SLURM_STEP_TASKS_PER_NODE='2(x2)' lists 2 node(s)");
}

TEST(LauncherEnv, NoLauncherIsStillTheTorchrunError) {
  EXPECT_EQ(DetectedLauncher({}), "none");
  EXPECT_FALSE(HasRankEnv({}));
  ExpectInvalid({}, "neither RANK nor WORLD_SIZE is set");
}

}  // namespace
}  // namespace mtb
