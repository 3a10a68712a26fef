#include "common/launch/rendezvous_env.h"

#include "absl/strings/str_cat.h"

namespace mtb {

collective::RendezvousOptions RendezvousOptionsFor(
    const RankEnv& rank_env, const TimeoutOptions& timeouts) {
  collective::RendezvousOptions options;
  options.rank = rank_env.rank;
  options.world_size = rank_env.world_size;
  options.master_addr = rank_env.master_addr;
  options.master_port = rank_env.master_port;
  options.is_server = rank_env.HostsStore();
  options.connect_timeout = timeouts.connect_timeout;
  options.first_step_timeout = timeouts.first_step_timeout;
  options.collective_timeout = timeouts.collective_timeout;
  options.wait_progress_every = timeouts.wait_progress_every;
  options.group_name =
      absl::StrCat("attempt_", rank_env.restart_count, "/world");
  options.run_id = rank_env.run_id;
  options.attempt = rank_env.restart_count;
  options.flight_recorder_dir = rank_env.log_dir;
  options.heartbeat_fd = rank_env.heartbeat_fd;
  options.heartbeat_interval = absl::Milliseconds(rank_env.heartbeat_interval_ms);
  return options;
}

}  // namespace mtb
