// Every collective at 1, 2, 3 and 4 ranks (threads over Gloo on 127.0.0.1),
// with inputs whose results have a closed form, compared exactly: the values
// are small integers, exact in every dtype used, so any reduction order gives
// the same bits.
#include "common/collective/communicator.h"

#include <string>

#include "absl/time/clock.h"
#include <utility>
#include <vector>

#include "ATen/ATen.h"
#include "common/collective/test_tensors.h"
#include "common/collective/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mtb::collective {
namespace {

using ::testing::HasSubstr;

class CommunicatorTest : public ::testing::TestWithParam<int> {
 protected:
  int n() const { return GetParam(); }
  void Run(const std::function<void(Communicator&)>& body,
           const ThreadRanksOptions& options = {}) {
    const absl::Status status = RunRanksAsThreads(n(), body, options);
    ASSERT_TRUE(status.ok()) << status;
  }
};

INSTANTIATE_TEST_SUITE_P(WorldSizes, CommunicatorTest,
                         ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "n" + std::to_string(info.param);
                         });

TEST_P(CommunicatorTest,
       AllReduceSumOfRankScaledRampIsTriangularNumberTimesRamp) {
  Run([&](Communicator& comm) {
    // 7 elements: not divisible by 2, 3 or 4.
    for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kHalf, at::kInt,
                                 at::kLong, at::kChar, at::kByte}) {
      at::Tensor tensor = Ramp(7, comm.rank() + 1, dtype);
      ASSERT_TRUE(comm.AllReduce(tensor).ok()) << c10::toString(dtype);
      ExpectEqual(tensor, Ramp(7, Triangle(n()), dtype));
    }
  });
}

TEST_P(CommunicatorTest, AllReduceMaxMinAvgOfRanks) {
  Run([&](Communicator& comm) {
    const at::Tensor mine = at::full({5}, comm.rank(), at::kFloat);
    at::Tensor max = mine.clone(), min = mine.clone(), avg = mine.clone();
    ASSERT_TRUE(comm.AllReduce(max, ReduceOp::kMax).ok());
    ASSERT_TRUE(comm.AllReduce(min, ReduceOp::kMin).ok());
    ASSERT_TRUE(comm.AllReduce(avg, ReduceOp::kAvg).ok());
    ExpectEqual(max, at::full({5}, n() - 1, at::kFloat));
    ExpectEqual(min, at::zeros({5}, at::kFloat));
    // (0 + 1 + ... + n-1) / n = (n-1)/2: exact in float32.
    ExpectEqual(avg, at::full({5}, (n() - 1) / 2.0, at::kFloat));
  });
}

TEST_P(CommunicatorTest, AllReduceBfloat16IsSummedInFloat32AndRoundedOnce) {
  Run([&](Communicator& comm) {
    // Rank 0 holds 256, the others 1: bfloat16 spacing at 256 is 2, so the
    // result is 256 + (n-1) rounded once (ties to even), not a chain of
    // bfloat16 roundings.
    at::Tensor tensor =
        at::full({3, 2}, comm.rank() == 0 ? 256.0 : 1.0, at::kBFloat16);
    ASSERT_TRUE(comm.AllReduce(tensor).ok());
    const at::Tensor expected =
        at::full({3, 2}, 256.0 + (n() - 1), at::kFloat).to(at::kBFloat16);
    ExpectSameBits(tensor, expected);
    const CollectiveRecord record = comm.log().Records().back();
    EXPECT_TRUE(record.emulated);
    EXPECT_EQ(record.dtype, "bfloat16");
    EXPECT_EQ(record.transport_dtype, "float32");
  });
}

TEST_P(CommunicatorTest, BroadcastFromEveryRootReplacesWithRootsValues) {
  Run([&](Communicator& comm) {
    for (int root = 0; root < n(); ++root) {
      at::Tensor tensor = Ramp(5, comm.rank() + 10);
      ASSERT_TRUE(comm.Broadcast(tensor, root).ok());
      ExpectEqual(tensor, Ramp(5, root + 10));
    }
  });
}

// Bit patterns a float conversion would not preserve: NaN payloads, -0,
// infinities, the smallest subnormal.
at::Tensor OddBfloat16Bits(int rank) {
  const std::vector<int16_t> bits = {0x7fc1,
                                     static_cast<int16_t>(0xffa5),
                                     static_cast<int16_t>(0x8000),
                                     0x7f80,
                                     static_cast<int16_t>(0xff80),
                                     0x0001,
                                     static_cast<int16_t>(0x3f80 + rank)};
  return at::tensor(bits, at::kShort).view(at::kBFloat16);
}

TEST_P(CommunicatorTest, Bfloat16CopyCollectivesAreBitExact) {
  Run([&](Communicator& comm) {
    const int r = comm.rank();
    // broadcast
    at::Tensor broadcast = OddBfloat16Bits(r);
    ASSERT_TRUE(comm.Broadcast(broadcast, 0).ok());
    ExpectSameBits(broadcast, OddBfloat16Bits(0));
    // all_gather
    at::Tensor gathered = at::empty({n() * 7}, at::kBFloat16);
    ASSERT_TRUE(comm.AllGather(OddBfloat16Bits(r), gathered).ok());
    for (int p = 0; p < n(); ++p) {
      ExpectSameBits(gathered.narrow(0, p * 7, 7), OddBfloat16Bits(p));
    }
    // all_to_all: block p of rank r's input is OddBfloat16Bits(r) (7 rows).
    at::Tensor input = OddBfloat16Bits(r).repeat({n()});
    at::Tensor output = at::empty_like(input);
    ASSERT_TRUE(comm.AllToAll(input, output).ok());
    for (int p = 0; p < n(); ++p) {
      ExpectSameBits(output.narrow(0, p * 7, 7), OddBfloat16Bits(p));
    }
    const CollectiveRecord record = comm.log().Records().back();
    EXPECT_FALSE(record.emulated);
    EXPECT_EQ(record.dtype, "bfloat16");
    EXPECT_EQ(record.transport_dtype, "float16");
  });
}

