// Preconditions are checked before any communication and named with their
// arithmetic; a refused call breaks the communicator (this rank skipped a
// collective), and later calls name that first failure.
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "common/collective/communicator.h"
#include "common/collective/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mtb::collective {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

void RunOn(int world_size, const std::function<void(Communicator&)>& body) {
  const absl::Status status = RunRanksAsThreads(world_size, body);
  ASSERT_TRUE(status.ok()) << status;
}

// Runs `call` on a fresh communicator of `world_size` ranks (every rank makes
// the same bad call, so none waits for another) and checks the refusal.
void ExpectInvalid(int world_size,
                   const std::function<absl::Status(Communicator&)>& call,
                   const std::string& message_part) {
  RunOn(world_size, [&](Communicator& comm) {
    const absl::Status status = call(comm);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(message_part));
  });
}

TEST(CommunicatorErrors,
     AllGatherOutputSizeNamesTheArithmeticThenRefusesLaterCalls) {
  RunOn(3, [](Communicator& comm) {
    at::Tensor output = at::empty({10});
    const absl::Status status = comm.AllGather(at::ones({3}), output);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(),
              "all_gather on rank " + std::to_string(comm.rank()) +
                  " of 3: output has 10 elements, expected world_size 3 * "
                  "input 3 = 9");
    EXPECT_EQ(comm.health(), status);

    const absl::Status later = comm.Barrier();
    EXPECT_EQ(later.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(later.message()),
                StartsWith("barrier on rank " + std::to_string(comm.rank()) +
                           " of 3: refused, the communicator is unusable"));
    EXPECT_THAT(std::string(later.message()),
                HasSubstr("output has 10 elements"));
    // Refused calls are not issued: no sequence number, no record.
    EXPECT_EQ(comm.log().NextSequence(), 0);
  });
}

TEST(CommunicatorErrors, ReduceScatterInputSizeNamesTheArithmetic) {
  ExpectInvalid(
      3,
      [](Communicator& comm) {
        at::Tensor output = at::empty({3});
        return comm.ReduceScatter(at::ones({10}), output);
      },
      "input has 10 elements, expected world_size 3 * output 3 = 9");
}

TEST(CommunicatorErrors, AllToAllRowsNotDivisibleByWorldSizePointsToAllToAllV) {
  ExpectInvalid(
      3,
      [](Communicator& comm) {
        at::Tensor output = at::empty({10});
        return comm.AllToAll(at::ones({10}), output);
      },
      "input has 10 rows along dim 0, not divisible by world_size 3; use "
      "AllToAllV");
}

TEST(CommunicatorErrors, AllToAllVRowsMustMatchTheCounts) {
  ExpectInvalid(
      2,
      [](Communicator& comm) {
        at::Tensor output = at::empty({3, 2});
        return comm.AllToAllV(at::ones({4, 2}), output, {1, 2}, {2, 1});
      },
      "input has 4 rows, expected sum(send_counts) = 3");
}

TEST(CommunicatorErrors, CountsNeedOneEntryPerRank) {
  ExpectInvalid(
      2,
      [](Communicator& comm) {
        at::Tensor output = at::empty({3});
        return comm.AllGatherV(at::ones({1}), output, {1, 1, 1});
      },
      "counts has 3 entries, expected one per rank: world_size 2");
}

TEST(CommunicatorErrors, NegativeCountIsRejected) {
  ExpectInvalid(
      2,
      [](Communicator& comm) {
        at::Tensor output = at::empty({1});
        return comm.ReduceScatterV(at::ones({1}), output, {2, -1});
      },
      "counts[1] is -1; counts must be >= 0");
}

TEST(CommunicatorErrors, RowShapesAfterDimZeroMustMatch) {
  ExpectInvalid(
      1,
      [](Communicator& comm) {
        at::Tensor output = at::empty({2, 4});
        return comm.AllGatherV(at::ones({2, 3}), output, {2});
      },
      "output has shape [2, 4] and input has shape [2, 3]; all dims after dim "
      "0 must match");
}

TEST(CommunicatorErrors, NonContiguousTensorIsRejectedWithItsStrides) {
  ExpectInvalid(
      1,
      [](Communicator& comm) {
        return comm.AllReduce(at::ones({2, 3}).t());
      },
      "tensor is not contiguous (shape [3, 2], strides [1, 3]); pass "
      "tensor.contiguous()");
}

TEST(CommunicatorErrors, BoolCannotBeReduced) {
  ExpectInvalid(
      1,
      [](Communicator& comm) {
        return comm.AllReduce(at::ones({2}, at::kBool));
      },
      "tensor has dtype bool, which it cannot reduce");
}

