// Every AllReduce algorithm (Gloo's ring through c10d, Gloo's bcube on the
// second gloo context, our reduce-scatter + all-gather) at 1, 2, 3 and 4 ranks
// (threads over Gloo on 127.0.0.1) with closed-form inputs compared exactly —
// sizes no world size divides, every reduce op, bfloat16 emulation, two in
// flight — and the reduction order of our reduce-scatter on values where the
// order shows in the bits.
#include <string>
#include <tuple>
#include <vector>

#include "ATen/ATen.h"
#include "common/collective/communicator.h"
#include "common/collective/test_tensors.h"
#include "common/collective/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mtb::collective {
namespace {

using ::testing::HasSubstr;

// 12-byte chunks: 3 float32 per peer and step, so the reduce-scatter half of
// reduce_scatter_all_gather runs many steps with a shorter last one.
constexpr int64_t kChunkBytes = 12;

class AllReduceAlgorithmTest
    : public ::testing::TestWithParam<std::tuple<int, AllReduceAlgorithm>> {
 protected:
  int n() const { return std::get<0>(GetParam()); }
  AllReduceAlgorithm algorithm() const { return std::get<1>(GetParam()); }
  void Run(const std::function<void(Communicator&)>& body) {
    ThreadRanksOptions options;
    options.all_reduce_algorithm = algorithm();
    options.reduce_scatter_chunk_bytes = kChunkBytes;
    const absl::Status status = RunRanksAsThreads(n(), body, options);
    ASSERT_TRUE(status.ok()) << status;
  }
};

INSTANTIATE_TEST_SUITE_P(
    WorldSizesAndAlgorithms, AllReduceAlgorithmTest,
    ::testing::Combine(::testing::Values(1, 2, 3, 4),
                       ::testing::Values(AllReduceAlgorithm::kAuto,
                                         AllReduceAlgorithm::kRing,
                                         AllReduceAlgorithm::kBcube,
                                         AllReduceAlgorithm::kReduceScatterAllGather)),
    [](const auto& info) {
      return "n" + std::to_string(std::get<0>(info.param)) + "_" +
             std::string(AllReduceAlgorithmName(std::get<1>(info.param)));
    });

TEST_P(AllReduceAlgorithmTest, SumOfRankScaledRampsInEveryDtypeAndAwkwardSize) {
  Run([&](Communicator& comm) {
    for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kInt, at::kLong, at::kHalf}) {
      // 7 and 101: no world size here divides them; 101 float32 are 34 steps
      // of 12-byte chunks.
      for (int64_t numel : {1, 7, 101}) {
        at::Tensor tensor = Ramp(numel, comm.rank() + 1, dtype);
        ASSERT_TRUE(comm.AllReduce(tensor).ok()) << c10::toString(dtype) << " " << numel;
        ExpectEqual(tensor, Ramp(numel, Triangle(n()), dtype));
      }
    }
    // Any shape: the all-reduce works on the flat elements.
    at::Tensor matrix = Ramp(15, comm.rank() + 1).view({3, 5});
    ASSERT_TRUE(comm.AllReduce(matrix).ok());
    ExpectEqual(matrix, Ramp(15, Triangle(n())).view({3, 5}));
  });
}

TEST_P(AllReduceAlgorithmTest, MaxMinAvgOfRanks) {
  Run([&](Communicator& comm) {
    const at::Tensor mine = at::full({11}, comm.rank(), at::kFloat);
    at::Tensor max = mine.clone(), min = mine.clone(), avg = mine.clone();
    ASSERT_TRUE(comm.AllReduce(max, ReduceOp::kMax).ok());
    ASSERT_TRUE(comm.AllReduce(min, ReduceOp::kMin).ok());
    ASSERT_TRUE(comm.AllReduce(avg, ReduceOp::kAvg).ok());
    ExpectEqual(max, at::full({11}, n() - 1, at::kFloat));
    ExpectEqual(min, at::zeros({11}, at::kFloat));
    ExpectEqual(avg, at::full({11}, (n() - 1) / 2.0, at::kFloat));
  });
}