TEST_P(CommunicatorTest, Int16AndBoolMoveThroughCopyCollectives) {
  Run([&](Communicator& comm) {
    const at::Tensor shorts = at::arange(-3, 3, at::kShort) * (comm.rank() + 1);
    at::Tensor gathered = at::empty({n() * 6}, at::kShort);
    ASSERT_TRUE(comm.AllGather(shorts, gathered).ok());
    for (int p = 0; p < n(); ++p) {
      ExpectEqual(gathered.narrow(0, p * 6, 6),
                  at::arange(-3, 3, at::kShort) * (p + 1));
    }
    at::Tensor flags = at::full({4}, comm.rank() == 0, at::kBool);
    ASSERT_TRUE(comm.Broadcast(flags, 0).ok());
    ExpectEqual(flags, at::ones({4}, at::kBool));
  });
}

// Every flat all-gather algorithm: the explicit ones, then kAuto.
constexpr AllGatherAlgorithm kAllGatherAlgorithms[] = {
    AllGatherAlgorithm::kList, AllGatherAlgorithm::kDirect,
    AllGatherAlgorithm::kAuto};

TEST_P(CommunicatorTest, AllGatherFlatPlacesRankPInputAtBlockP) {
  Run([&](Communicator& comm) {
    for (AllGatherAlgorithm algorithm : kAllGatherAlgorithms) {
      SCOPED_TRACE(std::string(AllGatherAlgorithmName(algorithm)));
      comm.SetAllGatherAlgorithm(algorithm);
      // 5 elements per rank (no multiple of n), flat output.
      at::Tensor output = at::empty({n() * 5}, at::kFloat);
      ASSERT_TRUE(comm.AllGather(Ramp(5, comm.rank() + 1), output).ok());
      for (int p = 0; p < n(); ++p) {
        ExpectEqual(output.narrow(0, p * 5, 5), Ramp(5, p + 1));
      }
      // (2, 3) per rank into (2n, 3): a concatenation along dim 0.
      const at::Tensor input = Ramp(6, comm.rank() + 1).view({2, 3});
      at::Tensor stacked = at::empty({2 * n(), 3}, at::kFloat);
      ASSERT_TRUE(comm.AllGather(input, stacked).ok());
      for (int p = 0; p < n(); ++p) {
        ExpectEqual(stacked.narrow(0, 2 * p, 2), Ramp(6, p + 1).view({2, 3}));
      }
      // bfloat16 moves as float16 bits: NaN payloads and -0 survive.
      const at::Tensor odd =
          at::tensor({-0.0, 1e-40, 3.0 + comm.rank()}, at::kFloat)
              .to(at::kBFloat16);
      at::Tensor gathered = at::empty({3 * n()}, at::kBFloat16);
      ASSERT_TRUE(comm.AllGather(odd, gathered).ok());
      for (int p = 0; p < n(); ++p) {
        ExpectSameBits(gathered.narrow(0, 3 * p, 3),
                       at::tensor({-0.0, 1e-40, 3.0 + p}, at::kFloat)
                           .to(at::kBFloat16));
      }
    }
  });
}

TEST_P(CommunicatorTest, AllGatherInPlaceFromOwnBlockOfOutput) {
  Run([&](Communicator& comm) {
    for (AllGatherAlgorithm algorithm : kAllGatherAlgorithms) {
      SCOPED_TRACE(std::string(AllGatherAlgorithmName(algorithm)));
      comm.SetAllGatherAlgorithm(algorithm);
      at::Tensor output = at::zeros({n() * 3}, at::kLong);
      at::Tensor mine = output.narrow(0, comm.rank() * 3, 3);
      mine.copy_(Ramp(3, comm.rank() + 1, at::kLong));
      ASSERT_TRUE(comm.AllGather(mine, output).ok());
      for (int p = 0; p < n(); ++p) {
        ExpectEqual(output.narrow(0, p * 3, 3), Ramp(3, p + 1, at::kLong));
      }
    }
  });
}

TEST_P(CommunicatorTest, AllGatherRecordNamesTheAlgorithmThatRan) {
  Run([&](Communicator& comm) {
    at::Tensor output = at::empty({2 * n()});
    comm.SetAllGatherAlgorithm(AllGatherAlgorithm::kList);
    ASSERT_TRUE(comm.AllGather(at::ones({2}), output).ok());
    comm.SetAllGatherAlgorithm(AllGatherAlgorithm::kDirect);
    ASSERT_TRUE(comm.AllGather(at::ones({2}), output).ok());
    const std::vector<CollectiveRecord> records = comm.log().Records();
    ASSERT_EQ(records.size(), 2u);
    EXPECT_EQ(records[0].algorithm, "gloo_allgather_list");
    EXPECT_EQ(records[1].algorithm, "gloo_send_recv_direct");
    // The byte model does not depend on the algorithm.
    EXPECT_EQ(records[0].bytes_sent, records[1].bytes_sent);
    EXPECT_EQ(records[0].bytes_received, records[1].bytes_received);
  });
}

