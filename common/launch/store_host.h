// The TCPStore server a launcher hosts for its ranks (node 0 only).
//
// Hosting it in the launcher rather than in rank 0 means the port is bound
// before any rank starts (port 0 asks the kernel for a free one: no
// pick-then-bind race), and the store outlives any rank, rank 0 included.
// The ranks are told so by TORCHELASTIC_USE_AGENT_STORE=True and connect as
// clients. c10d's headers stay in the .cc.
#ifndef MTB_COMMON_LAUNCH_STORE_HOST_H_
#define MTB_COMMON_LAUNCH_STORE_HOST_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace mtb {

class HostedStore {
 public:
  // Starts a server listening on every interface at `port` (0: a free port),
  // and checks it is reachable at `master_addr` (which must name this host)
  // within `connect_timeout`. Errors name the address and port.
  static absl::StatusOr<std::unique_ptr<HostedStore>> Start(
      const std::string& master_addr, int port, absl::Duration connect_timeout);

  ~HostedStore();
  HostedStore(const HostedStore&) = delete;
  HostedStore& operator=(const HostedStore&) = delete;

  // The port it listens on (the one bound when Start was given 0).
  int port() const { return port_; }

 private:
  struct Server;
  HostedStore(std::unique_ptr<Server> server, int port);

  std::unique_ptr<Server> server_;
  int port_;
};

}  // namespace mtb

#endif  // MTB_COMMON_LAUNCH_STORE_HOST_H_
