// The shared-memory ceiling's work (shm_ceiling.h). Vocabulary as in the
// transport: the region holds two chunks per rank, then a header of two
// cache lines per rank; chunk t of a rank's stream lands in its chunk t % 2;
// a chunk is split in n *parts* as the transport splits its slots (the first
// count % n parts one element longer).
#include "comm_bench/shm_ceiling.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "common/collective/shm_reduce.h"

namespace mtb::comm_bench {
namespace {

using collective::ShmDtype;
using collective::ShmReduce;
using collective::ShmReduceOp;

constexpr int64_t kElement = 4;  // float32 or int32
// Per rank: one cache line for the broadcast progress it publishes as a root,
// one for the chunks it has finished as a reader (never the same line, so
// the root's stores and a reader's do not share one).
constexpr int64_t kHeaderBytesPerRank = 128;
// The transport's broadcast splits each slot in this many pieces
// (kBroadcastPieces in common/collective/shm_transport.cc, private to that
// file, which this tool must not change); stated once here.
constexpr int64_t kBroadcastPiecesPerChunk = 16;
// A waiter gives up (and aborts the rank, naming the peer) after this long:
// the ceiling has no deadline of its own and a dead peer must not hang it.
constexpr auto kGiveUp = std::chrono::seconds(60);

// Line `line` of `rank`'s header, after every rank's chunks (so the chunks
// sit where they sat before the header existed).
std::atomic<uint64_t>* Word(const ShmCeilingWork& work, int rank, int line) {
  return reinterpret_cast<std::atomic<uint64_t>*>(
      work.shared + work.world_size * 2 * work.chunk_bytes + rank * kHeaderBytesPerRank +
      line * 64);
}

// Waits until `word` >= `value`: spins, then yields (a rank waiting for a
// peer on an oversubscribed host gives it the core, as the transport's
// futex sleep does).
void Await(const std::atomic<uint64_t>& word, uint64_t value, int me, int peer) {
  for (int spin = 0; spin < 4000; ++spin) {
    if (word.load(std::memory_order_acquire) >= value) return;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
  const auto start = std::chrono::steady_clock::now();
  for (int64_t round = 1; word.load(std::memory_order_acquire) < value; ++round) {
    sched_yield();
    if (round % 4096 == 0 && std::chrono::steady_clock::now() - start > kGiveUp) {
      std::fprintf(stderr, "shm ceiling: rank %d waited 60 s for rank %d's broadcast; giving up\n",
                   me, peer);
      std::abort();
    }
  }
}

std::pair<int64_t, int64_t> Split(int64_t count, int parts, int index) {
  const int64_t base = count / parts;
  const int64_t extra = count % parts;
  return {index * base + std::min<int64_t>(index, extra), base + (index < extra ? 1 : 0)};
}

class Worker {
 public:
  Worker(const ShmCeilingWork& work, int64_t* step) : w_(work), step_(*step) {}

  char* Chunk(int rank) const {
    return w_.shared + (rank * 2 + step_ % 2) * w_.chunk_bytes;
  }
  void Next() { ++step_; }
  void Reduce(void* out, const std::vector<const void*>& inputs, int64_t count) const {
    ShmReduce(out, inputs.data(), static_cast<int>(inputs.size()), count,
              w_.float_sum ? ShmDtype::kFloat32 : ShmDtype::kInt32, ShmReduceOp::kSum);
  }

  void AllReduce(const char* in, char* out, int64_t bytes) {
    const int n = w_.world_size, me = w_.rank;
    const int64_t count = bytes / kElement;
    const int64_t chunk_count = w_.chunk_bytes / kElement;
    std::vector<const void*> inputs(n);
    for (int64_t offset = 0; offset < count; offset += chunk_count, Next()) {
      const int64_t chunk = std::min(chunk_count, count - offset);
      for (int p = 0; p < n; ++p) {
        if (p == me) continue;
        const auto [begin, length] = Split(chunk, n, p);
        std::memcpy(Chunk(me) + begin * kElement, in + (offset + begin) * kElement,
                    length * kElement);
      }
      const auto [begin, length] = Split(chunk, n, me);
      for (int p = 0; p < n; ++p) {
        inputs[p] = p == me ? in + (offset + begin) * kElement : Chunk(p) + begin * kElement;
      }
      Reduce(Chunk(me) + begin * kElement, inputs, length);
      for (int p = 0; p < n; ++p) {
        if (p == me) continue;
        const auto [part_begin, part_length] = Split(chunk, n, p);
        std::memcpy(out + (offset + part_begin) * kElement, Chunk(p) + part_begin * kElement,
                    part_length * kElement);
      }
    }
  }

  void ReduceScatter(const char* in, char* out, int64_t bytes) {
    const int n = w_.world_size, me = w_.rank;
    const int64_t block = bytes / n / kElement;
    const int64_t sub = w_.chunk_bytes / n / kElement;
    std::vector<const void*> inputs(n);
    for (int64_t offset = 0; offset < block; offset += sub, Next()) {
      const int64_t length = std::min(sub, block - offset);
      for (int p = 0; p < n; ++p) {
        if (p == me) continue;
        std::memcpy(Chunk(me) + p * sub * kElement, in + (p * block + offset) * kElement,
                    length * kElement);
      }
      for (int q = 0; q < n; ++q) {
        inputs[q] =
            q == me ? in + (me * block + offset) * kElement : Chunk(q) + me * sub * kElement;
      }
      Reduce(out + offset * kElement, inputs, length);
    }
  }

  void AllGather(const char* in, char* out, int64_t bytes) {
    const int n = w_.world_size, me = w_.rank;
    const int64_t block = bytes / n;
    for (int64_t offset = 0; offset < block; offset += w_.chunk_bytes, Next()) {
      const int64_t length = std::min(w_.chunk_bytes, block - offset);
      std::memcpy(Chunk(me), in + offset, length);
      for (int p = 0; p < n; ++p) {
        if (p != me) std::memcpy(out + p * block + offset, Chunk(p), length);
      }
    }
  }

  // As the transport's broadcast: the root copies each chunk into its slot
  // piece by piece and publishes (step << 24) | pieces done after each; a
  // reader copies piece k out once the root has published it, so the copy
  // in and the copies out of the same chunk overlap, one piece apart. The
  // root reuses a chunk of its ring only when every reader has finished
  // the chunk that was in it (two chunks back within this call; earlier
  // calls are behind the harness's barrier).
  void Broadcast(const char* in, char* out, int64_t bytes, int root) {
    const int n = w_.world_size, me = w_.rank;
    const int64_t piece = ShmCeilingBroadcastPieceBytes(w_.chunk_bytes);
    std::atomic<uint64_t>* progress = Word(w_, root, 0);
    int64_t index = 0;
    for (int64_t offset = 0; offset < bytes; offset += w_.chunk_bytes, ++index, Next()) {
      const int64_t length = std::min(w_.chunk_bytes, bytes - offset);
      const uint64_t step = static_cast<uint64_t>(step_) + 1;  // > 0, the same on every rank
      uint64_t done = 0;
      if (me == root) {
        if (index >= 2) {
          for (int p = 0; p < n; ++p) {
            if (p != root) Await(*Word(w_, p, 1), step - 2, me, p);
          }
        }
        for (int64_t at = 0; at < length; at += piece) {
          std::memcpy(Chunk(root) + at, in + offset + at, std::min(piece, length - at));
          progress->store((step << 24) | ++done, std::memory_order_release);
        }
      } else {
        for (int64_t at = 0; at < length; at += piece) {
          Await(*progress, (step << 24) | ++done, me, root);
          std::memcpy(out + offset + at, Chunk(root) + at, std::min(piece, length - at));
        }
        Word(w_, me, 1)->store(step, std::memory_order_release);
      }
    }
  }

  void AllToAll(const char* in, char* out, const std::vector<int64_t>& send_bytes,
                const std::vector<int64_t>& recv_bytes) {
    const int n = w_.world_size, me = w_.rank;
    const int64_t sub = w_.chunk_bytes / n / 64 * 64;
    std::vector<int64_t> send_at(n, 0), recv_at(n, 0);
    int64_t longest = 0;
    for (int p = 0; p < n; ++p) {
      if (p > 0) {
        send_at[p] = send_at[p - 1] + send_bytes[p - 1];
        recv_at[p] = recv_at[p - 1] + recv_bytes[p - 1];
      }
      if (p != me) longest = std::max({longest, send_bytes[p], recv_bytes[p]});
    }
    for (int64_t offset = 0; offset < longest; offset += sub, Next()) {
      for (int p = 0; p < n; ++p) {
        const int64_t length = std::max<int64_t>(0, std::min(sub, send_bytes[p] - offset));
        if (p != me && length > 0) std::memcpy(Chunk(me) + p * sub, in + send_at[p] + offset, length);
      }
      for (int q = 0; q < n; ++q) {
        const int64_t length = std::max<int64_t>(0, std::min(sub, recv_bytes[q] - offset));
        if (q != me && length > 0) std::memcpy(out + recv_at[q] + offset, Chunk(q) + me * sub, length);
      }
    }
  }

 private:
  const ShmCeilingWork& w_;
  int64_t& step_;
};

}  // namespace

int64_t ShmCeilingSharedBytes(int world_size, int64_t chunk_bytes) {
  return world_size * (kHeaderBytesPerRank + 2 * chunk_bytes);
}

int64_t ShmCeilingBroadcastPieceBytes(int64_t chunk_bytes) {
  return std::max<int64_t>(64, chunk_bytes / kBroadcastPiecesPerChunk / 64 * 64);
}

void RunShmCeilingWork(const ShmCeilingWork& work, const ShmCeilingCall& call, const char* in,
                       char* out, int64_t* step) {
  Worker worker(work, step);
  const std::string shape = ShmCeilingShapeOf(call.op);
  if (shape == "all_reduce") {
    worker.AllReduce(in, out, call.bytes);
  } else if (shape == "reduce_scatter") {
    worker.ReduceScatter(in, out, call.bytes);
  } else if (shape == "all_gather") {
    worker.AllGather(in, out, call.bytes);
  } else if (shape == "broadcast") {
    worker.Broadcast(in, out, call.bytes, call.root);
  } else if (shape == "all_to_all") {
    worker.AllToAll(in, out, call.send_bytes, call.recv_bytes);
  }
}

double ShmCeilingSeconds(const std::string& op, const std::vector<double>& rank_best_seconds) {
  if (rank_best_seconds.empty()) return 0;
  if (ShmCeilingShapeOf(op) == "broadcast") {
    return *std::max_element(rank_best_seconds.begin(), rank_best_seconds.end());
  }
  double sum = 0;
  for (double seconds : rank_best_seconds) sum += seconds;
  return sum / rank_best_seconds.size();
}

std::string ShmCeilingShapeText(const std::string& op) {
  const std::string shape = ShmCeilingShapeOf(op);
  if (shape == "all_reduce") {
    return "copy in (n-1)S/n, reduce S/n of n inputs, copy out (n-1)S/n";
  }
  if (shape == "reduce_scatter") return "copy in (n-1)S/n, reduce S/n of n inputs";
  if (shape == "all_gather") return "copy in S/n, copy out (n-1)S/n";
  if (shape == "broadcast") {
    return "root copies in S while the others copy S out behind it, piece by piece (1/16 chunk), "
           "overlapped";
  }
  return "copy in and out what goes to and comes from the peers";
}

std::string ShmCeilingShapeOf(const std::string& op) {
  if (op == "all_to_allv") return "all_to_all";
  for (const char* known :
       {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "all_to_all"}) {
    if (op == known) return op;
  }
  return "";
}

}  // namespace mtb::comm_bench
