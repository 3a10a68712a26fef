// Shared-memory ceilings (shm_ceiling.h). Vocabulary as in the transport: each
// process owns two slots of slot_bytes in one anonymous shared mapping made
// before the fork; a *point* is one (op, size); a *round* runs it once on
// every process between two barriers, and each process writes its time into
// the mapping's table. The work per chunk is the transport's: copy in, reduce
// (the same vectorised kernel), copy out; only the waits between phases are
// left out, which is why it bounds the collective from above.
#include "comm_bench/shm_ceiling.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/stats.h"
#include "common/collective/shm_reduce.h"

namespace mtb::comm_bench {
namespace {

using collective::ShmDtype;
using collective::ShmReduce;
using collective::ShmReduceOp;

constexpr int64_t kNaiveAllReduceMaxBytes = int64_t{256} << 10;  // the transport's

struct Shared {
  std::atomic<int64_t> arrived;
  std::atomic<int64_t> generation;
};

void Barrier(Shared& shared, int processes) {
  const int64_t generation = shared.generation.load();
  if (shared.arrived.fetch_add(1) + 1 == processes) {
    shared.arrived.store(0);
    shared.generation.fetch_add(1);
    return;
  }
  while (shared.generation.load() == generation) sched_yield();
}

double BusFactor(const std::string& op, int n) {
  if (op == "all_reduce") return 2.0 * (n - 1) / n;
  if (op == "broadcast") return 1.0;
  return static_cast<double>(n - 1) / n;
}

std::string ShapeText(const std::string& op) {
  if (op == "all_reduce") return "copy in S, reduce S/n of n slots, copy out S";
  if (op == "reduce_scatter") return "copy in S, reduce S/n of n slots";
  if (op == "all_gather") return "copy in S/n, copy out (n-1)S/n";
  if (op == "broadcast") return "root copies in S, the others copy out S";
  return "copy in (n-1)S/n, copy out (n-1)S/n";
}

struct Work {
  int n;
  int me;
  int64_t slot_bytes;
  char* slots;  // n * 2 slots
  char* in;
  char* out;
  char* Slot(int p, int64_t step) const { return slots + (p * 2 + step % 2) * slot_bytes; }
};

// One process's share of op on S bytes; `step` counts chunks across calls.
void RunOp(const Work& w, const std::string& op, int64_t bytes, int64_t& step) {
  const int n = w.n;
  const int64_t floats = bytes / 4;
  std::vector<const void*> inputs(n);
  if (op == "all_reduce") {
    const int64_t chunk_floats = w.slot_bytes / 4;
    for (int64_t offset = 0; offset < floats; offset += chunk_floats, ++step) {
      const int64_t chunk = std::min(chunk_floats, floats - offset);
      std::memcpy(w.Slot(w.me, step), w.in + offset * 4, chunk * 4);
      if (bytes <= kNaiveAllReduceMaxBytes) {
        for (int p = 0; p < n; ++p) inputs[p] = w.Slot(p, step);
        ShmReduce(w.out + offset * 4, inputs.data(), n, chunk, ShmDtype::kFloat32,
                  ShmReduceOp::kSum);
        continue;
      }
      const int64_t part = chunk / n;
      for (int p = 0; p < n; ++p) inputs[p] = w.Slot(p, step) + w.me * part * 4;
      ShmReduce(w.Slot(w.me, step) + w.me * part * 4, inputs.data(), n, part, ShmDtype::kFloat32,
                ShmReduceOp::kSum);
      for (int p = 0; p < n; ++p) {
        std::memcpy(w.out + (offset + p * part) * 4, w.Slot(p, step) + p * part * 4, part * 4);
      }
    }
  } else if (op == "reduce_scatter") {
    const int64_t block = floats / n;
    const int64_t sub = w.slot_bytes / n / 4;
    for (int64_t offset = 0; offset < block; offset += sub, ++step) {
      const int64_t length = std::min(sub, block - offset);
      for (int p = 0; p < n; ++p) {
        std::memcpy(w.Slot(w.me, step) + p * sub * 4, w.in + (p * block + offset) * 4, length * 4);
      }
      for (int q = 0; q < n; ++q) inputs[q] = w.Slot(q, step) + w.me * sub * 4;
      ShmReduce(w.out + offset * 4, inputs.data(), n, length, ShmDtype::kFloat32,
                ShmReduceOp::kSum);
    }
  } else if (op == "all_gather") {
    const int64_t block = bytes / n;
    for (int64_t offset = 0; offset < block; offset += w.slot_bytes, ++step) {
      const int64_t length = std::min(w.slot_bytes, block - offset);
      std::memcpy(w.Slot(w.me, step), w.in + offset, length);
      for (int p = 0; p < n; ++p) {
        if (p != w.me) std::memcpy(w.out + p * block + offset, w.Slot(p, step), length);
      }
    }
  } else if (op == "broadcast") {
    for (int64_t offset = 0; offset < bytes; offset += w.slot_bytes, ++step) {
      const int64_t length = std::min(w.slot_bytes, bytes - offset);
      if (w.me == 0) {
        std::memcpy(w.Slot(0, step), w.in + offset, length);
      } else {
        std::memcpy(w.out + offset, w.Slot(0, step), length);
      }
    }
  } else {  // all_to_all
    const int64_t block = bytes / n;
    const int64_t sub = w.slot_bytes / n / 64 * 64;
    for (int64_t offset = 0; offset < block; offset += sub, ++step) {
      const int64_t length = std::min(sub, block - offset);
      for (int p = 0; p < n; ++p) {
        if (p != w.me) std::memcpy(w.Slot(w.me, step) + p * sub, w.in + p * block + offset, length);
      }
      for (int q = 0; q < n; ++q) {
        if (q != w.me)
          std::memcpy(w.out + q * block + offset, w.Slot(q, step) + w.me * sub, length);
      }
    }
  }
}

}  // namespace

std::string ShmCeilingShapeOf(const std::string& op) {
  if (op == "all_to_allv") return "all_to_all";
  for (const char* known :
       {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "all_to_all"}) {
    if (op == known) return op;
  }
  return "";
}

absl::StatusOr<std::vector<CommBenchShmCeilingPoint>> MeasureShmCeiling(
    const ShmCeilingOptions& options) {
  const int n = options.processes;
  if (n < 1 || options.rounds < 1 || options.slot_bytes < 4096) {
    return absl::InvalidArgumentError("shm ceiling: processes, rounds >= 1, slot_bytes >= 4096");
  }
  const int64_t largest = *std::max_element(options.sizes.begin(), options.sizes.end());
  const int64_t points = static_cast<int64_t>(options.ops.size() * options.sizes.size());
  const int64_t table_entries = points * options.rounds * n;
  const int64_t slots_bytes = n * 2 * options.slot_bytes;
  const int64_t mapping_bytes = 4096 + table_entries * 8 + slots_bytes;
  void* mapping =
      mmap(nullptr, mapping_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) return absl::ResourceExhaustedError("shm ceiling: mmap failed");
  Shared* shared = new (mapping) Shared{};
  double* table = reinterpret_cast<double*>(static_cast<char*>(mapping) + 4096);
  char* slots = reinterpret_cast<char*>(table + table_entries);
  std::vector<pid_t> children;
  for (int me = 0; me < n; ++me) {
    const pid_t pid = fork();
    if (pid < 0) return absl::InternalError("shm ceiling: fork failed");
    if (pid > 0) {
      children.push_back(pid);
      continue;
    }
    std::vector<char> in(largest, static_cast<char>(me + 1));
    std::vector<char> out(largest, 0);
    const Work work{n, me, options.slot_bytes, slots, in.data(), out.data()};
    int64_t step = 0;
    int64_t point = 0;
    for (const std::string& op : options.ops) {
      for (int64_t bytes : options.sizes) {
        RunOp(work, op, bytes, step);  // warm-up: pages touched, caches filled
        for (int round = 0; round < options.rounds; ++round) {
          Barrier(*shared, n);
          const auto start = std::chrono::steady_clock::now();
          RunOp(work, op, bytes, step);
          const double seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          table[(point * options.rounds + round) * n + me] = seconds;
        }
        Barrier(*shared, n);
        ++point;
      }
    }
    _exit(0);
  }
  bool failed = false;
  for (pid_t child : children) {
    int status = 0;
    failed |= waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  std::vector<CommBenchShmCeilingPoint> result;
  int64_t point = 0;
  for (const std::string& op : options.ops) {
    for (int64_t bytes : options.sizes) {
      std::vector<double> rates;
      for (int round = 0; round < options.rounds; ++round) {
        double slowest = 0;
        for (int p = 0; p < n; ++p) {
          slowest = std::max(slowest, table[(point * options.rounds + round) * n + p]);
        }
        rates.push_back(slowest > 0 ? bytes * BusFactor(op, n) / slowest / 1e9 : 0);
      }
      CommBenchShmCeilingPoint entry;
      entry.set_op(op);
      entry.set_bytes(bytes);
      entry.set_gbps(Median(rates));
      entry.set_min_gbps(Min(rates));
      entry.set_max_gbps(Max(rates));
      entry.set_shape(ShapeText(op));
      result.push_back(entry);
      ++point;
    }
  }
  munmap(mapping, mapping_bytes);
  if (failed) return absl::InternalError("shm ceiling: a measuring process failed");
  return result;
}

}  // namespace mtb::comm_bench
