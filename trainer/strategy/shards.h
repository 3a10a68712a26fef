// How the sharded strategies (zero1, zero2, fsdp) cut a run of flat elements
// into one shard per rank, in one place so that every strategy — and
// checkpoints, which record who owns what — agree. Torch-free.
#ifndef MTB_TRAINER_STRATEGY_SHARDS_H_
#define MTB_TRAINER_STRATEGY_SHARDS_H_

#include <cstdint>
#include <vector>

namespace mtb {

// n shards of `numel` elements, in rank order: the first numel % n ranks own
// one element more (sizes differ by at most one; the uneven collectives move
// these exact counts, so there is no padding).
std::vector<int64_t> ShardCounts(int64_t numel, int n);

// Rank `rank`'s first element: the sum of the counts before it.
int64_t ShardOffset(const std::vector<int64_t>& counts, int rank);

}  // namespace mtb

#endif  // MTB_TRAINER_STRATEGY_SHARDS_H_