TEST_P(CommunicatorTest, AllGatherListFillsOneTensorPerRank) {
  Run([&](Communicator& comm) {
    std::vector<at::Tensor> outputs;
    for (int p = 0; p < n(); ++p)
      outputs.push_back(at::empty({2, 2}, at::kInt));
    ASSERT_TRUE(
        comm.AllGatherList(Ramp(4, comm.rank() + 1, at::kInt).view({2, 2}),
                           outputs)
            .ok());
    for (int p = 0; p < n(); ++p) {
      ExpectEqual(outputs[p], Ramp(4, p + 1, at::kInt).view({2, 2}));
    }
  });
}

// Row counts per rank, hand-written, with zeros and sizes no world size
// divides. Index: world size.
const std::vector<std::vector<int64_t>> kGatherCounts = {
    {}, {3}, {2, 0}, {1, 0, 4}, {3, 1, 0, 2}};

// The rows rank p contributes: (count, 2), value p*100 + row*10 + column.
at::Tensor RowsOf(int p, int64_t count, at::ScalarType dtype = at::kFloat) {
  at::Tensor rows = at::arange(count, at::kLong).unsqueeze(1) * 10 +
                    at::arange(2, at::kLong).unsqueeze(0) + p * 100;
  return rows.to(dtype);
}

TEST_P(CommunicatorTest, AllGatherVConcatenatesUnevenRowCounts) {
  Run([&](Communicator& comm) {
    const std::vector<int64_t>& counts = kGatherCounts[n()];
    int64_t total = 0;
    for (int64_t count : counts) total += count;
    at::Tensor output = at::empty({total, 2}, at::kFloat);
    ASSERT_TRUE(comm.AllGatherV(RowsOf(comm.rank(), counts[comm.rank()]),
                                output, counts)
                    .ok());
    int64_t offset = 0;
    for (int p = 0; p < n(); ++p) {
      ExpectEqual(output.narrow(0, offset, counts[p]), RowsOf(p, counts[p]));
      offset += counts[p];
    }
  });
}

constexpr int64_t kChunkBytes = 12;

// The record's name for `algorithm` on a call Gloo's halving-doubling takes.
std::string ReduceScatterRecordName(ReduceScatterAlgorithm algorithm) {
  switch (algorithm) {
    case ReduceScatterAlgorithm::kHalvingDoubling:
      return "gloo_reduce_scatter_halving_doubling";
    case ReduceScatterAlgorithm::kChunked:
      return "gloo_send_recv_chunked(12 B/peer)+overlapped_reduce";
    default:
      return "gloo_alltoall_base+local_reduce";
  }
}

class ReduceScatterTest
    : public ::testing::TestWithParam<std::tuple<int, ReduceScatterAlgorithm>> {
 protected:
  int n() const { return std::get<0>(GetParam()); }
  void Run(const std::function<void(Communicator&)>& body) {
    ThreadRanksOptions options;
    options.reduce_scatter_algorithm = std::get<1>(GetParam());
    // kChunked's chunk: 3 float32 (1 float64, 6 float16) per peer and step,
    // a size no block here is a multiple of, so every call runs several
    // steps with a shorter last one.
    options.reduce_scatter_chunk_bytes = kChunkBytes;
    const absl::Status status = RunRanksAsThreads(n(), body, options);
    ASSERT_TRUE(status.ok()) << status;
  }
};

INSTANTIATE_TEST_SUITE_P(
    WorldSizesAndAlgorithms, ReduceScatterTest,
    ::testing::Combine(
        ::testing::Values(1, 2, 3, 4),
        ::testing::Values(ReduceScatterAlgorithm::kAuto,
                          ReduceScatterAlgorithm::kAllToAll,
                          ReduceScatterAlgorithm::kHalvingDoubling,
                          ReduceScatterAlgorithm::kChunked)),
    [](const auto& info) {
      return "n" + std::to_string(std::get<0>(info.param)) + "_" +
             std::string(ReduceScatterAlgorithmName(std::get<1>(info.param)));
    });

TEST_P(ReduceScatterTest, EachRankGetsTheSumOfItsBlock) {
  Run([&](Communicator& comm) {
    // Rank r's input: (r+1) * (1, 2, ..., 5n); rank q's block: elements
    // [5q, 5q+5), which sum to n(n+1)/2 * (5q+1, ..., 5q+5).
    for (at::ScalarType dtype :
         {at::kFloat, at::kDouble, at::kInt, at::kLong, at::kHalf}) {
      const at::Tensor input = Ramp(5 * n(), comm.rank() + 1, dtype);
      at::Tensor output = at::empty({5}, dtype);
      ASSERT_TRUE(comm.ReduceScatter(input, output).ok());
      ExpectEqual(
          output,
          Ramp(5 * n(), Triangle(n()), dtype).narrow(0, 5 * comm.rank(), 5));
    }
  });
}

TEST_P(ReduceScatterTest, MaxMinAvgOfRanks) {
  Run([&](Communicator& comm) {
    const at::Tensor input = at::full({3 * n()}, comm.rank(), at::kFloat);
    at::Tensor max = at::empty({3}), min = at::empty({3}), avg = at::empty({3});
    ASSERT_TRUE(comm.ReduceScatter(input, max, ReduceOp::kMax).ok());
    ASSERT_TRUE(comm.ReduceScatter(input, min, ReduceOp::kMin).ok());
    ASSERT_TRUE(comm.ReduceScatter(input, avg, ReduceOp::kAvg).ok());
    ExpectEqual(max, at::full({3}, n() - 1, at::kFloat));
    ExpectEqual(min, at::zeros({3}, at::kFloat));
    ExpectEqual(avg, at::full({3}, (n() - 1) / 2.0, at::kFloat));
  });
}

