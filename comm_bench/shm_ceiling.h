// The intra-host ceiling of the shared-memory transport (docs/comm_bench.md,
// "Ceiling"), measured inside comm_bench's sweep (harness.cc) for every op
// and size, by the rank processes themselves, on the same cores and buffers
// as the op, just before the op's rows.
//
// What is measured is the least data movement the op needs when the ranks'
// buffers are private and only a shared region is common: each rank copies
// into the region what its peers need of its input and nothing else (never
// its own slice or block), reduces only its own slice, reading its own part
// from its private input, and copies out only what comes from its peers. No
// waits, no checks, no phase ordering, except broadcast's: there the readers
// copy out only what the root has copied in, piece by piece in the
// transport's piece size, overlapped with the root's copy in (what the
// transport's pipelined broadcast does; docs/comm_bench.md, "Ceiling", says
// why this bounds). Every correct shared-memory collective does at least
// this work on every rank, so its time on a rank is at least that rank's
// time here; the ceiling's time is the mean over ranks of each rank's best
// run (the op's time is the mean over ranks of its loop mean; broadcast's:
// the slowest rank's, ShmCeilingSeconds), which no correct op can beat
// beyond timing noise.
#ifndef MTB_COMM_BENCH_SHM_CEILING_H_
#define MTB_COMM_BENCH_SHM_CEILING_H_

#include <cstdint>
#include <string>
#include <vector>

namespace mtb::comm_bench {

// The data moves stream through a ring of two chunks per rank in the region,
// as the transport's slots do; a header of two cache lines per rank after
// them carries broadcast's progress words (the region starts zeroed).
struct ShmCeilingWork {
  int world_size = 1;
  int rank = 0;
  int64_t chunk_bytes = int64_t{1} << 20;  // one rank's chunk, a multiple of 64
  char* shared = nullptr;                  // ShmCeilingSharedBytes bytes
  // float32 adds for float32 sweeps; int32 adds (the same vector width) for
  // other dtypes, whose bits read as float32 could be subnormal.
  bool float_sum = true;
};

int64_t ShmCeilingSharedBytes(int world_size, int64_t chunk_bytes);

// The piece a broadcast's chunk is copied in and out by: 1/16 of the chunk,
// a multiple of 64 bytes, at least 64 (as the transport's broadcast splits
// its slot; 64 KiB of a 1 MiB chunk).
int64_t ShmCeilingBroadcastPieceBytes(int64_t chunk_bytes);

// One call: nccl-tests' size S and, for all_to_all(v), the bytes this rank
// sends to and receives from each peer (packed in rank order).
struct ShmCeilingCall {
  std::string op;  // all_reduce, reduce_scatter, all_gather, broadcast, all_to_all(v)
  int64_t bytes = 0;
  int root = 0;
  std::vector<int64_t> send_bytes;
  std::vector<int64_t> recv_bytes;
};

// This rank's share of the ceiling's work for `call`: reads `in` and writes
// `out` (the op's out-of-place send and receive buffers), `step` counts
// chunks across calls (the same on every rank: every rank makes the same
// calls). A broadcast's ranks wait for each other (the readers for the
// root's pieces, the root for its ring), so every rank of the region must
// make the call; other ops never wait.
void RunShmCeilingWork(const ShmCeilingWork& work, const ShmCeilingCall& call, const char* in,
                       char* out, int64_t* step);

// The ceiling's time per call from each rank's best time (in rank order):
// their mean, as the op's row is the mean over ranks of its loop; for
// broadcast the slowest rank's (a reader's, which copies out behind the
// root: with the copies overlapped, the slower side bounds). In the op the
// root, paced by its ring, runs at the readers' pace over a loop of calls;
// in one measured call nothing paces it, so its time here would be its copy
// in alone. 0 without ranks.
double ShmCeilingSeconds(const std::string& op, const std::vector<double>& rank_best_seconds);

// What the work moves, in words ("copy in (n-1)S/n, ...").
std::string ShmCeilingShapeText(const std::string& op);

// The op whose shape `op` shares (all_to_allv: all_to_all), or "" if none.
std::string ShmCeilingShapeOf(const std::string& op);

}  // namespace mtb::comm_bench

#endif  // MTB_COMM_BENCH_SHM_CEILING_H_
