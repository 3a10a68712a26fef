#include "common/collective/rendezvous.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/collective/store_impl.h"
#include "common/base/status.h"
#include "common/libtorch/torch_status.h"
#include "torch/csrc/distributed/c10d/TCPStore.hpp"

namespace mtb::collective {
namespace {

bool IsLoopback(const std::string& address) {
  return address == "127.0.0.1" || address == "localhost" || address == "::1";
}

}  // namespace

absl::Status ValidateRendezvousOptions(const RendezvousOptions& options) {
  if (options.world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rendezvous: world_size ", options.world_size, " must be >= 1"));
  }
  if (options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous: rank ", options.rank, " is not in [0, ",
                     "world_size ", options.world_size, ")"));
  }
  if (options.master_addr.empty()) {
    return absl::InvalidArgumentError("rendezvous: master_addr is empty");
  }
  const int lowest_port = options.is_server ? 0 : 1;
  if (options.master_port < lowest_port || options.master_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rendezvous: master_port ", options.master_port, " is not in [",
        lowest_port, ", 65535]",
        options.is_server ? "" : " (0 only when hosting the store)"));
  }
  if (options.connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rendezvous: connect_timeout ",
        absl::FormatDuration(options.connect_timeout), " must be positive"));
  }
  if (options.collective_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rendezvous: collective_timeout ",
        absl::FormatDuration(options.collective_timeout), " must be positive"));
  }
  if (options.group_name.empty()) {
    return absl::InvalidArgumentError("rendezvous: group_name is empty");
  }
  return absl::OkStatus();
}

absl::StatusOr<Store> ConnectStore(const RendezvousOptions& options) {
  RETURN_IF_ERROR(ValidateRendezvousOptions(options));
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(options.master_port);
  store_options.isServer = options.is_server;
  store_options.numWorkers = options.world_size;
  // The group's rendezvous waits for every rank; the server need not.
  store_options.waitWorkers = false;
  store_options.timeout = std::chrono::milliseconds(
      absl::ToInt64Milliseconds(options.connect_timeout));
  const std::string endpoint =
      absl::StrCat(options.master_addr, ":", options.master_port);
  absl::StatusOr<c10::intrusive_ptr<c10d::TCPStore>> store = CallGuarded(
      absl::StrCat(
          "rendezvous: ", options.is_server ? "hosting" : "connecting to",
          " the TCPStore at ", endpoint, " as rank ", options.rank, " of ",
          options.world_size, " (connect timeout ",
          absl::FormatDuration(options.connect_timeout), ")"),
      [&] {
        return c10::make_intrusive<c10d::TCPStore>(options.master_addr,
                                                   store_options);
      });
  if (!store.ok()) return store.status();
  const int port = (*store)->getPort();
  return WrapC10dStore(
      *store, absl::StrCat("tcp://", options.master_addr, ":", port), port);
}

absl::StatusOr<std::unique_ptr<Communicator>> JoinGroup(
    const Store& store, const RendezvousOptions& options) {
  RETURN_IF_ERROR(ValidateRendezvousOptions(options));
  CommunicatorOptions communicator_options;
  communicator_options.rank = options.rank;
  communicator_options.world_size = options.world_size;
  communicator_options.timeout = options.collective_timeout;
  communicator_options.gloo_interface = options.gloo_interface;
  communicator_options.gloo_hostname = options.gloo_hostname;
  communicator_options.keep_records = options.keep_records;
  if (communicator_options.gloo_interface.empty() &&
      communicator_options.gloo_hostname.empty() &&
      IsLoopback(options.master_addr)) {
    const char* env = std::getenv("GLOO_SOCKET_IFNAME");
    if (env == nullptr || *env == '\0') {
      communicator_options.gloo_hostname = "127.0.0.1";
    }
  }
  absl::StatusOr<std::unique_ptr<Communicator>> communicator =
      Communicator::Create(store.WithPrefix(options.group_name),
                           communicator_options);
  if (!communicator.ok()) {
    return Annotate(communicator.status(),
                    absl::StrCat("rendezvous of group '", options.group_name,
                                 "' through ", store.DebugString()));
  }
  return communicator;
}

absl::StatusOr<std::unique_ptr<Communicator>> Rendezvous(
    const RendezvousOptions& options) {
  ASSIGN_OR_RETURN(Store store, ConnectStore(options));
  return JoinGroup(store, options);
}

}  // namespace mtb::collective