TEST_P(ReduceScatterTest, OutputMayBeTheRanksOwnBlockOfInput) {
  Run([&](Communicator& comm) {
    at::Tensor buffer = Ramp(4 * n(), comm.rank() + 1);
    at::Tensor mine = buffer.narrow(0, 4 * comm.rank(), 4);
    ASSERT_TRUE(comm.ReduceScatter(buffer, mine).ok());
    ExpectEqual(mine,
                Ramp(4 * n(), Triangle(n())).narrow(0, 4 * comm.rank(), 4));
  });
}

TEST_P(ReduceScatterTest, Bfloat16IsEmulatedInFloat32) {
  Run([&](Communicator& comm) {
    const at::Tensor input = Ramp(2 * n(), comm.rank() + 1, at::kBFloat16);
    at::Tensor output = at::empty({2}, at::kBFloat16);
    ASSERT_TRUE(comm.ReduceScatter(input, output).ok());
    ExpectEqual(output, Ramp(2 * n(), Triangle(n()), at::kBFloat16)
                            .narrow(0, 2 * comm.rank(), 2));
    const CollectiveRecord record = comm.log().Records().back();
    EXPECT_TRUE(record.emulated);
    EXPECT_EQ(record.transport_dtype, "float32");
  });
}

// Index: world size.
const std::vector<std::vector<int64_t>> kScatterCounts = {
    {}, {5}, {0, 3}, {0, 2, 3}, {1, 2, 0, 4}};

// Rows in all and the first row of `rank`'s block.
std::pair<int64_t, int64_t> TotalAndOffset(const std::vector<int64_t>& counts,
                                           int rank) {
  int64_t total = 0, offset = 0;
  for (size_t p = 0; p < counts.size(); ++p) {
    if (static_cast<int>(p) < rank) offset += counts[p];
    total += counts[p];
  }
  return {total, offset};
}

TEST_P(ReduceScatterTest, ReduceScatterVSumsUnevenRowBlocks) {
  Run([&](Communicator& comm) {
    const std::vector<int64_t>& counts = kScatterCounts[n()];
    const auto [total, offset] = TotalAndOffset(counts, comm.rank());
    // Rank r's input: (r+1) * (1, 2, ..., 2*total) as (total, 2).
    const at::Tensor input = Ramp(2 * total, comm.rank() + 1).view({total, 2});
    at::Tensor output = at::empty({counts[comm.rank()], 2}, at::kFloat);
    ASSERT_TRUE(comm.ReduceScatterV(input, output, counts).ok());
    ExpectEqual(output, Ramp(2 * total, Triangle(n()))
                            .view({total, 2})
                            .narrow(0, offset, counts[comm.rank()]));
  });
}

TEST_P(ReduceScatterTest, ReduceScatterVSumsInt64BeyondDoublePrecision) {
  // Exact mode's gradient reduction (trainer/exact/exact.h): int64 values whose
  // sums a float or double transport would round (2^60 + small odd parts).
  Run([&](Communicator& comm) {
    const std::vector<int64_t>& counts = kScatterCounts[n()];
    const auto [total, offset] = TotalAndOffset(counts, comm.rank());
    const int64_t big = int64_t{1} << 60;
    const at::Tensor ramp = at::arange(total, at::kLong);
    const at::Tensor input = ramp * 2 + 1 + (comm.rank() == 0 ? big : 0);
    at::Tensor output = at::empty({counts[comm.rank()]}, at::kLong);
    ASSERT_TRUE(comm.ReduceScatterV(input, output, counts).ok());
    const at::Tensor expected =
        (ramp * 2 + 1) * n() + big;  // exact in int64
    ExpectEqual(output, expected.narrow(0, offset, counts[comm.rank()]));
  });
}

TEST_P(ReduceScatterTest, ManyStepsOfUnevenBlocksSumExactly) {
  Run([&](Communicator& comm) {
    // Blocks of 37, 0, 101, 64 rows (the first n of them) with 12-byte chunks:
    // up to 34 steps, each block ending in a partial chunk, one block empty.
    const std::vector<int64_t> all_counts = {37, 0, 101, 64};
    const std::vector<int64_t> counts(all_counts.begin(),
                                      all_counts.begin() + n());
    int64_t total = 0, offset = 0;
    for (int p = 0; p < n(); ++p) {
      if (p < comm.rank()) offset += counts[p];
      total += counts[p];
    }
    const at::Tensor input = Ramp(total, comm.rank() + 1);
    at::Tensor output = at::empty({counts[comm.rank()]});
    ASSERT_TRUE(comm.ReduceScatterV(input, output, counts).ok());
    ExpectEqual(output,
                Ramp(total, Triangle(n())).narrow(0, offset, counts[comm.rank()]));
  });
}

