#include "common/launch/rendezvous_env.h"

#include "gtest/gtest.h"

namespace mtb {
namespace {

TEST(RendezvousEnv, LaunchedRanksAreClientsOfTheLaunchersStore) {
  RankEnv rank_env;
  rank_env.rank = 0;
  rank_env.world_size = 4;
  rank_env.master_addr = "10.0.0.1";
  rank_env.master_port = 29500;
  rank_env.restart_count = 2;
  rank_env.agent_store = true;
  TimeoutOptions timeouts;
  timeouts.connect_timeout = absl::Seconds(30);
  timeouts.first_step_timeout = absl::Seconds(40);
  timeouts.collective_timeout = absl::Seconds(5);
  timeouts.wait_progress_every = absl::Seconds(3);
  const collective::RendezvousOptions options =
      RendezvousOptionsFor(rank_env, timeouts);
  EXPECT_EQ(options.rank, 0);
  EXPECT_EQ(options.world_size, 4);
  EXPECT_EQ(options.master_addr, "10.0.0.1");
  EXPECT_EQ(options.master_port, 29500);
  EXPECT_FALSE(options.is_server);
  EXPECT_EQ(options.connect_timeout, absl::Seconds(30));
  EXPECT_EQ(options.first_step_timeout, absl::Seconds(40));
  EXPECT_EQ(options.collective_timeout, absl::Seconds(5));
  EXPECT_EQ(options.wait_progress_every, absl::Seconds(3));
  EXPECT_EQ(options.group_name, "attempt_2/world");
  EXPECT_TRUE(collective::ValidateRendezvousOptions(options).ok());
}

TEST(RendezvousEnv, RankZeroHostsTheStoreWhenNoLauncherDoes) {
  RankEnv rank_env;
  rank_env.world_size = 2;
  rank_env.master_addr = "127.0.0.1";
  rank_env.master_port = 29500;
  EXPECT_TRUE(RendezvousOptionsFor(rank_env, TimeoutOptions())
                  .is_server);
  rank_env.rank = 1;
  EXPECT_FALSE(
      RendezvousOptionsFor(rank_env, TimeoutOptions())
          .is_server);
}

}  // namespace
}  // namespace mtb