TEST(CommunicatorErrors, AvgNeedsAFloatingDtype) {
  ExpectInvalid(
      1,
      [](Communicator& comm) {
        return comm.AllReduce(at::ones({2}, at::kInt), ReduceOp::kAvg);
      },
      "avg needs a floating dtype, got int32");
}

TEST(CommunicatorErrors, OutputDtypeMustMatchInput) {
  ExpectInvalid(
      1,
      [](Communicator& comm) {
        at::Tensor output = at::empty({2}, at::kDouble);
        return comm.AllGather(at::ones({2}), output);
      },
      "output has dtype float64 but input has float32; they must match");
}

TEST(CommunicatorErrors, BroadcastRootMustBeARank) {
  ExpectInvalid(
      2, [](Communicator& comm) { return comm.Broadcast(at::ones({2}), 2); },
      "root 2 is not a rank in [0, 2)");
}

TEST(CommunicatorErrors, SendToSelfIsRejected) {
  ExpectInvalid(
      2,
      [](Communicator& comm) { return comm.Send(at::ones({2}), comm.rank()); },
      "is this rank");
}

TEST(CommunicatorErrors, AllToAllNeedsSeparateBuffers) {
  ExpectInvalid(
      1,
      [](Communicator& comm) {
        at::Tensor buffer = at::ones({4});
        return comm.AllToAll(buffer, buffer);
      },
      "input and output share memory");
}

TEST(CommunicatorErrors, AllGatherInputOverlappingAnotherBlockIsRejected) {
  ExpectInvalid(
      2,
      [](Communicator& comm) {
        at::Tensor output = at::zeros({4});
        // Rank r's block is [2r, 2r+2); [1, 3) is nobody's.
        return comm.AllGather(output.narrow(0, 1, 2), output);
      },
      "input overlaps output other than as this rank's own block");
}

TEST(CommunicatorErrors, SetTimeoutIsRefusedWhileACollectiveIsInFlight) {
  RunOn(2, [](Communicator& comm) {
    CollectiveHandle handle = comm.AllReduceAsync(at::ones({4}));
    const absl::Status refused = comm.SetTimeout(absl::Seconds(5));
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(refused.message()), HasSubstr("still in flight"));
    ASSERT_TRUE(handle.Wait().ok());
    ASSERT_TRUE(comm.SetTimeout(absl::Seconds(5)).ok());
    EXPECT_EQ(comm.timeout(), absl::Seconds(5));
    // Still healthy: a refused SetTimeout issues nothing.
    EXPECT_TRUE(comm.Barrier().ok());
  });
}

TEST(CommunicatorErrors, EmptyHandleWaitIsFailedPrecondition) {
  CollectiveHandle handle;
  EXPECT_EQ(handle.Wait().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(handle.sequence(), -1);
}

TEST(CommunicatorErrors, CreateRejectsARankOutsideTheWorld) {
  CommunicatorOptions options;
  options.rank = 2;
  options.world_size = 2;
  const auto communicator = Communicator::Create(Store::InProcess(), options);
  EXPECT_EQ(communicator.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(communicator.status().message()),
              HasSubstr("rank 2 is not in [0, world_size 2)"));
}

TEST(CommunicatorErrors, ReduceScatterAlgorithmNamesParse) {
  EXPECT_EQ(*ParseReduceScatterAlgorithm("alltoall"),
            ReduceScatterAlgorithm::kAllToAll);
  EXPECT_EQ(*ParseReduceScatterAlgorithm("halving_doubling"),
            ReduceScatterAlgorithm::kHalvingDoubling);
  EXPECT_EQ(*ParseReduceScatterAlgorithm("chunked"),
            ReduceScatterAlgorithm::kChunked);
  EXPECT_EQ(ParseReduceScatterAlgorithm("ring").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseAllGatherAlgorithm("direct"), AllGatherAlgorithm::kDirect);
  EXPECT_EQ(*ParseAllGatherAlgorithm("list"), AllGatherAlgorithm::kList);
  EXPECT_EQ(ParseAllGatherAlgorithm("ring").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CommunicatorErrors, SendWithAReservedTagIsRejected) {
  ExpectInvalid(
      2,
      [](Communicator& comm) {
        return comm.Send(at::ones({2}), 1 - comm.rank(), kFirstReservedTag);
      },
      "tag 1073741824 is reserved");
}

TEST(CommunicatorErrors, CreateRejectsANonPositiveChunk) {
  CommunicatorOptions options;
  options.reduce_scatter_chunk_bytes = 0;
  const auto communicator = Communicator::Create(Store::InProcess(), options);
  EXPECT_EQ(communicator.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(communicator.status().message()),
              HasSubstr("reduce_scatter_chunk_bytes must be positive, got 0"));
}

}  // namespace
}  // namespace mtb::collective