TEST_P(ReduceScatterTest, TwoInFlightAtOnceKeepTheirMessagesApart) {
  Run([&](Communicator& comm) {
    // Same shapes, different values, both in flight with an all-reduce
    // between them: a message matched to the wrong collective shows.
    const at::Tensor first_input = Ramp(7 * n(), comm.rank() + 1);
    const at::Tensor second_input = Ramp(7 * n(), 100 * (comm.rank() + 1));
    at::Tensor first = at::empty({7}), second = at::empty({7});
    at::Tensor ones = at::ones({3});
    CollectiveHandle a = comm.ReduceScatterAsync(first_input, first);
    CollectiveHandle b = comm.AllReduceAsync(ones);
    CollectiveHandle c = comm.ReduceScatterAsync(second_input, second);
    ASSERT_TRUE(c.Wait().ok());
    ASSERT_TRUE(a.Wait().ok());
    ASSERT_TRUE(b.Wait().ok());
    ExpectEqual(first, Ramp(7 * n(), Triangle(n())).narrow(0, 7 * comm.rank(), 7));
    ExpectEqual(second,
                Ramp(7 * n(), 100 * Triangle(n())).narrow(0, 7 * comm.rank(), 7));
    ExpectEqual(ones, at::full({3}, n(), at::kFloat));
  });
}

TEST_P(ReduceScatterTest, RecordNamesTheAlgorithmThatRan) {
  Run([&](Communicator& comm) {
    at::Tensor output = at::empty({2});
    ASSERT_TRUE(comm.ReduceScatter(at::ones({2 * n()}), output).ok());
    at::Tensor half_output = at::empty({2}, at::kHalf);
    ASSERT_TRUE(
        comm.ReduceScatter(at::ones({2 * n()}, at::kHalf), half_output).ok());
    const std::vector<CollectiveRecord> records = comm.log().Records();
    ASSERT_EQ(records.size(), 2u);
    const ReduceScatterAlgorithm chosen = std::get<1>(GetParam());
    if (chosen == ReduceScatterAlgorithm::kHalvingDoubling) {
      EXPECT_EQ(records[0].algorithm, "gloo_reduce_scatter_halving_doubling");
      // float16 is not instantiated for Gloo's algorithm: the fallback says so.
      EXPECT_THAT(records[1].algorithm,
                  HasSubstr("halving_doubling does not take float16"));
      EXPECT_THAT(records[1].algorithm, HasSubstr("gloo_alltoall_base"));
    } else if (chosen == ReduceScatterAlgorithm::kAllToAll) {
      EXPECT_EQ(records[0].algorithm, "gloo_alltoall_base+local_reduce");
      EXPECT_EQ(records[1].algorithm, "gloo_alltoall_base+local_reduce");
    } else if (chosen == ReduceScatterAlgorithm::kChunked) {
      EXPECT_EQ(records[0].algorithm, ReduceScatterRecordName(chosen));
      // 12 bytes of float16 are 6 elements: the chunk is the same in bytes.
      EXPECT_EQ(records[1].algorithm, ReduceScatterRecordName(chosen));
    }
  });
}

TEST_P(ReduceScatterTest, HalvingDoublingFallsBackForEmptyBlocks) {
  if (n() == 1) GTEST_SKIP() << "needs a rank with an empty block";
  Run([&](Communicator& comm) {
    // Rank 1's block is empty: Gloo's halving-doubling hangs on some such
    // layouts (n = 3, {2, 0, 3}), so it is never given one.
    std::vector<int64_t> counts(n(), 2);
    counts[1] = 0;
    const int64_t total = 2 * (n() - 1);
    at::Tensor output = at::empty({counts[comm.rank()]});
    ASSERT_TRUE(comm.ReduceScatterV(at::ones({total}), output, counts).ok());
    ExpectEqual(output, at::full({counts[comm.rank()]}, n(), at::kFloat));
    const CollectiveRecord record = comm.log().Records().back();
    const ReduceScatterAlgorithm chosen = std::get<1>(GetParam());
    if (chosen == ReduceScatterAlgorithm::kHalvingDoubling) {
      EXPECT_EQ(record.algorithm,
                "gloo_alltoall_base+local_reduce (halving_doubling skipped for "
                "empty blocks)");
    } else if (chosen != ReduceScatterAlgorithm::kAuto) {
      EXPECT_EQ(record.algorithm, ReduceScatterRecordName(chosen));
    }
  });
}

// What a memory walk adds as collective temporaries: a reduce-scatter's
// blocks (n x its shard) and all_gather_v's replicated input (n x the input)
// count while the collective holds them, and nothing once it is done.
TEST_P(CommunicatorTest, TemporaryBytesCountWhatACollectiveHoldsUntilItIsDone) {
  // Wait() returns once c10d has dropped its references, so the blocks are
  // gone as soon as the handle is.
  auto expect_none = [](Communicator& comm) {
    EXPECT_EQ(comm.TemporaryBytes(), 0);
  };
  Run([&](Communicator& comm) {
    EXPECT_EQ(comm.TemporaryBytes(), 0);
    const std::vector<int64_t> counts(n(), 100);
    const at::Tensor input = at::ones({100 * n()});
    at::Tensor shard = at::empty({100});
    CollectiveHandle reduce = comm.ReduceScatterVAsync(input, shard, counts);
    EXPECT_EQ(comm.TemporaryBytes(), 4 * 100 * n());
    ASSERT_TRUE(reduce.Wait().ok());
    reduce = CollectiveHandle();
    expect_none(comm);
    ExpectEqual(shard, at::full({100}, n(), at::kFloat));

    at::Tensor gathered = at::empty({100 * n()});
    CollectiveHandle gather = comm.AllGatherVAsync(shard, gathered, counts);
    EXPECT_EQ(comm.TemporaryBytes(), 4 * 100 * n());
    ASSERT_TRUE(gather.Wait().ok());
    gather = CollectiveHandle();
    expect_none(comm);
    // In place (DDP's buckets): nothing allocated.
    CollectiveHandle all_reduce = comm.AllReduceAsync(gathered);
    EXPECT_EQ(comm.TemporaryBytes(), 0);
    ASSERT_TRUE(all_reduce.Wait().ok());
  });
}

