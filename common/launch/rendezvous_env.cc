#include "common/launch/rendezvous_env.h"

#include "absl/strings/str_cat.h"

namespace mtb {

collective::RendezvousOptions RendezvousOptionsFor(
    const RankEnv& rank_env, absl::Duration connect_timeout,
    absl::Duration collective_timeout) {
  collective::RendezvousOptions options;
  options.rank = rank_env.rank;
  options.world_size = rank_env.world_size;
  options.master_addr = rank_env.master_addr;
  options.master_port = rank_env.master_port;
  options.is_server = rank_env.HostsStore();
  options.connect_timeout = connect_timeout;
  options.collective_timeout = collective_timeout;
  options.group_name =
      absl::StrCat("attempt_", rank_env.restart_count, "/world");
  return options;
}

}  // namespace mtb
