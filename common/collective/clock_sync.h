// How far each rank's clock is from rank 0's, estimated through the group's
// store at start so that traces from several hosts can be put on one
// timeline (NTP's idea, over the TCPStore): several ping/pong round trips,
// the offset from the round trip with the smallest RTT, whose error is at
// most half that RTT.
#ifndef MTB_COMMON_COLLECTIVE_CLOCK_SYNC_H_
#define MTB_COMMON_COLLECTIVE_CLOCK_SYNC_H_

#include <cstdint>
#include <functional>
#include <vector>

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

// One ping/pong round trip, in whole microseconds: when this rank sent the
// ping and got the answer (its clock), and rank 0's clock in the answer.
struct ClockSample {
  int64_t sent_us = 0;
  int64_t server_us = 0;
  int64_t received_us = 0;
};

// The estimate from the sample with the smallest round trip (the first of
// equals): offset = server - (sent + received) / 2, rtt = received - sent.
// Exact in double for times below 2^53 us. Needs at least one sample.
ClockOffset BestClockOffset(const std::vector<ClockSample>& samples);

// This rank's clock in whole microseconds since the epoch (tests give ranks
// clocks that disagree, as on different hosts).
using ClockUs = std::function<int64_t()>;
int64_t SystemClockUs();

// Collective over the store: every rank calls it with the same `rounds`
// (rank 0 answers every other rank's pings; its own offset is 0). Keys live
// under "clock_sync/" of `store`; call it once per store prefix.
absl::StatusOr<ClockOffset> EstimateClockOffset(const Store& store, int rank,
                                                int world_size, int rounds,
                                                absl::Duration timeout,
                                                const ClockUs& now_us = SystemClockUs);

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_CLOCK_SYNC_H_
