// Multi-rank tests without processes (the rank is a parameter, not a
// process): N ranks as N threads of the test, each with its own
// Communicator over one in-process store and Gloo on 127.0.0.1.
//
// Threads share the process: the global generator, the CPU allocator and
// LibTorch's intra-op pool. Draw randomness from RankGenerator, never from the
// global generator.
#ifndef MTB_COMMON_COLLECTIVE_TEST_UTIL_H_
#define MTB_COMMON_COLLECTIVE_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <string>

#include "ATen/core/Generator.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/collective/communicator.h"

namespace mtb::collective {

struct ThreadRanksOptions {
  // Collective and rendezvous timeout: short, so that a test whose ranks
  // disagree fails in seconds instead of hanging.
  absl::Duration timeout = absl::Seconds(30);
  ReduceScatterAlgorithm reduce_scatter_algorithm =
      ReduceScatterAlgorithm::kAuto;
  int64_t reduce_scatter_chunk_bytes =
      CommunicatorOptions().reduce_scatter_chunk_bytes;
  int reduce_scatter_depth = CommunicatorOptions().reduce_scatter_depth;
  AllGatherAlgorithm all_gather_algorithm = AllGatherAlgorithm::kAuto;
  AllReduceAlgorithm all_reduce_algorithm = AllReduceAlgorithm::kAuto;
  // Gloo unless a test asks for shared memory: the thread tests of the Gloo
  // algorithms predate it (threads of one process share a host, so kAuto
  // would pick shared memory).
  Transport transport = Transport::kTcp;
  // Per rank (rank -> host identity) to put thread ranks on different
  // "hosts"; empty: the real one.
  std::function<std::string(int)> host_id;
  bool testonly_shm_misassign_slices = false;
  int64_t shm_slot_bytes = CommunicatorOptions().shm_slot_bytes;
  int shm_slots = CommunicatorOptions().shm_slots;
};

// Runs body(communicator) on world_size threads, one per rank, and returns
// when all have finished. Each thread logs as its rank (ScopedThreadLogRank).
// Communicators are destroyed only after every body has returned, so a rank
// that finishes early never closes connections its peers still use.
//
// gtest assertions inside `body` are reported by gtest from any thread (it is
// thread-safe with pthreads); an ASSERT_* returns from that rank's body only.
// Returns non-OK when a communicator could not be created or a body threw,
// naming the rank.
absl::Status RunRanksAsThreads(int world_size,
                               const std::function<void(Communicator&)>& body,
                               const ThreadRanksOptions& options = {});

// A CPU generator private to (seed, rank): per-rank explicit randomness.
// Distinct ranks and distinct seeds give distinct streams.
at::Generator RankGenerator(uint64_t seed, int rank);

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_TEST_UTIL_H_
