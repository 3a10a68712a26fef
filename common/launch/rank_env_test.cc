#include "common/launch/rank_env.h"

#include <string>

#include "gtest/gtest.h"

namespace mtb {
namespace {

EnvMap ByHand(EnvMap extra) {
  EnvMap env = {{"RANK", "1"},
                {"WORLD_SIZE", "2"},
                {"MASTER_ADDR", "127.0.0.1"},
                {"MASTER_PORT", "29500"}};
  for (const auto& [name, value] : extra) env[name] = value;
  return env;
}

void ExpectInvalid(const EnvMap& env, const std::string& message) {
  absl::StatusOr<RankEnv> parsed = ParseRankEnv(env);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message(), message);
}

TEST(RankEnv, ByHandNeedsOnlyTheFourEnvInitVariables) {
  absl::StatusOr<RankEnv> parsed = ParseRankEnv(ByHand({}));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->rank, 1);
  EXPECT_EQ(parsed->world_size, 2);
  EXPECT_EQ(parsed->local_rank, 1);
  EXPECT_EQ(parsed->local_world_size, 2);
  EXPECT_EQ(parsed->group_rank, 0);
  EXPECT_EQ(parsed->master_addr, "127.0.0.1");
  EXPECT_EQ(parsed->master_port, 29500);
  EXPECT_EQ(parsed->restart_count, 0);
  EXPECT_FALSE(parsed->agent_store);
  EXPECT_FALSE(parsed->HostsStore());
}