TEST_P(CommunicatorTest, AllToAllSendsBlockPToRankP) {
  Run([&](Communicator& comm) {
    // 2 rows of 3 per peer; row j of the block rank r sends to p holds
    // r*100 + p*10 + j.
    const int r = comm.rank();
    at::Tensor input = at::empty({2 * n(), 3}, at::kFloat);
    for (int p = 0; p < n(); ++p) {
      for (int j = 0; j < 2; ++j) input[2 * p + j].fill_(r * 100 + p * 10 + j);
    }
    at::Tensor output = at::empty_like(input);
    ASSERT_TRUE(comm.AllToAll(input, output).ok());
    for (int p = 0; p < n(); ++p) {
      for (int j = 0; j < 2; ++j) {
        ExpectEqual(output[2 * p + j],
                    at::full({3}, p * 100 + r * 10 + j, at::kFloat));
      }
    }
  });
}

// rows[src][dst]: rows rank src sends to rank dst. Hand-written, with zeros.
// Index: world size.
const std::vector<std::vector<std::vector<int64_t>>> kAllToAllVRows = {
    {},
    {{3}},
    {{1, 2}, {0, 3}},
    {{2, 0, 1}, {1, 3, 0}, {0, 2, 2}},
    {{1, 0, 2, 1}, {0, 0, 3, 1}, {2, 1, 0, 0}, {1, 2, 1, 3}},
};

// The block rank src sends to rank dst: (rows, 2), value
// src*1000 + dst*100 + row*10 + column.
at::Tensor Block(int src, int dst, int64_t rows) {
  return RowsOf(0, rows) + (src * 1000 + dst * 100);
}

TEST_P(CommunicatorTest, AllToAllVFollowsTheRowTable) {
  Run([&](Communicator& comm) {
    const auto& table = kAllToAllVRows[n()];
    const int r = comm.rank();
    std::vector<int64_t> send_counts, recv_counts;
    std::vector<at::Tensor> send_blocks, expected_blocks;
    for (int p = 0; p < n(); ++p) {
      send_counts.push_back(table[r][p]);
      recv_counts.push_back(table[p][r]);
      send_blocks.push_back(Block(r, p, table[r][p]));
      expected_blocks.push_back(Block(p, r, table[p][r]));
    }
    const at::Tensor input = at::cat(send_blocks);
    at::Tensor output = at::empty({at::cat(expected_blocks).size(0), 2});
    ASSERT_TRUE(comm.AllToAllV(input, output, send_counts, recv_counts).ok());
    ExpectEqual(output, at::cat(expected_blocks));
  });
}

TEST_P(CommunicatorTest, SendRecvAroundARing) {
  if (n() == 1) GTEST_SKIP() << "a ring needs a peer";
  Run([&](Communicator& comm) {
    const int next = (comm.rank() + 1) % n();
    const int previous = (comm.rank() + n() - 1) % n();
    CollectiveHandle sent = comm.SendAsync(Ramp(6, comm.rank() + 1), next, 7);
    at::Tensor received = at::empty({6});
    ASSERT_TRUE(comm.Recv(received, previous, 7).ok());
    ASSERT_TRUE(sent.Wait().ok());
    ExpectEqual(received, Ramp(6, previous + 1));
  });
}

TEST_P(CommunicatorTest, BarrierCompletesAndIsRecorded) {
  Run([&](Communicator& comm) {
    ASSERT_TRUE(comm.Barrier().ok());
    const CollectiveRecord record = comm.log().Records().back();
    EXPECT_EQ(record.op, CollectiveOp::kBarrier);
    EXPECT_EQ(record.bytes_sent, 0);
    EXPECT_EQ(record.bytes_received, 0);
  });
}

TEST_P(CommunicatorTest, AsyncAllReducesCompleteInAnyWaitOrderAndIssueInOrder) {
  Run([&](Communicator& comm) {
    std::vector<std::pair<CollectiveEvent, int64_t>>
        events;  // this thread only
    const collective::CollectiveLog::ObserverId observer_id = comm.log().AddObserver(
        [&](CollectiveEvent event, const CollectiveRecord& record) {
          events.emplace_back(event, record.sequence);
        });
    std::vector<at::Tensor> buckets;
    std::vector<CollectiveHandle> handles;
    for (int b = 0; b < 4; ++b) {
      buckets.push_back(Ramp(3 + b, comm.rank() + 1));
      handles.push_back(comm.AllReduceAsync(buckets.back()));
    }
    for (int b = 3; b >= 0; --b) {
      ASSERT_TRUE(handles[b].Wait().ok());
      EXPECT_TRUE(handles[b].IsCompleted());
      ExpectEqual(buckets[b], Ramp(3 + b, Triangle(n())));
    }
    comm.log().RemoveObserver(observer_id);
    const std::vector<std::pair<CollectiveEvent, int64_t>> expected = {
        {CollectiveEvent::kIssued, 0},    {CollectiveEvent::kIssued, 1},
        {CollectiveEvent::kIssued, 2},    {CollectiveEvent::kIssued, 3},
        {CollectiveEvent::kCompleted, 3}, {CollectiveEvent::kCompleted, 2},
        {CollectiveEvent::kCompleted, 1}, {CollectiveEvent::kCompleted, 0}};
    EXPECT_EQ(events, expected);
    for (const CollectiveRecord& record : comm.log().Records()) {
      EXPECT_TRUE(record.completed);
      EXPECT_TRUE(record.status.ok());
      EXPECT_LE(record.issue_time, record.transfer_done_time);
      EXPECT_LE(record.transfer_done_time, record.wait_return_time);
      EXPECT_EQ(record.duration,
                record.transfer_done_time - record.issue_time);
      EXPECT_LE(record.wait_time,
                record.wait_return_time - record.issue_time);
    }
  });
}

