#include "common/launch/launch_options.h"

#include <stdlib.h>

#include <string>
#include <vector>

#include "common/base/flags.h"
#include "gtest/gtest.h"

namespace mtb {
namespace {

void ExpectInvalid(const LaunchOptions& options, const std::string& message) {
  const absl::Status status = ValidateLaunchOptions(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), message);
}

LaunchOptions TwoNodes() {
  LaunchOptions options;
  options.nproc = 2;
  options.nnodes = 2;
  options.node_rank = 1;
  options.master_addr = "10.0.0.1";
  return options;
}

TEST(LaunchOptions, FlagsAndTheNprocPerNodeAlias) {
  std::vector<std::string> args = {
      "tool",           "--nproc_per_node=3", "--nnodes=2",
      "--node_rank=1",  "--master_addr=h0",   "--master_port=1234",
      "--log_dir=logs", "--kill_grace=250ms"};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  ASSERT_TRUE(
      ParseCommandLine(static_cast<int>(argv.size()), argv.data()).ok());
  const LaunchOptions options = LaunchOptionsFromFlags({/*nproc=*/5});
  EXPECT_EQ(options.nproc, 3);  // given, so the tool's default does not apply
  EXPECT_EQ(options.nnodes, 2);
  EXPECT_EQ(options.node_rank, 1);
  EXPECT_EQ(options.master_addr, "h0");
  EXPECT_EQ(options.master_port, 1234);
  EXPECT_EQ(options.log_dir, "logs");
  EXPECT_EQ(options.kill_grace, absl::Milliseconds(250));
  EXPECT_TRUE(ValidateLaunchOptions(options).ok());
}

TEST(LaunchOptions, EveryRuleNamesTheFlag) {
  EXPECT_TRUE(ValidateLaunchOptions(LaunchOptions{}).ok());
  EXPECT_TRUE(ValidateLaunchOptions(TwoNodes()).ok());

  LaunchOptions options;
  options.nproc = 0;
  ExpectInvalid(options, "--nproc=0 must be >= 1");
  options = TwoNodes();
  options.master_addr = "";
  ExpectInvalid(options,
                "--nnodes=2 needs --master_addr (the address of node 0, where "
                "its launcher hosts the TCPStore; every node must reach it)");
  options = TwoNodes();
  options.node_rank = 2;
  ExpectInvalid(options, "--node_rank=2 must be < --nnodes=2");
  options.node_rank = -1;
  ExpectInvalid(options, "--node_rank=-1 must be >= 0");
  options = TwoNodes();
  options.nnodes = 0;
  options.node_rank = 0;
  ExpectInvalid(options, "--nnodes=0 must be >= 1");
  options = TwoNodes();
  options.master_port = 70000;
  ExpectInvalid(options, "--master_port=70000 is not a port number (1-65535)");
  options = TwoNodes();
  options.kill_grace = absl::Seconds(-1);
  ExpectInvalid(options, "--kill_grace=-1s must be >= 0");
  options = TwoNodes();
  options.max_restarts = 1;  // node 0's launcher decides for all
  EXPECT_TRUE(ValidateLaunchOptions(options).ok());
  options = LaunchOptions();
  options.heartbeat_timeout = absl::Seconds(-1);
  ExpectInvalid(options, "--heartbeat_timeout=-1s must be >= 0 (0: off)");
  options.heartbeat_timeout = absl::Seconds(3);
  ExpectInvalid(options, "--heartbeat_timeout=3s: this tool's ranks do not "
                         "report heartbeats (the trainer, comm_bench and "
                         "moe_comm do); leave it unset");
  options.reports_heartbeats = true;
  EXPECT_TRUE(ValidateLaunchOptions(options).ok());
  options.heartbeat_timeout = absl::Milliseconds(500);
  ExpectInvalid(options, "--heartbeat_timeout=500ms must be at least 1s (ranks "
                         "report 4 times per timeout; the launcher looks twice "
                         "a second)");
  options = LaunchOptions();
  options.max_restarts = -1;
  ExpectInvalid(options, "--max_restarts=-1 must be >= 0");
  options.max_restarts = 2;
  EXPECT_TRUE(ValidateLaunchOptions(options).ok());
}

TEST(LaunchOptions, OnlyUsageErrorsAndDeterministicFailuresAreNotRestarted) {
  EXPECT_TRUE(IsRestartable(1));
  EXPECT_TRUE(IsRestartable(137));
  EXPECT_FALSE(IsRestartable(2));
  EXPECT_FALSE(IsRestartable(kExitDeterministicFailure));
  EXPECT_FALSE(IsRestartable(kExitPreempted));
}

TEST(LaunchOptions, StandaloneIsOneNodeOnAFreePort) {
  LaunchOptions options;
  options.standalone = true;
  EXPECT_TRUE(ValidateLaunchOptions(options).ok());
  options.nnodes = 2;
  options.master_addr = "h0";
  ExpectInvalid(options,
                "--standalone runs one node; it cannot be combined with "
                "--nnodes=2");
  options.nnodes = 1;
  ExpectInvalid(options,
                "--standalone listens on 127.0.0.1; drop "
                "--master_addr=h0");
  options.master_addr = "";
  options.master_port = 29500;
  ExpectInvalid(options,
                "--standalone picks a free port; drop "
                "--master_port=29500");
}

TEST(LaunchOptions, DefaultEndpointIsLoopbackOrTorchrunsPort) {
  const LaunchOptions one_node = WithDefaultEndpoint(LaunchOptions{});
  EXPECT_EQ(one_node.master_addr, "127.0.0.1");
  EXPECT_EQ(one_node.master_port, 0);  // the store server picks one
  const LaunchOptions two_nodes = WithDefaultEndpoint(TwoNodes());
  EXPECT_EQ(two_nodes.master_addr, "10.0.0.1");
  EXPECT_EQ(two_nodes.master_port, kDefaultMasterPort);
}

TEST(LaunchOptions, ChildEnvironmentIsTorchrunsForTheGlobalRank) {
  LaunchOptions options = WithDefaultEndpoint(TwoNodes());
  const EnvMap parent = {{"PATH", "/bin"}, {"RANK", "stale"}};
  const EnvMap env = ChildEnvironment(options, /*local_rank=*/1,
                                      /*restart_count=*/0, parent);
  const EnvMap expected_subset = {
      {"PATH", "/bin"},
      {"RANK", "3"},
      {"LOCAL_RANK", "1"},
      {"WORLD_SIZE", "4"},
      {"LOCAL_WORLD_SIZE", "2"},
      {"GROUP_RANK", "1"},
      {"GROUP_WORLD_SIZE", "2"},
      {"ROLE_RANK", "3"},
      {"ROLE_WORLD_SIZE", "4"},
      {"ROLE_NAME", "default"},
      {"MASTER_ADDR", "10.0.0.1"},
      {"MASTER_PORT", "29500"},
      {"TORCHELASTIC_RESTART_COUNT", "0"},
      {"TORCHELASTIC_MAX_RESTARTS", "0"},
      {"TORCHELASTIC_RUN_ID", "none"},
      {"TORCHELASTIC_USE_AGENT_STORE", "True"},
      {"OMP_NUM_THREADS", "1"},
      {"NCCL_ASYNC_ERROR_HANDLING", "1"},
  };
  for (const auto& [name, value] : expected_subset) {
    ASSERT_EQ(env.count(name), 1u) << name;
    EXPECT_EQ(env.at(name), value) << name;
  }
  EXPECT_EQ(env.size(), expected_subset.size());
  // And a rank reads back exactly that.
  absl::StatusOr<RankEnv> parsed = ParseRankEnv(env);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->rank, 3);
  EXPECT_TRUE(parsed->agent_store);
}