TEST(RankEnv, RankZeroHostsTheStoreUnlessTheAgentDoes) {
  absl::StatusOr<RankEnv> by_hand = ParseRankEnv(ByHand({{"RANK", "0"}}));
  ASSERT_TRUE(by_hand.ok()) << by_hand.status();
  EXPECT_TRUE(by_hand->HostsStore());
  absl::StatusOr<RankEnv> launched = ParseRankEnv(
      ByHand({{"RANK", "0"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"}}));
  ASSERT_TRUE(launched.ok()) << launched.status();
  EXPECT_TRUE(launched->agent_store);
  EXPECT_FALSE(launched->HostsStore());
}

TEST(RankEnv, TorchrunVariablesRoundTrip) {
  RankEnv rank_env;
  rank_env.rank = 5;
  rank_env.local_rank = 1;
  rank_env.world_size = 8;
  rank_env.local_world_size = 4;
  rank_env.group_rank = 1;
  rank_env.master_addr = "node0.example";
  rank_env.master_port = 1234;
  rank_env.restart_count = 2;
  rank_env.agent_store = true;
  const EnvMap env = TorchrunVariables(rank_env, 2);
  EXPECT_EQ(env.at("GROUP_WORLD_SIZE"), "2");
  EXPECT_EQ(env.at("ROLE_RANK"), "5");
  EXPECT_EQ(env.at("TORCHELASTIC_USE_AGENT_STORE"), "True");
  EXPECT_TRUE(HasRankEnv(env));
  absl::StatusOr<RankEnv> parsed = ParseRankEnv(env);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->rank, 5);
  EXPECT_EQ(parsed->local_rank, 1);
  EXPECT_EQ(parsed->world_size, 8);
  EXPECT_EQ(parsed->local_world_size, 4);
  EXPECT_EQ(parsed->group_rank, 1);
  EXPECT_EQ(parsed->master_addr, "node0.example");
  EXPECT_EQ(parsed->master_port, 1234);
  EXPECT_EQ(parsed->restart_count, 2);
  EXPECT_TRUE(parsed->agent_store);
}

TEST(RankEnv, NoRankVariablesMeansNotAWorker) {
  EXPECT_FALSE(HasRankEnv({{"MASTER_ADDR", "x"}, {"LOCAL_RANK", "0"}}));
  EXPECT_TRUE(HasRankEnv({{"WORLD_SIZE", "2"}}));
  ExpectInvalid({},
                "neither RANK nor WORLD_SIZE is set (launch with --nproc, "
                "or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT)");
}

TEST(RankEnv, RankOutsideTheWorldIsInvalid) {
  // Reported before the missing MASTER_* variables: the first rule broken.
  ExpectInvalid({{"RANK", "5"}, {"WORLD_SIZE", "2"}},
                "RANK=5 must be < WORLD_SIZE=2");
  ExpectInvalid(ByHand({{"RANK", "-1"}}), "RANK=-1 must be >= 0");
  ExpectInvalid(ByHand({{"WORLD_SIZE", "0"}}), "WORLD_SIZE=0 must be >= 1");
  ExpectInvalid(ByHand({{"RANK", "one"}}), "RANK='one' is not an integer");
}

TEST(RankEnv, HalfTheRankVariablesIsInvalid) {
  ExpectInvalid({{"RANK", "0"}},
                "RANK=0 is set but WORLD_SIZE is not: set both, or neither to "
                "launch with --nproc");
  ExpectInvalid({{"WORLD_SIZE", "4"}},
                "WORLD_SIZE=4 is set but RANK is not: set both, or neither to "
                "launch with --nproc");
}

TEST(RankEnv, MasterPortMustBeAPortNumber) {
  ExpectInvalid(ByHand({{"MASTER_PORT", "abc"}}),
                "MASTER_PORT='abc' is not a port number (1-65535)");
  ExpectInvalid(ByHand({{"MASTER_PORT", "0"}}),
                "MASTER_PORT='0' is not a port number (1-65535)");
  ExpectInvalid(ByHand({{"MASTER_PORT", "65536"}}),
                "MASTER_PORT='65536' is not a port number (1-65535)");
  EnvMap no_port = ByHand({});
  no_port.erase("MASTER_PORT");
  ExpectInvalid(no_port,
                "MASTER_PORT is not set (the TCPStore's port on MASTER_ADDR, "
                "e.g. MASTER_PORT=29500)");
}

TEST(RankEnv, MasterAddrIsRequired) {
  EnvMap env = ByHand({});
  env.erase("MASTER_ADDR");
  ExpectInvalid(env,
                "MASTER_ADDR is not set (RANK=1 WORLD_SIZE=2 also need the "
                "address of rank 0's host, e.g. MASTER_ADDR=127.0.0.1)");
}

TEST(RankEnv, LocalRanksMustFitTheNode) {
  ExpectInvalid(ByHand({{"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}}),
                "LOCAL_RANK=2 must be < LOCAL_WORLD_SIZE=2");
  ExpectInvalid(ByHand({{"LOCAL_WORLD_SIZE", "3"}}),
                "LOCAL_WORLD_SIZE=3 must be <= WORLD_SIZE=2");
  ExpectInvalid(ByHand({{"GROUP_RANK", "2"}}),
                "GROUP_RANK=2 must be < WORLD_SIZE=2 (a node runs at least one "
                "rank)");
  ExpectInvalid(ByHand({{"TORCHELASTIC_RESTART_COUNT", "x"}}),
                "TORCHELASTIC_RESTART_COUNT='x' is not an integer");
  ExpectInvalid(ByHand({{"TORCHELASTIC_USE_AGENT_STORE", "maybe"}}),
                "TORCHELASTIC_USE_AGENT_STORE='maybe' is not a boolean (True, "
                "False, 1 or 0)");
}

TEST(RankEnv, OurLaunchersExtrasAreOptionalAndChecked) {
  absl::StatusOr<RankEnv> plain = ParseRankEnv(ByHand({}));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->heartbeat_fd, -1);
  EXPECT_EQ(plain->log_dir, "");
  EXPECT_EQ(plain->run_id, "none");
  EXPECT_EQ(plain->max_restarts, 0);
  EXPECT_TRUE(plain->earlier_attempts.empty());
  absl::StatusOr<RankEnv> extras = ParseRankEnv(
      ByHand({{"MTB_HEARTBEAT_FD", "3"}, {"MTB_HEARTBEAT_INTERVAL_MS", "250"},
              {"MTB_LOG_DIR", "/logs"}, {"TORCHELASTIC_RUN_ID", "job7"},
              {"TORCHELASTIC_MAX_RESTARTS", "2"},
              {"MTB_RESTART_HISTORY", "rank 1 (pid 7) exited with code 5\nrank 0 (pid 9) "
                                      "was killed by signal 11 (SIGSEGV)"}}));
  ASSERT_TRUE(extras.ok()) << extras.status();
  EXPECT_EQ(extras->heartbeat_fd, 3);
  EXPECT_EQ(extras->heartbeat_interval_ms, 250);
  EXPECT_EQ(extras->log_dir, "/logs");
  EXPECT_EQ(extras->run_id, "job7");
  EXPECT_EQ(extras->max_restarts, 2);
  EXPECT_EQ(extras->earlier_attempts,
            std::vector<std::string>({"rank 1 (pid 7) exited with code 5",
                                      "rank 0 (pid 9) was killed by signal 11 (SIGSEGV)"}));
  ExpectInvalid(ByHand({{"TORCHELASTIC_MAX_RESTARTS", "-1"}}),
                "TORCHELASTIC_MAX_RESTARTS=-1 must be >= 0");
  ExpectInvalid(ByHand({{"MTB_HEARTBEAT_FD", "1"}}), "MTB_HEARTBEAT_FD=1 must be >= 3");
  ExpectInvalid(ByHand({{"MTB_HEARTBEAT_INTERVAL_MS", "0"}}),
                "MTB_HEARTBEAT_INTERVAL_MS=0 must be >= 1");
}

}  // namespace
}  // namespace mtb