// A slow peer issues late and the caller waits later still: the record's
// transfer completion is the transport's own (stamped by the c10d work's
// completion callback), not when the caller happened to call Wait().
TEST(CommunicatorTiming, LateWaitStillShowsTheTrueTransferCompletion) {
  constexpr absl::Duration kPeerDelay = absl::Milliseconds(300);
  constexpr absl::Duration kCallerDelay = absl::Milliseconds(1500);
  CollectiveRecord record;
  absl::Time wait_called;
  const absl::Status status = RunRanksAsThreads(2, [&](Communicator& comm) {
    at::Tensor tensor = at::ones({1024});
    if (comm.rank() == 1) {
      absl::SleepFor(kPeerDelay);
      ASSERT_TRUE(comm.AllReduce(tensor).ok());
      return;
    }
    CollectiveHandle handle = comm.AllReduceAsync(tensor);
    absl::SleepFor(kCallerDelay);
    wait_called = absl::Now();
    ASSERT_TRUE(handle.Wait().ok());
    record = comm.log().Records().back();
  });
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_TRUE(record.completed);
  // The transfer could not finish before the peer issued, and did finish
  // long before the caller asked (the peer's 300 ms against the caller's
  // 1.5 s: a margin of 1.2 s for a loaded machine).
  EXPECT_LT(record.transfer_done_time, wait_called);
  EXPECT_GE(record.duration, kPeerDelay - absl::Milliseconds(50));
  EXPECT_LT(record.duration, kCallerDelay);
  EXPECT_GE(record.wait_return_time, wait_called);
  // Nothing was left to wait for: the caller was not blocked.
  EXPECT_LT(record.wait_time, absl::Milliseconds(500));
}

TEST_P(CommunicatorTest, EveryRankNumbersTheSameCallsAlike) {
  std::vector<std::vector<std::pair<int64_t, CollectiveOp>>> seen(n());
  Run([&](Communicator& comm) {
    at::Tensor t = at::ones({4 * n()});
    at::Tensor gathered = at::empty({4 * n() * n()});
    at::Tensor shard = at::empty({4});
    ASSERT_TRUE(comm.AllReduce(t).ok());
    ASSERT_TRUE(comm.Broadcast(t, 0).ok());
    ASSERT_TRUE(comm.AllGather(t, gathered).ok());
    ASSERT_TRUE(comm.ReduceScatter(t, shard).ok());
    ASSERT_TRUE(comm.Barrier().ok());
    for (const CollectiveRecord& record : comm.log().Records()) {
      seen[comm.rank()].emplace_back(record.sequence, record.op);
    }
  });
  const std::vector<std::pair<int64_t, CollectiveOp>> expected = {
      {0, CollectiveOp::kAllReduce},
      {1, CollectiveOp::kBroadcast},
      {2, CollectiveOp::kAllGather},
      {3, CollectiveOp::kReduceScatter},
      {4, CollectiveOp::kBarrier}};
  for (int r = 0; r < n(); ++r) EXPECT_EQ(seen[r], expected) << "rank " << r;
}

