// Runs as its own process (a cc_test binary), so the process-global counts
// see only this test's tensors. One intra-op thread: nothing allocates behind
// the test's back.
#include "common/libtorch/counting_allocator.h"

#include "ATen/ATen.h"
#include "ATen/Parallel.h"
#include "gtest/gtest.h"

namespace mtb {
namespace {

TEST(CountingCpuAllocator, CountsLiveBytesAndThePeakOfTensorStorage) {
  at::set_num_threads(1);
  InstallCountingCpuAllocator();
  InstallCountingCpuAllocator();  // idempotent
  ASSERT_TRUE(CountingCpuAllocatorInstalled());
  const CpuMemoryCounts start = CpuMemory();
  {
    at::Tensor a = at::empty({1000}, at::kFloat);  // 4000 bytes
    at::Tensor b = at::empty({250}, at::kDouble);  // 2000 bytes
    const CpuMemoryCounts both = CpuMemory();
    EXPECT_EQ(both.current_bytes - start.current_bytes, 6000);
    EXPECT_GE(both.peak_bytes, both.current_bytes);
    EXPECT_EQ(both.allocations - start.allocations, 2);
    // Memory is usable and aligned like the default allocator's.
    a.fill_(1.5);
    EXPECT_EQ(a.sum().item<float>(), 1500.0f);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data_ptr()) % 64, 0u);
  }
  const CpuMemoryCounts after = CpuMemory();
  EXPECT_EQ(after.current_bytes, start.current_bytes);
  EXPECT_GE(after.peak_bytes - start.current_bytes, 6000);

  ResetCpuPeak();
  EXPECT_EQ(CpuMemory().peak_bytes, CpuMemory().current_bytes);
  { at::Tensor c = at::zeros({1 << 20}, at::kByte); }
  EXPECT_EQ(CpuMemory().peak_bytes - CpuMemory().current_bytes, 1 << 20);
}

TEST(CountingCpuAllocator, RawAllocateAndDeallocateBalance) {
  InstallCountingCpuAllocator();
  c10::Allocator* allocator = c10::GetAllocator(c10::DeviceType::CPU);
  const int64_t before = CpuMemory().current_bytes;
  void* p = allocator->raw_allocate(128);
  EXPECT_EQ(CpuMemory().current_bytes - before, 128);
  allocator->raw_deallocate(p);
  EXPECT_EQ(CpuMemory().current_bytes, before);
}

}  // namespace
}  // namespace mtb
