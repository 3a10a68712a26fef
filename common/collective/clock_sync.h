// How far each rank's clock is from rank 0's, estimated through the group's
// store at start so that traces from several hosts can be put on one
// timeline (NTP's idea, over the TCPStore): several ping/pong round trips,
// the offset from the round trip with the smallest RTT, whose error is at
// most half that RTT.
#ifndef MTB_COMMON_COLLECTIVE_CLOCK_SYNC_H_
#define MTB_COMMON_COLLECTIVE_CLOCK_SYNC_H_

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/collective/store.h"

namespace mtb::collective {

struct ClockOffset {
  // Add to this rank's absl::Now() (in microseconds) to get rank 0's.
  double offset_us = 0;
  // The round trip the estimate came from; |error| <= rtt_us / 2.
  double rtt_us = 0;
};

// Collective over the store: every rank calls it with the same `rounds`
// (rank 0 answers every other rank's pings; its own offset is 0). Keys live
// under "clock_sync/" of `store`; call it once per store prefix.
absl::StatusOr<ClockOffset> EstimateClockOffset(const Store& store, int rank,
                                                int world_size, int rounds,
                                                absl::Duration timeout);

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_CLOCK_SYNC_H_