// Bytes per call against figures computed by hand (docs/collective.md), n = 3,
// float32 (4 bytes), S in nccl-tests' convention.
TEST(CommunicatorBytes, RecordsMatchHandComputedFiguresOnThreeRanks) {
  struct Expected {
    CollectiveOp op;
    // Per rank.
    std::vector<int64_t> elements, size_bytes, sent, received;
  };
  const std::vector<Expected> expected = {
      // all_reduce of 12 floats: S = 48, 2 * 2/3 * 48 = 64 each way.
      {CollectiveOp::kAllReduce,
       {12, 12, 12},
       {48, 48, 48},
       {64, 64, 64},
       {64, 64, 64}},
      // bf16 all_reduce of 12: S = 24 bytes, moved as float32: 64 each way.
      {CollectiveOp::kAllReduce,
       {12, 12, 12},
       {24, 24, 24},
       {64, 64, 64},
       {64, 64, 64}},
      // broadcast of 12 floats from rank 0: the root sends 48, others get 48.
      {CollectiveOp::kBroadcast,
       {12, 12, 12},
       {48, 48, 48},
       {48, 0, 0},
       {0, 48, 48}},
      // all_gather of 4 floats per rank: S = 48 (the output), 2/3 * 48 = 32.
      {CollectiveOp::kAllGather,
       {12, 12, 12},
       {48, 48, 48},
       {32, 32, 32},
       {32, 32, 32}},
      // reduce_scatter of 12 floats (S = input = 48): 32 each way.
      {CollectiveOp::kReduceScatter,
       {12, 12, 12},
       {48, 48, 48},
       {32, 32, 32},
       {32, 32, 32}},
      // all_to_all of 12 floats: 32 each way.
      {CollectiveOp::kAllToAll,
       {12, 12, 12},
       {48, 48, 48},
       {32, 32, 32},
       {32, 32, 32}},
      // all_gather_v, counts {1, 0, 4} rows of 2 floats (8 bytes a row):
      // rank 0 sends its 1 row to 2 peers (16), receives 0 + 4 rows (32); ...
      {CollectiveOp::kAllGatherV,
       {10, 10, 10},
       {40, 40, 40},
       {16, 0, 64},
       {32, 40, 8}},
      // reduce_scatter_v, counts {2, 0, 3} rows of 8 bytes: rank r sends the
      // rows of the others' blocks, receives its block from 2 peers.
      {CollectiveOp::kReduceScatterV,
       {10, 10, 10},
       {40, 40, 40},
       {24, 40, 16},
       {32, 0, 48}},
      // all_to_allv with kAllToAllVRows[3] = {{2,0,1},{1,3,0},{0,2,2}} rows of
      // 8 bytes: rank 0 sends 0+1 rows, receives 1+0; rank 1 sends 1+0,
      // receives 0+2; rank 2 sends 0+2, receives 1+0.
      // S is this rank's input: 3, 4 and 4 rows.
      {CollectiveOp::kAllToAllV,
       {6, 8, 8},
       {24, 32, 32},
       {8, 8, 16},
       {8, 16, 8}},
      {CollectiveOp::kBarrier, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}},
      // 0 sends 12 floats to 1.
      {CollectiveOp::kSend, {12, 12, 12}, {48, 48, 48}, {48, 0, 0}, {0, 0, 0}},
  };
  std::vector<std::vector<CollectiveRecord>> records(3);
  const absl::Status status = RunRanksAsThreads(3, [&](Communicator& comm) {
    const int r = comm.rank();
    at::Tensor twelve = at::ones({12});
    ASSERT_TRUE(comm.AllReduce(twelve).ok());
    ASSERT_TRUE(comm.AllReduce(at::ones({12}, at::kBFloat16)).ok());
    ASSERT_TRUE(comm.Broadcast(twelve, 0).ok());
    at::Tensor gathered = at::empty({12});
    ASSERT_TRUE(comm.AllGather(at::ones({4}), gathered).ok());
    at::Tensor shard = at::empty({4});
    ASSERT_TRUE(comm.ReduceScatter(twelve, shard).ok());
    at::Tensor exchanged = at::empty({12});
    ASSERT_TRUE(comm.AllToAll(twelve, exchanged).ok());
    const std::vector<int64_t> gather_counts = {1, 0, 4};
    at::Tensor gathered_v = at::empty({5, 2});
    ASSERT_TRUE(comm.AllGatherV(at::ones({gather_counts[r], 2}), gathered_v,
                                gather_counts)
                    .ok());
    const std::vector<int64_t> scatter_counts = {2, 0, 3};
    at::Tensor scattered_v = at::empty({scatter_counts[r], 2});
    ASSERT_TRUE(
        comm.ReduceScatterV(at::ones({5, 2}), scattered_v, scatter_counts)
            .ok());
    const auto& rows = kAllToAllVRows[3];
    std::vector<int64_t> send_counts, recv_counts;
    for (int p = 0; p < 3; ++p) {
      send_counts.push_back(rows[r][p]);
      recv_counts.push_back(rows[p][r]);
    }
    at::Tensor input =
        at::ones({send_counts[0] + send_counts[1] + send_counts[2], 2});
    at::Tensor output =
        at::empty({recv_counts[0] + recv_counts[1] + recv_counts[2], 2});
    ASSERT_TRUE(comm.AllToAllV(input, output, send_counts, recv_counts).ok());
    ASSERT_TRUE(comm.Barrier().ok());
    if (r == 0) {
      ASSERT_TRUE(comm.Send(twelve, 1).ok());
    } else if (r == 1) {
      ASSERT_TRUE(comm.Recv(twelve, 0).ok());
    }
    records[r] = comm.log().Records();

    // Totals add up the records.
    int64_t sent = 0, received = 0;
    for (const CollectiveRecord& record : records[r]) {
      sent += record.bytes_sent;
      received += record.bytes_received;
    }
    EXPECT_EQ(comm.log().Totals().bytes_sent, sent);
    EXPECT_EQ(comm.log().Totals().bytes_received, received);
  });
  ASSERT_TRUE(status.ok()) << status;
  for (int r = 0; r < 3; ++r) {
    // Rank 2 takes no part in the send; rank 1's last record is the recv.
    const size_t calls = r == 2 ? expected.size() - 1 : expected.size();
    ASSERT_EQ(records[r].size(), calls) << "rank " << r;
    for (size_t i = 0; i < calls; ++i) {
      const CollectiveRecord& record = records[r][i];
      const Expected& want = expected[i];
      SCOPED_TRACE("rank " + std::to_string(r) + ", call " + std::to_string(i) +
                   " " + std::string(CollectiveOpName(record.op)));
      EXPECT_EQ(record.sequence, static_cast<int64_t>(i));
      if (r == 1 && want.op == CollectiveOp::kSend) {
        EXPECT_EQ(record.op, CollectiveOp::kRecv);
        EXPECT_EQ(record.bytes_sent, 0);
        EXPECT_EQ(record.bytes_received, 48);
        continue;
      }
      EXPECT_EQ(record.op, want.op);
      EXPECT_EQ(record.elements, want.elements[r]);
      EXPECT_EQ(record.size_bytes, want.size_bytes[r]);
      EXPECT_EQ(record.bytes_sent, want.sent[r]);
      EXPECT_EQ(record.bytes_received, want.received[r]);
    }
  }
}

}  // namespace
}  // namespace mtb::collective