TEST(LaunchOptions, AHeartbeatTimeoutGivesEachRankThePipeAndAQuarterAsInterval) {
  LaunchOptions options = WithDefaultEndpoint(TwoNodes());
  options.heartbeat_auto = false;
  options.heartbeat_timeout = absl::Seconds(2);
  options.reports_heartbeats = true;
  options.run_id = "20261203T114636_4242";
  // A parent's stale extras never reach a rank.
  const EnvMap env = ChildEnvironment(options, 0, 1,
                                      {{"MTB_LOG_DIR", "/stale"}, {"MTB_HEARTBEAT_FD", "9"},
                                       {"MTB_RESTART_HISTORY", "stale"}});
  EXPECT_EQ(env.at("MTB_HEARTBEAT_FD"), "3");
  EXPECT_EQ(env.at("MTB_HEARTBEAT_INTERVAL_MS"), "500");
  EXPECT_EQ(env.count("MTB_LOG_DIR"), 0u);
  EXPECT_EQ(env.count("MTB_RESTART_HISTORY"), 0u);
  EXPECT_EQ(env.at("TORCHELASTIC_RUN_ID"), "20261203T114636_4242");
  absl::StatusOr<RankEnv> parsed = ParseRankEnv(env);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->heartbeat_fd, 3);
  EXPECT_EQ(parsed->heartbeat_interval_ms, 500);
  EXPECT_EQ(parsed->run_id, "20261203T114636_4242");
  EXPECT_EQ(parsed->restart_count, 1);
}

