// Joining a group of ranks: connect to (or host) the c10d::TCPStore at
// MASTER_ADDR:MASTER_PORT, then build the Gloo communicator on a per-group
// prefix of it. The options are a plain struct; RendezvousOptionsFor
// (common/launch/rendezvous_env.h) fills it from a RankEnv (common/launch/rank_env.h:
// torchrun's RANK, WORLD_SIZE, MASTER_ADDR, ...).
#ifndef MTB_COMMON_COLLECTIVE_RENDEZVOUS_H_
#define MTB_COMMON_COLLECTIVE_RENDEZVOUS_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/collective/communicator.h"
#include "common/collective/store.h"

namespace mtb::collective {

struct RendezvousOptions {
  int rank = -1;
  int world_size = 0;
  std::string master_addr = "127.0.0.1";
  // 0 only with is_server: the OS picks a free port (Store::tcp_port()).
  int master_port = 29500;
  // Host the TCPStore server in this process (our launcher, or rank 0 when
  // another launcher started the ranks). The other ranks connect as clients.
  bool is_server = false;
  // How long to keep trying to reach the store (c10d retries about once a
  // second, so keep it >= 2 s), and to wait for every rank to publish its
  // address.
  absl::Duration connect_timeout = absl::Minutes(5);
  // Per-collective timeout the communicator starts with, generous: it covers
  // the first step's start-up costs (common/launch/timeouts.h).
  absl::Duration first_step_timeout = absl::Minutes(10);
  // The steady-state per-collective timeout: not applied here; the tool sets
  // it with Communicator::SetTimeout once its first step has completed.
  absl::Duration collective_timeout = absl::Minutes(5);
  // While waiting for peers to join, how often to say who has joined and who
  // is missing.
  absl::Duration wait_progress_every = absl::Seconds(10);
  // Groups on one store need distinct names.
  std::string group_name = "world";
  // Where Gloo binds (CommunicatorOptions): empty means GLOO_SOCKET_IFNAME,
  // then 127.0.0.1 when master_addr is a loopback address, then c10d's
  // default device.
  std::string gloo_interface;
  std::string gloo_hostname;
  // CommunicatorOptions::keep_records: false keeps only the totals, for
  // tools that issue many collectives and never read the records (a
  // benchmark sweep, a long training run); the observer still sees each one.
  bool keep_records = true;
  // CommunicatorOptions::reduce_scatter_chunk_bytes and _depth.
  int64_t reduce_scatter_chunk_bytes =
      CommunicatorOptions().reduce_scatter_chunk_bytes;
  int reduce_scatter_depth = CommunicatorOptions().reduce_scatter_depth;
  // The flight recorder (flight_recorder.h): the job's id and restart count
  // name its dumps; with a folder, it is dumped there
  // (FlightDumpFileName) at the communicator's first failure, on SIGTERM and
  // on fatal signals; empty: no dumps.
  std::string run_id = "none";
  int attempt = 0;
  std::string flight_recorder_dir;
  // CommunicatorOptions::transport and shm_slot_bytes (--transport).
  Transport transport = Transport::kAuto;
  int64_t shm_slot_bytes = CommunicatorOptions().shm_slot_bytes;
  // A launcher's heartbeat pipe (heartbeat.h), or -1; the communicator
  // sends on it every heartbeat_interval and owns it.
  int heartbeat_fd = -1;
  absl::Duration heartbeat_interval = absl::Seconds(1);
};

// Checks the fields (ranks, port, timeouts) without touching the network:
// kInvalidArgument naming the field, its value and the rule.
absl::Status ValidateRendezvousOptions(const RendezvousOptions& options);

// Connects to, or with is_server hosts, the TCPStore. Errors (kDeadlineExceeded
// after connect_timeout) name the address, the rank and the timeout.
absl::StatusOr<Store> ConnectStore(const RendezvousOptions& options);

// Every rank announces itself on `group_store` and waits until all
// world_size ranks have, calling `progress` (LOG(WARNING) when empty) at
// least every wait_progress_every with who has joined and who is missing.
// kDeadlineExceeded after connect_timeout naming how many ranks joined out
// of how many, and which are missing. Collective over the store only.
absl::Status WaitForPeers(
    Store& group_store, const RendezvousOptions& options,
    const std::function<void(const std::string&)>& progress = nullptr);

// The communicator options JoinGroup builds the group with (rank, world
// size, first_step_timeout, interface, transport, ...): also what a rank mesh
// (mesh.h) builds its groups from.
CommunicatorOptions CommunicatorOptionsFor(const RendezvousOptions& options);

// WaitForPeers, then builds this rank's communicator on
// store.WithPrefix(group_name) with first_step_timeout.
// Collective: every rank of the group calls it.
absl::StatusOr<std::unique_ptr<Communicator>> JoinGroup(
    const Store& store, const RendezvousOptions& options);

// ConnectStore + JoinGroup. The communicator keeps the store (and, on the
// server, the TCPStore server) alive.
absl::StatusOr<std::unique_ptr<Communicator>> Rendezvous(
    const RendezvousOptions& options);

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_RENDEZVOUS_H_
