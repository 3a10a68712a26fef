#include "common/collective/transport_flag.h"

#include "absl/flags/flag.h"

ABSL_FLAG(mtb::collective::Transport, transport, mtb::collective::Transport::kAuto,
          "What the collectives run on: auto (shared memory when every rank is on this "
          "host, else Gloo over TCP), shm or tcp (docs/collective.md).");
