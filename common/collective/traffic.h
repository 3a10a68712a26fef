// The byte model every collective record uses: how many bytes this rank sends
// and receives for one call, and nccl-tests' bus-bandwidth factor.
//
// Vocabulary. n is the world size. S is the size in bytes of the collective's
// buffer under nccl-tests' convention: the tensor for all_reduce, broadcast,
// send and recv; the whole gathered output for all_gather; the whole input for
// reduce_scatter and all_to_all (doc/PERFORMANCE.md in nccl-tests). The bytes a
// rank sends and receives are those of a bandwidth-optimal algorithm of the
// kind actually run: a ring or pairwise exchange moves (n-1)/n of S per rank
// for all_gather, reduce_scatter and all_to_all and 2(n-1)/n of S for
// all_reduce, which is also what nccl-tests' busbw assumes. The uneven ("v")
// variants and broadcast count the exact bytes to and from other ranks; bytes a
// rank keeps for itself are never counted. docs/collective.md has the table.
//
// Torch-free and Gloo-free, so comm_bench_nccl can share it.
#ifndef MTB_COMMON_COLLECTIVE_TRAFFIC_H_
#define MTB_COMMON_COLLECTIVE_TRAFFIC_H_

#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"

namespace mtb::collective {

enum class CollectiveOp {
  kAllReduce,
  kBroadcast,
  kAllGather,   // flat and list forms: every rank contributes equally
  kAllGatherV,  // per-rank counts along dim 0
  kReduceScatter,
  kReduceScatterV,  // per-rank counts along dim 0
  kAllToAll,        // equal splits
  kAllToAllV,       // per-peer send and receive counts along dim 0
  kBarrier,
  kSend,
  kRecv,
};

// "all_reduce", "all_gather_v", "all_to_allv", ... (nccl-tests' names where
// they exist; used in records, traces and error messages).
absl::string_view CollectiveOpName(CollectiveOp op);

struct Traffic {
  int64_t sent = 0;
  int64_t received = 0;
};

// nccl-tests' busbw = algbw * factor: all_reduce 2(n-1)/n; all_gather,
// reduce_scatter and all_to_all(v) (n-1)/n; broadcast, send, recv 1; barrier 0.
double BusBandwidthFactor(CollectiveOp op, int world_size);

// 2(n-1)/n * S each way, rounded down to whole bytes (S need not divide by n).
Traffic AllReduceTraffic(int64_t bytes, int world_size);
// S = the whole output: (n-1)/n * S each way, that is (n-1) * input bytes.
Traffic AllGatherTraffic(int64_t output_bytes, int world_size);
// S = the whole input: (n-1)/n * S each way, that is (n-1) * output bytes.
Traffic ReduceScatterTraffic(int64_t input_bytes, int world_size);
// S = the whole input: (n-1)/n * S each way.
Traffic AllToAllTraffic(int64_t input_bytes, int world_size);
// The root sends S once (what a pipelined or tree broadcast sends per rank);
// every other rank receives S. Zero for n = 1.
Traffic BroadcastTraffic(int64_t bytes, int world_size, int rank, int root);
// Exact: rows this rank sends to and receives from other ranks, times
// row_bytes. send_counts[p] rows go to rank p, recv_counts[p] come from it.
Traffic AllToAllVTraffic(const std::vector<int64_t>& send_counts,
                         const std::vector<int64_t>& recv_counts,
                         int64_t row_bytes, int rank);
// Exact: counts[p] rows are rank p's contribution. This rank sends its own
// rows to each of the n-1 others and receives everyone else's.
Traffic AllGatherVTraffic(const std::vector<int64_t>& counts, int64_t row_bytes,
                          int rank);
// Exact: counts[p] rows of the input are reduced onto rank p. This rank sends
// every other rank's rows once and receives its own rows from n-1 ranks.
Traffic ReduceScatterVTraffic(const std::vector<int64_t>& counts,
                              int64_t row_bytes, int rank);
Traffic SendTraffic(int64_t bytes);
Traffic RecvTraffic(int64_t bytes);

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_TRAFFIC_H_
