#include "common/collective/rendezvous.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "glog/logging.h"
#include "common/collective/store_impl.h"
#include "common/base/status.h"
#include "common/libtorch/torch_status.h"
#include "torch/csrc/distributed/c10d/TCPStore.hpp"

namespace mtb::collective {
namespace {

bool IsLoopback(const std::string& address) {
  return address == "127.0.0.1" || address == "localhost" || address == "::1";
}

// Where each rank announces that it has reached the group's rendezvous.
constexpr char kJoinedKey[] = "mtb_joined/";

std::string RankList(const std::vector<int>& ranks) {
  return ranks.empty() ? "none" : absl::StrJoin(ranks, ", ");
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
  if (options.first_step_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rendezvous: first_step_timeout ",
        absl::FormatDuration(options.first_step_timeout), " must be positive"));
  }
  if (options.collective_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rendezvous: collective_timeout ",
        absl::FormatDuration(options.collective_timeout), " must be positive"));
  }
  if (options.wait_progress_every <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rendezvous: wait_progress_every ",
        absl::FormatDuration(options.wait_progress_every),
        " must be positive"));
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

absl::Status WaitForPeers(
    Store& group_store, const RendezvousOptions& options,
    const std::function<void(const std::string&)>& progress) {
  RETURN_IF_ERROR(group_store.Set(
      absl::StrCat(kJoinedKey, options.rank), "1"));
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + options.connect_timeout;
  absl::Time next_report = start + options.wait_progress_every;
  std::vector<bool> joined(options.world_size, false);
  absl::Duration poll = absl::Milliseconds(5);
  while (true) {
    std::vector<int> present, missing;
    for (int rank = 0; rank < options.world_size; ++rank) {
      if (!joined[rank]) {
        ASSIGN_OR_RETURN(joined[rank],
                         group_store.Check(absl::StrCat(kJoinedKey, rank)));
      }
      (joined[rank] ? present : missing).push_back(rank);
    }
    if (missing.empty()) return absl::OkStatus();
    const absl::Time now = absl::Now();
    const std::string status_line = absl::StrCat(
        present.size(), " of ", options.world_size, " ranks joined (",
        RankList(present), "); missing ", RankList(missing));
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "rendezvous on ", group_store.DebugString(), ": rank ",
          options.rank, " waited ",
          absl::FormatDuration(options.connect_timeout),
          " (--connect_timeout) and ", status_line));
    }
    if (now >= next_report) {
      const std::string line = absl::StrCat(
          "rank ", options.rank, " waiting for peers after ",
          absl::FormatDuration(absl::Trunc(now - start, absl::Seconds(1))),
          ": ", status_line);
      if (progress) {
        progress(line);
      } else {
        LOG(WARNING) << line;
      }
      next_report = now + options.wait_progress_every;
    }
    absl::SleepFor(std::min({poll, deadline - now, next_report - now}));
    poll = std::min(poll * 2, absl::Milliseconds(100));
  }
}

CommunicatorOptions CommunicatorOptionsFor(const RendezvousOptions& options) {
  CommunicatorOptions communicator_options;
  communicator_options.rank = options.rank;
  communicator_options.world_size = options.world_size;
  communicator_options.timeout = options.first_step_timeout;
  communicator_options.gloo_interface = options.gloo_interface;
  communicator_options.gloo_hostname = options.gloo_hostname;
  communicator_options.keep_records = options.keep_records;
  communicator_options.reduce_scatter_chunk_bytes =
      options.reduce_scatter_chunk_bytes;
  communicator_options.reduce_scatter_depth = options.reduce_scatter_depth;
  communicator_options.transport = options.transport;
  communicator_options.shm_slot_bytes = options.shm_slot_bytes;
  if (communicator_options.gloo_interface.empty() &&
      communicator_options.gloo_hostname.empty() &&
      IsLoopback(options.master_addr)) {
    const char* env = std::getenv("GLOO_SOCKET_IFNAME");
    if (env == nullptr || *env == '\0') {
      communicator_options.gloo_hostname = "127.0.0.1";
    }
  }
  return communicator_options;
}

absl::StatusOr<std::unique_ptr<Communicator>> JoinGroup(
    const Store& store, const RendezvousOptions& options) {
  RETURN_IF_ERROR(ValidateRendezvousOptions(options));
  Store group_store = store.WithPrefix(options.group_name);
  RETURN_IF_ERROR(WaitForPeers(group_store, options));
  const CommunicatorOptions communicator_options =
      CommunicatorOptionsFor(options);
  absl::StatusOr<std::unique_ptr<Communicator>> communicator =
      Communicator::Create(group_store, communicator_options);
  if (!communicator.ok()) {
    return Annotate(communicator.status(),
                    absl::StrCat("rendezvous of group '", options.group_name,
                                 "' through ", store.DebugString()));
  }
  FlightIdentity identity;
  identity.rank = options.rank;
  identity.world_size = options.world_size;
  identity.group = options.group_name;
  identity.run_id = options.run_id;
  identity.attempt = options.attempt;
  (*communicator)->flight_recorder().SetIdentity(identity);
  if (!options.flight_recorder_dir.empty()) {
    (*communicator)->EnableFlightRecorderDumps(absl::StrCat(
        options.flight_recorder_dir, "/", FlightDumpFileName(identity)));
  }
  if (options.heartbeat_fd >= 0) {
    (*communicator)->StartHeartbeat(options.heartbeat_fd, options.heartbeat_interval);
  }
  return communicator;
}

absl::StatusOr<std::unique_ptr<Communicator>> Rendezvous(
    const RendezvousOptions& options) {
  ASSIGN_OR_RETURN(Store store, ConnectStore(options));
  return JoinGroup(store, options);
}

}  // namespace mtb::collective
