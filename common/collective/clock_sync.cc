#include "common/collective/clock_sync.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/status.h"

namespace mtb::collective {
namespace {

// Whole microseconds since the epoch: exact as text and in a double.
int64_t NowUs() { return absl::ToInt64Microseconds(absl::Now() - absl::UnixEpoch()); }

std::string Key(int rank, int round, const char* what) {
  return absl::StrCat("clock_sync/", rank, "/", round, "/", what);
}

}  // namespace

absl::StatusOr<ClockOffset> EstimateClockOffset(const Store& store, int rank,
                                                int world_size, int rounds,
                                                absl::Duration timeout) {
  Store clock = store;
  if (rank == 0) {
    // Round-major, so every rank's k-th ping is answered before anyone's
    // (k+1)-th: no rank waits behind all the rounds of another.
    for (int round = 0; round < rounds; ++round) {
      for (int peer = 1; peer < world_size; ++peer) {
        RETURN_IF_ERROR(clock.Get(Key(peer, round, "ping"), timeout).status());
        RETURN_IF_ERROR(clock.Set(Key(peer, round, "pong"), absl::StrCat(NowUs())));
      }
    }
    return ClockOffset{};
  }
  ClockOffset best;
  best.rtt_us = std::numeric_limits<double>::infinity();
  for (int round = 0; round < rounds; ++round) {
    const double sent = static_cast<double>(NowUs());
    RETURN_IF_ERROR(clock.Set(Key(rank, round, "ping"), "1"));
    ASSIGN_OR_RETURN(const std::string answer, clock.Get(Key(rank, round, "pong"), timeout));
    const double received = static_cast<double>(NowUs());
    int64_t server_us = 0;
    if (!absl::SimpleAtoi(answer, &server_us)) {
      return absl::DataLossError(absl::StrCat("clock sync: bad answer '", answer, "'"));
    }
    const double rtt = received - sent;
    if (rtt < best.rtt_us) {
      best.rtt_us = rtt;
      best.offset_us = static_cast<double>(server_us) - (sent + received) / 2;
    }
  }
  return best;
}

}  // namespace mtb::collective
