// Internal to common/collective: the ProcessGroupGloo factory and the Gloo transport
// device. Includes ProcessGroupGloo.hpp (~6.6 s per translation unit), so only
// .cc files of this package include it; tools see communicator.h.
#ifndef MTB_COMMON_COLLECTIVE_PROCESS_GROUP_H_
#define MTB_COMMON_COLLECTIVE_PROCESS_GROUP_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/context.h"
#include "torch/csrc/distributed/c10d/ProcessGroupGloo.hpp"
#include "torch/csrc/distributed/c10d/Store.hpp"

namespace mtb::collective {

// Where Gloo binds its sockets, first match wins: `interface` (a name such as
// "eth0", or a comma-separated list: one device each); `hostname` (an address
// or name to bind); the GLOO_SOCKET_IFNAME environment variable (as
// torch.distributed reads it); else c10d's default device (this host's name,
// falling back to loopback).
struct GlooDeviceSpec {
  std::string interface;
  std::string hostname;
};

struct GlooDevices {
  std::vector<std::shared_ptr<::gloo::transport::Device>> devices;
  // "interface eth0", "hostname 127.0.0.1", "GLOO_SOCKET_IFNAME=eth0",
  // "default device".
  std::string description;
};

absl::StatusOr<GlooDevices> MakeGlooDevices(const GlooDeviceSpec& spec);

// ProcessGroupGloo whose timeout can be changed after creation.
//
// c10d 1.13 copies Options::timeout into each gloo context when the group is
// built, and every collective reads its timeout from the context; send/recv
// read it from the context's transport context (the unbound buffers' unset
// timeout), which took the context's value when the group was built.
// SetTimeout therefore sets the contexts' timeouts (a protected member, hence
// the subclass), their transport contexts' and Options::timeout. Tested in
// communicator_timeout_test.cc.
class GlooProcessGroup : public c10d::ProcessGroupGloo {
 public:
  using ProcessGroupGloo::ProcessGroupGloo;
  // Not while a collective is in flight: the worker threads read the value
  // when an operation starts.
  void SetTimeout(std::chrono::milliseconds timeout);
};

// Builds the group: a collective call (every rank must call it; it connects a
// full mesh through `store` and returns when all ranks have). Errors name the
// rank, the world size and the device.
absl::StatusOr<c10::intrusive_ptr<GlooProcessGroup>> CreateGlooProcessGroup(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
    absl::Duration timeout, const GlooDevices& devices);

// A plain gloo context (for Gloo's own algorithms that c10d does not expose,
// e.g. gloo::ReduceScatterHalvingDoubling) connected through `store` on the
// first device. Collective, like CreateGlooProcessGroup. The context's pairs
// keep `timeout` for life.
absl::StatusOr<std::shared_ptr<::gloo::rendezvous::Context>> CreateGlooContext(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
    absl::Duration timeout, const GlooDevices& devices);

inline std::chrono::milliseconds ToChronoMs(absl::Duration d) {
  return std::chrono::milliseconds(absl::ToInt64Milliseconds(d));
}

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_PROCESS_GROUP_H_
