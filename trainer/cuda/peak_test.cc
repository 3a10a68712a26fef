#include "trainer/cuda/peak.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace mtb {
namespace cuda {
namespace {

GemmTiming Timing(int64_t m, int64_t n, int64_t k, double flops) {
  GemmTiming t;
  t.m = m;
  t.n = n;
  t.k = k;
  t.flops_per_second = flops;
  return t;
}

// A result as trainer_cuda's run leaves it without --peak_flops: steps with
// tokens/s and no MFU, the summary's model FLOP/s.
TrainResult Result() {
  TrainResult result;
  result.mutable_model()->set_flops_per_token(1e9);
  TrainRun* run = result.add_runs();
  for (double tps : {100e3, 200e3}) run->add_steps()->set_tokens_per_second(tps);
  result.mutable_summary()->set_model_flops_per_second(1.5e14);
  return result;
}

TEST(ApplyMeasuredPeak, TheFastestShapeIsThePeakAndEveryMfuUsesIt) {
  TrainResult result = Result();
  const std::vector<GemmTiming> timings = {Timing(8192, 8192, 8192, 700e12),
                                           Timing(4096, 4096, 4096, 600e12),
                                           Timing(8192, 8192, 4096, 750e12)};
  ASSERT_TRUE(ApplyMeasuredPeak(timings, /*bf16=*/true, 5, 10, 1, &result));
  const PeakFlops& peak = result.peak_flops();
  EXPECT_EQ(peak.rank_flops_per_second(), 750e12);
  EXPECT_EQ(peak.job_flops_per_second(), 750e12);
  EXPECT_EQ(peak.source(),
            "measured: fastest of cuBLASLt bf16 GEMMs (fp32 accumulation; best of 5 x 10 "
            "calls per shape): 8192x8192x8192 700.0 TFLOP/s, 4096x4096x4096 600.0 "
            "TFLOP/s, 8192x8192x4096 750.0 TFLOP/s");
  ASSERT_EQ(peak.gemms_size(), 3);
  EXPECT_EQ(peak.gemms(1).library(), "cublaslt");
  EXPECT_EQ(peak.gemms(1).precision(), "bf16");
  EXPECT_EQ(peak.gemms(1).m(), 4096);
  EXPECT_EQ(peak.gemms(1).flops_per_second(), 600e12);
  // MFU = tokens/s x FLOPs per token / peak: 1e5 x 1e9 / 7.5e14.
  EXPECT_DOUBLE_EQ(result.runs(0).steps(0).mfu(), 1e14 / 750e12);
  EXPECT_DOUBLE_EQ(result.runs(0).steps(1).mfu(), 2e14 / 750e12);
  EXPECT_DOUBLE_EQ(result.summary().mfu(), 1.5e14 / 750e12);
}

TEST(ApplyMeasuredPeak, TheJobPeakCountsEveryRankAndFp32IsNamed) {
  TrainResult result = Result();
  ASSERT_TRUE(ApplyMeasuredPeak({Timing(4096, 4096, 4096, 50e12)}, /*bf16=*/false, 3, 2,
                                /*world_size=*/4, &result));
  EXPECT_EQ(result.peak_flops().rank_flops_per_second(), 50e12);
  EXPECT_EQ(result.peak_flops().job_flops_per_second(), 200e12);
  EXPECT_EQ(result.peak_flops().gemms(0).precision(), "fp32");
  EXPECT_NE(result.peak_flops().source().find("cuBLASLt fp32 GEMMs"), std::string::npos);
  EXPECT_DOUBLE_EQ(result.runs(0).steps(0).mfu(), 1e14 / 200e12);
}

TEST(ApplyMeasuredPeak, NoTimingOrABadOneChangesNothing) {
  for (const std::vector<GemmTiming>& timings :
       {std::vector<GemmTiming>{},
        std::vector<GemmTiming>{Timing(1, 1, 1, 1e12), Timing(2, 2, 2, 0)}}) {
    TrainResult result = Result();
    EXPECT_FALSE(ApplyMeasuredPeak(timings, true, 1, 1, 1, &result));
    EXPECT_FALSE(result.has_peak_flops());
    EXPECT_EQ(result.runs(0).steps(0).mfu(), 0);
  }
}

// Records its updates; allocates nothing.
class StandIn : public GptCuda {
 public:
  StepStats ForwardBackward(const int32_t*, const int32_t*) override { return {}; }
  float* gradients() override { return nullptr; }
  void Update(int64_t, double, double, StepStats*) override { ++updates; }
  void CopyParametersToHost(float*) override {}
  void CopyStateToHost(float*, float*, float*) override {}
  void LoadState(const float*, const float*, const float*) override {}
  int64_t DeviceBytes() const override { return 123; }
  int updates = 0;
};

// The free bytes seen after each Update, from a script.
struct Script {
  std::vector<int64_t> free;
  size_t next = 0;
  int64_t operator()() { return free.at(next++); }
};

int64_t Watch(std::vector<int64_t> free, int steps, AllocationStats* stats) {
  auto script = std::make_shared<Script>();
  script->free = std::move(free);
  AllocationWatch watch(std::make_unique<StandIn>(), [script] { return (*script)(); },
                        stats);
  EXPECT_EQ(watch.DeviceBytes(), 123);
  for (int s = 1; s <= steps; ++s) {
    StepStats stats_of_step;
    watch.Update(s, 1e-3, 1.0, &stats_of_step);
  }
  return stats->BytesAllocatedAfterStep1();
}

TEST(AllocationWatch, NothingAllocatedAfterStepOneReadsZero) {
  AllocationStats stats;
  EXPECT_EQ(Watch({1000, 1000, 1000, 1000}, 4, &stats), 0);
  EXPECT_EQ(stats.updates, 4);
  EXPECT_EQ(stats.free_after_first, 1000);
  EXPECT_EQ(AllocationLine(stats),
            "device memory allocated after step 1: 0 bytes (free after step 1: 1000 bytes, "
            "4 updates)");
}

TEST(AllocationWatch, AnAllocationAfterStepOneIsCounted) {
  // Step 3 takes 256 bytes and gives back 56 at step 4: the lowest counts.
  AllocationStats stats;
  EXPECT_EQ(Watch({1000, 1000, 744, 800}, 4, &stats), 256);
  // What step 1 itself took does not count (it is before the first reading).
  AllocationStats one;
  EXPECT_EQ(Watch({500}, 1, &one), -1);  // one step: nothing to compare
}

}  // namespace
}  // namespace cuda
}  // namespace mtb