TEST_P(AllReduceAlgorithmTest, Bfloat16IsSummedInFloat32AndRoundedOnce) {
  Run([&](Communicator& comm) {
    // 256 + (n-1) ones: bfloat16 spacing at 256 is 2, so one rounding of the
    // fp32 sum differs from a chain of bfloat16 roundings at n = 3, 4.
    at::Tensor tensor = at::full({7}, comm.rank() == 0 ? 256.0 : 1.0, at::kBFloat16);
    ASSERT_TRUE(comm.AllReduce(tensor).ok());
    ExpectEqual(tensor.view(at::kShort),
                at::full({7}, 256.0 + (n() - 1), at::kFloat)
                    .to(at::kBFloat16)
                    .view(at::kShort));
    EXPECT_TRUE(comm.log().Records().back().emulated);
  });
}

TEST_P(AllReduceAlgorithmTest, TwoInFlightAtOnceKeepTheirMessagesApart) {
  Run([&](Communicator& comm) {
    at::Tensor first = Ramp(29, comm.rank() + 1);
    at::Tensor second = Ramp(29, 100 * (comm.rank() + 1));
    at::Tensor gathered = at::empty({3 * n()});
    CollectiveHandle a = comm.AllReduceAsync(first);
    CollectiveHandle b = comm.AllGatherAsync(at::full({3}, comm.rank(), at::kFloat), gathered);
    CollectiveHandle c = comm.AllReduceAsync(second);
    ASSERT_TRUE(c.Wait().ok());
    ASSERT_TRUE(a.Wait().ok());
    ASSERT_TRUE(b.Wait().ok());
    ExpectEqual(first, Ramp(29, Triangle(n())));
    ExpectEqual(second, Ramp(29, 100 * Triangle(n())));
  });
}

TEST_P(AllReduceAlgorithmTest, RecordNamesTheAlgorithmThatRan) {
  Run([&](Communicator& comm) {
    ASSERT_TRUE(comm.AllReduce(at::ones({8})).ok());
    ASSERT_TRUE(comm.AllReduce(at::ones({8}, at::kHalf)).ok());
    const std::vector<CollectiveRecord> records = comm.log().Records();
    ASSERT_EQ(records.size(), 2u);
    if (n() == 1 || algorithm() == AllReduceAlgorithm::kRing) {
      EXPECT_EQ(records[0].algorithm, "gloo_allreduce");
      EXPECT_EQ(records[1].algorithm, "gloo_allreduce");
    } else if (algorithm() == AllReduceAlgorithm::kAuto) {
      // The measured default for 32 bytes: bcube from 3 ranks, ring at 2;
      // float16, which bcube does not take here, is the ring's.
      EXPECT_EQ(records[0].algorithm, n() >= 3 ? "gloo_allreduce_bcube" : "gloo_allreduce");
      EXPECT_EQ(records[1].algorithm, "gloo_allreduce");
    } else if (algorithm() == AllReduceAlgorithm::kBcube) {
      EXPECT_EQ(records[0].algorithm, "gloo_allreduce_bcube");
      // float16 is not instantiated for Gloo's bcube here: c10d's ring runs.
      EXPECT_EQ(records[1].algorithm, "gloo_allreduce (bcube does not take float16)");
    } else {
      for (const CollectiveRecord& record : records) {
        EXPECT_THAT(record.algorithm, HasSubstr("reduce_scatter(gloo_send_recv_chunked(12 B"));
        EXPECT_THAT(record.algorithm, HasSubstr("+all_gather(gloo_send_recv_direct)"));
      }
    }
  });
}

// Per-rank inputs whose sums round: the order in which contributions are
// added shows in the bits. Every rank can build every rank's input.
at::Tensor RoundingInput(int rank, int64_t numel) {
  at::Generator generator = RankGenerator(/*seed=*/20240611, rank);
  return at::randn({numel}, generator, at::kFloat) * std::pow(10.0, rank);
}

// ((c0 + c1) + c2) + ...: the order every reduce-scatter algorithm of ours
// promises (docs/collective.md).
at::Tensor RankOrderSum(int n, int64_t numel) {
  at::Tensor sum = RoundingInput(0, numel);
  for (int p = 1; p < n; ++p) sum = sum + RoundingInput(p, numel);
  return sum;
}