TEST(LaunchOptions, TheHeartbeatIsOnByDefaultForToolsThatReportItAndZeroTurnsItOff) {
  LaunchOptions options = WithDefaultEndpoint(TwoNodes());
  EXPECT_TRUE(options.heartbeat_auto);
  EXPECT_EQ(ChildEnvironment(options, 0, 0, {}).count("MTB_HEARTBEAT_FD"), 0u)
      << "a tool that sends no heartbeats gets no pipe";
  options.reports_heartbeats = true;
  EnvMap env = ChildEnvironment(options, 0, 0, {});
  EXPECT_EQ(env.at("MTB_HEARTBEAT_FD"), "3");
  // Automatic: a quarter of the floor, at most a second.
  EXPECT_EQ(env.at("MTB_HEARTBEAT_INTERVAL_MS"), "1000");
  options.heartbeat_floor = absl::Seconds(2);
  EXPECT_EQ(ChildEnvironment(options, 0, 0, {}).at("MTB_HEARTBEAT_INTERVAL_MS"), "500");
  options.heartbeat_auto = false;  // --heartbeat_timeout=0
  EXPECT_EQ(ChildEnvironment(options, 0, 0, {}).count("MTB_HEARTBEAT_FD"), 0u);
}

TEST(LaunchOptions, OmpNumThreadsIsKeptWhenSetAndLeftAloneForOneRank) {
  LaunchOptions options = WithDefaultEndpoint(TwoNodes());
  options.master_port = 1;
  EnvMap parent = {{"OMP_NUM_THREADS", "4"}};
  EXPECT_FALSE(SetsOmpNumThreads(options, parent));
  EXPECT_EQ(ChildEnvironment(options, 0, 0, parent).at("OMP_NUM_THREADS"), "4");
  options.nproc = 1;
  EXPECT_FALSE(SetsOmpNumThreads(options, {}));
  EXPECT_EQ(ChildEnvironment(options, 0, 0, {}).count("OMP_NUM_THREADS"), 0u);
}

TEST(PlannedWorldSize, ComesFromTheRankEnvironmentElseTheLaunchFlags) {
  for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    ::unsetenv(name);
  }
  std::vector<std::string> args = {"tool", "--nproc=3", "--nnodes=2",
                                   "--node_rank=0", "--master_addr=h0"};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  ASSERT_TRUE(
      ParseCommandLine(static_cast<int>(argv.size()), argv.data()).ok());
  absl::StatusOr<int> world_size = PlannedWorldSize();
  ASSERT_TRUE(world_size.ok()) << world_size.status();
  EXPECT_EQ(*world_size, 6);

  ::setenv("RANK", "1", 1);
  ::setenv("WORLD_SIZE", "4", 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", "29500", 1);
  world_size = PlannedWorldSize();
  ASSERT_TRUE(world_size.ok()) << world_size.status();
  EXPECT_EQ(*world_size, 4);  // a worker: the launch flags do not count
  ::setenv("RANK", "5", 1);
  EXPECT_EQ(PlannedWorldSize().status().code(),
            absl::StatusCode::kInvalidArgument);
  for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    ::unsetenv(name);
  }
}

TEST(PlanWorld, SaysHowTheWorldSizeWasSet) {
  std::vector<std::string> args = {"tool", "--nproc=3", "--nnodes=2",
                                   "--node_rank=0", "--master_addr=h0"};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  ASSERT_TRUE(
      ParseCommandLine(static_cast<int>(argv.size()), argv.data()).ok());
  absl::StatusOr<PlannedWorld> world = PlanWorld(EnvMap{});
  ASSERT_TRUE(world.ok()) << world.status();
  EXPECT_EQ(world->world_size, 6);
  EXPECT_EQ(world->ranks_per_host, 3);
  EXPECT_EQ(world->label, "world size 6 (--nnodes=2 x --nproc=3)");

  world = PlanWorld(EnvMap{{"RANK", "1"},
                           {"WORLD_SIZE", "4"},
                           {"LOCAL_WORLD_SIZE", "2"},
                           {"MASTER_ADDR", "127.0.0.1"},
                           {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(world.ok()) << world.status();
  EXPECT_EQ(world->world_size, 4);
  EXPECT_EQ(world->ranks_per_host, 2);
  EXPECT_EQ(world->label, "WORLD_SIZE=4");

  std::vector<std::string> one_node = {"tool", "--nproc=2", "--nnodes=1"};
  argv.clear();
  for (std::string& arg : one_node) argv.push_back(arg.data());
  ASSERT_TRUE(
      ParseCommandLine(static_cast<int>(argv.size()), argv.data()).ok());
  world = PlanWorld(EnvMap{});
  ASSERT_TRUE(world.ok()) << world.status();
  EXPECT_EQ(world->label, "--nproc=2");
}

}  // namespace
}  // namespace mtb
