#include "common/launch/store_host.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "absl/strings/str_cat.h"
#include "common/libtorch/torch_status.h"

namespace mtb {

struct HostedStore::Server {
  c10::intrusive_ptr<c10d::TCPStore> store;
};

HostedStore::HostedStore(std::unique_ptr<Server> server, int port)
    : server_(std::move(server)), port_(port) {}

HostedStore::~HostedStore() = default;

absl::StatusOr<std::unique_ptr<HostedStore>> HostedStore::Start(
    const std::string& master_addr, int port, absl::Duration connect_timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = true;
  // The ranks connect on their own schedule; nobody waits for them here.
  options.waitWorkers = false;
  options.timeout = absl::ToChronoMilliseconds(connect_timeout);
  auto server = std::make_unique<Server>();
  absl::Status started = CallGuarded(
      absl::StrCat("launch: hosting the TCPStore on ", master_addr, ":", port),
      [&] {
        server->store =
            c10::make_intrusive<c10d::TCPStore>(master_addr, options);
      });
  if (!started.ok()) return started;
  const int bound_port = server->store->getPort();
  return std::unique_ptr<HostedStore>(
      new HostedStore(std::move(server), bound_port));
}

}  // namespace mtb
