// Every counted allocation is the base allocator's block with a header of
// kHeaderBytes in front: the header records the requested size and the base
// block's deleter, and the caller gets the address just after it. Data and
// context are the same pointer (as DefaultCPUAllocator's), so raw_allocate and
// raw_deallocate keep working. The header is one alignment unit (64 bytes), so
// the caller's pointer keeps the base allocator's alignment.
#include "common/libtorch/counting_allocator.h"

#include <algorithm>
#include <atomic>
#include <cstddef>

#include "c10/core/Allocator.h"
#include "c10/core/alignment.h"
#include "glog/logging.h"

namespace mtb {
namespace {

constexpr size_t kHeaderBytes = c10::gAlignment;

struct Header {
  size_t bytes;
  c10::DeleterFnPtr base_deleter;
};
static_assert(sizeof(Header) <= kHeaderBytes, "header must fit");

std::atomic<int64_t> current_bytes{0};
std::atomic<int64_t> peak_bytes{0};
std::atomic<int64_t> interval_peak_bytes{0};
std::atomic<int64_t> allocations{0};
std::atomic<bool> installed{false};

void Raise(std::atomic<int64_t>& peak_counter, int64_t value) {
  int64_t peak = peak_counter.load(std::memory_order_relaxed);
  while (value > peak &&
         !peak_counter.compare_exchange_weak(peak, value,
                                             std::memory_order_relaxed)) {
  }
}

void DeleteCounted(void* data) {
  if (data == nullptr) return;
  char* block = static_cast<char*>(data) - kHeaderBytes;
  const Header header = *reinterpret_cast<Header*>(block);
  current_bytes.fetch_sub(static_cast<int64_t>(header.bytes),
                          std::memory_order_relaxed);
  header.base_deleter(block);
}

class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t n) const override {
    c10::DataPtr block = base_->allocate(n + kHeaderBytes);
    // The base allocator's data and context are one pointer (checked: a
    // context we cannot free by the data pointer alone would leak).
    CHECK(block.get() != nullptr && block.get() == block.get_context())
        << "counting allocator: the base CPU allocator's DataPtr has a "
           "separate context";
    const c10::DeleterFnPtr base_deleter = block.get_deleter();
    char* raw = static_cast<char*>(block.release_context());
    *reinterpret_cast<Header*>(raw) = Header{n, base_deleter};
    const int64_t now =
        current_bytes.fetch_add(static_cast<int64_t>(n),
                                std::memory_order_relaxed) +
        static_cast<int64_t>(n);
    Raise(peak_bytes, now);
    Raise(interval_peak_bytes, now);
    allocations.fetch_add(1, std::memory_order_relaxed);
    void* data = raw + kHeaderBytes;
    return c10::DataPtr(data, data, &DeleteCounted, block.device());
  }

  c10::DeleterFnPtr raw_deleter() const override { return &DeleteCounted; }

 private:
  c10::Allocator* base_;
};

}  // namespace

void InstallCountingCpuAllocator() {
  if (installed.exchange(true)) return;
  // Static lifetime, as c10::SetAllocator requires.
  static CountingAllocator* const allocator =
      new CountingAllocator(c10::GetAllocator(c10::DeviceType::CPU));
  c10::SetAllocator(c10::DeviceType::CPU, allocator, /*priority=*/1);
}

bool CountingCpuAllocatorInstalled() { return installed.load(); }

CpuMemoryCounts CpuMemory() {
  CpuMemoryCounts counts;
  counts.current_bytes = current_bytes.load(std::memory_order_relaxed);
  counts.peak_bytes = peak_bytes.load(std::memory_order_relaxed);
  counts.allocations = allocations.load(std::memory_order_relaxed);
  return counts;
}

int64_t TakeCpuIntervalPeak() {
  // The exchange closes this interval and opens the next at once: an
  // allocation racing with it raises one of the two, so no allocation is
  // missed by both.
  return interval_peak_bytes.exchange(
      current_bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

void ResetCpuPeak() {
  peak_bytes.store(current_bytes.load(std::memory_order_relaxed),
                   std::memory_order_relaxed);
}

}  // namespace mtb
