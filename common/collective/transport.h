// Which wire the collectives use (docs/collective.md, "Shared memory: ranks on
// one host"). Torch-free, so tools can take it as a flag
// (transport_flag.h) without LibTorch.
#ifndef MTB_COMMON_COLLECTIVE_TRANSPORT_H_
#define MTB_COMMON_COLLECTIVE_TRANSPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mtb::collective {

// Every rank of a communicator must pass the same one.
enum class Transport {
  // Shared memory when every rank shares this rank's host identity
  // (hostname, boot id, network namespace), else Gloo over TCP.
  kAuto,
  // Shared memory; Communicator::Create fails when the ranks are on more
  // than one host.
  kShm,
  // Gloo over TCP for everything (the transport before shared memory).
  kTcp,
};
absl::string_view TransportName(Transport transport);
// "auto", "shm", "tcp" (flag values); kInvalidArgument naming the choices.
absl::StatusOr<Transport> ParseTransport(absl::string_view name);

// For ABSL_FLAG(Transport, ...): an unknown value fails the command line.
bool AbslParseFlag(absl::string_view text, Transport* transport, std::string* error);
std::string AbslUnparseFlag(Transport transport);

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_TRANSPORT_H_