// Chunked (in place and out of place) and alltoall reduce-scatters, and the
// reduce_scatter_all_gather all-reduce, give the bits of the rank-order sum;
// the reverse order gives other bits on these inputs, so the comparison can
// fail.
TEST(ReduceScatterOrder, EveryAlgorithmAddsInRankOrderBitForBit) {
  for (int n : {3, 4}) {
    SCOPED_TRACE(n);
    const int64_t k = 101;
    const at::Tensor expected = RankOrderSum(n, n * k);
    at::Tensor reverse = RoundingInput(n - 1, n * k);
    for (int p = n - 2; p >= 0; --p) reverse = reverse + RoundingInput(p, n * k);
    ASSERT_FALSE(at::equal(reverse, expected)) << "inputs too tame to show the order";
    ThreadRanksOptions options;
    options.reduce_scatter_chunk_bytes = 40;  // 10 float32: 11 steps, the last short
    options.reduce_scatter_depth = 3;
    const absl::Status status = RunRanksAsThreads(
        n,
        [&](Communicator& comm) {
          const int r = comm.rank();
          const at::Tensor input = RoundingInput(r, n * k);
          const at::Tensor mine = expected.narrow(0, r * k, k);
          for (ReduceScatterAlgorithm algorithm :
               {ReduceScatterAlgorithm::kAllToAll, ReduceScatterAlgorithm::kChunked}) {
            SCOPED_TRACE(std::string(ReduceScatterAlgorithmName(algorithm)));
            comm.SetReduceScatterAlgorithm(algorithm);
            at::Tensor output = at::empty({k});
            ASSERT_TRUE(comm.ReduceScatter(input, output).ok());
            ExpectSameBits(output, mine);
            at::Tensor buffer = input.clone();
            ASSERT_TRUE(comm.ReduceScatter(buffer, buffer.narrow(0, r * k, k)).ok());
            ExpectSameBits(buffer.narrow(0, r * k, k), mine);
          }
          comm.SetAllReduceAlgorithm(AllReduceAlgorithm::kReduceScatterAllGather);
          at::Tensor all = input.clone();
          ASSERT_TRUE(comm.AllReduce(all).ok());
          ExpectSameBits(all, expected);
        },
        options);
    ASSERT_TRUE(status.ok()) << status;
  }
}

// The record says where a reduce-scatter's time went: the local reduction
// for both algorithms, and for chunked the waits of its thread; the phases
// fit in the call's time. Other collectives leave them zero.
TEST(ReduceScatterPhases, RecordsSplitTheTimeOfTheCall) {
  ThreadRanksOptions options;
  options.reduce_scatter_chunk_bytes = 4096;
  const absl::Status status = RunRanksAsThreads(
      2,
      [&](Communicator& comm) {
        const at::Tensor input = at::ones({1 << 16});
        at::Tensor output = at::empty({1 << 15});
        for (ReduceScatterAlgorithm algorithm :
             {ReduceScatterAlgorithm::kAllToAll, ReduceScatterAlgorithm::kChunked}) {
          comm.SetReduceScatterAlgorithm(algorithm);
          ASSERT_TRUE(comm.ReduceScatter(input, output).ok());
          const CollectiveRecord record = comm.log().Records().back();
          EXPECT_GT(record.reduce_time, absl::ZeroDuration());
          const absl::Duration whole = record.wait_return_time - record.issue_time;
          EXPECT_LE(record.reduce_time + record.receive_wait_time + record.send_wait_time,
                    whole);
          if (algorithm == ReduceScatterAlgorithm::kAllToAll) {
            EXPECT_EQ(record.receive_wait_time, absl::ZeroDuration());
          }
        }
        ASSERT_TRUE(comm.AllReduce(at::ones({4})).ok());
        EXPECT_EQ(comm.log().Records().back().reduce_time, absl::ZeroDuration());
      },
      options);
  ASSERT_TRUE(status.ok()) << status;
}

TEST(AllReduceAlgorithmNames, ParseRoundTripsAndRejectsUnknownNames) {
  for (AllReduceAlgorithm algorithm :
       {AllReduceAlgorithm::kAuto, AllReduceAlgorithm::kRing, AllReduceAlgorithm::kBcube,
        AllReduceAlgorithm::kReduceScatterAllGather}) {
    const absl::StatusOr<AllReduceAlgorithm> parsed =
        ParseAllReduceAlgorithm(AllReduceAlgorithmName(algorithm));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, algorithm);
  }
  const absl::StatusOr<AllReduceAlgorithm> unknown = ParseAllReduceAlgorithm("tree");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("'tree'"));
}

}  // namespace
}  // namespace mtb::collective
