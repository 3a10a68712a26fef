#include "common/collective/transport.h"

#include "absl/strings/str_cat.h"

namespace mtb::collective {

absl::string_view TransportName(Transport transport) {
  switch (transport) {
    case Transport::kAuto:
      return "auto";
    case Transport::kShm:
      return "shm";
    case Transport::kTcp:
      return "tcp";
  }
  return "unknown";
}

absl::StatusOr<Transport> ParseTransport(absl::string_view name) {
  for (Transport transport : {Transport::kAuto, Transport::kShm, Transport::kTcp}) {
    if (TransportName(transport) == name) return transport;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown transport '", name, "'; expected auto, shm or tcp"));
}

bool AbslParseFlag(absl::string_view text, Transport* transport, std::string* error) {
  absl::StatusOr<Transport> parsed = ParseTransport(text);
  if (!parsed.ok()) {
    *error = std::string(parsed.status().message());
    return false;
  }
  *transport = *parsed;
  return true;
}

std::string AbslUnparseFlag(Transport transport) { return std::string(TransportName(transport)); }

}  // namespace mtb::collective
