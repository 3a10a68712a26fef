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

TEST(CountingCpuAllocator, IntervalPeaksPartitionTimeAndLeaveThePeakAlone) {
  at::set_num_threads(1);
  InstallCountingCpuAllocator();
  ResetCpuPeak();
  (void)TakeCpuIntervalPeak();  // opens an interval at the current bytes
  const int64_t base = CpuMemory().current_bytes;
  { at::Tensor a = at::empty({1 << 20}, at::kByte); }  // 1 MiB, freed
  at::Tensor b = at::empty({1 << 10}, at::kByte);      // 1 KiB, kept
  // The first interval saw the 1 MiB; the next starts at what is live now.
  EXPECT_EQ(TakeCpuIntervalPeak() - base, 1 << 20);
  { at::Tensor c = at::empty({1 << 12}, at::kByte); }  // 4 KiB, freed
  EXPECT_EQ(TakeCpuIntervalPeak() - base, (1 << 10) + (1 << 12));
  // Nothing allocated: the interval's peak is the live bytes.
  EXPECT_EQ(TakeCpuIntervalPeak() - base, 1 << 10);
  // Taking intervals does not reset the overall peak.
  EXPECT_EQ(CpuMemory().peak_bytes - base, 1 << 20);
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
