#include "common/nn/tensor_parallel.h"

#include <cstdint>
#include <vector>

#include "ATen/ATen.h"
#include "common/libtorch/allclose.h"
#include "common/base/counter_rng.h"
#include "common/collective/test_util.h"
#include "common/nn/init.h"
#include "gtest/gtest.h"

namespace mtb {
namespace nn {
namespace {

using collective::CollectiveOp;
using collective::Communicator;

// The same tensor on every rank: a pure function of `id`.
at::Tensor Seeded(at::IntArrayRef shape, uint64_t id) {
  return CounterNormalTensor(shape, CounterKey({99, id}));
}

// The ops this rank issued since `first_sequence`, in order.
std::vector<CollectiveOp> OpsSince(Communicator& comm, int64_t first_sequence) {
  std::vector<CollectiveOp> ops;
  for (const collective::CollectiveRecord& record : comm.log().Records()) {
    if (record.sequence >= first_sequence) ops.push_back(record.op);
  }
  return ops;
}

void ExpectClose(const at::Tensor& actual, const at::Tensor& expected,
                 const char* what) {
  const AllCloseResult result = AllClose(actual, expected);
  EXPECT_TRUE(result.ok) << what << ": " << result.message;
}

class TensorParallel : public ::testing::TestWithParam<int> {};

TEST_P(TensorParallel, CopyToRegionIsIdentityForwardAndAllReducesBackward) {
  ASSERT_TRUE(collective::RunRanksAsThreads(GetParam(), [](Communicator& comm) {
    const at::Tensor x = Seeded({2, 3}, 1).requires_grad_(true);
    // Each rank weights the output differently; x's gradient is the sum.
    const at::Tensor weights = Seeded({comm.world_size(), 2, 3}, 2);
    const int64_t start = comm.log().NextSequence();
    const at::Tensor y = CopyToTensorParallelRegion(x, &comm);
    EXPECT_TRUE(at::equal(y, x));
    EXPECT_TRUE(OpsSince(comm, start).empty());
    (y * weights[comm.rank()]).sum().backward();
    ExpectClose(x.grad(), weights.sum(0), "x.grad");
    EXPECT_EQ(OpsSince(comm, start),
              std::vector<CollectiveOp>{CollectiveOp::kAllReduce});
  }).ok());
}

TEST_P(TensorParallel, ReduceFromRegionSumsForwardAndPassesGradientThrough) {
  ASSERT_TRUE(collective::RunRanksAsThreads(GetParam(), [](Communicator& comm) {
    const at::Tensor parts = Seeded({comm.world_size(), 4}, 3);
    const at::Tensor x = parts[comm.rank()].clone().requires_grad_(true);
    const at::Tensor upstream = Seeded({4}, 4);
    const int64_t start = comm.log().NextSequence();
    const at::Tensor y = ReduceFromTensorParallelRegion(x, &comm);
    ExpectClose(y, parts.sum(0), "y");
    (y * upstream).sum().backward();
    EXPECT_TRUE(at::equal(x.grad(), upstream));
    EXPECT_EQ(OpsSince(comm, start),
              std::vector<CollectiveOp>{CollectiveOp::kAllReduce});
  }).ok());
}

TEST_P(TensorParallel, GatherAndScatterAlongTheLastDimAreConjugate) {
  ASSERT_TRUE(collective::RunRanksAsThreads(GetParam(), [](Communicator& comm) {
    const int n = comm.world_size(), r = comm.rank();
    const at::Tensor full = Seeded({2, 3, 2 * n}, 5);
    const at::Tensor upstream = Seeded({2, 3, 2 * n}, 6);
    // Gather: every rank's block of columns, in rank order.
    const at::Tensor shard =
        full.narrow(2, 2 * r, 2).clone().requires_grad_(true);
    const int64_t start = comm.log().NextSequence();
    const at::Tensor gathered = GatherFromTensorParallelRegion(shard, &comm);
    EXPECT_TRUE(at::equal(gathered, full));
    (gathered * upstream).sum().backward();
    EXPECT_TRUE(at::equal(shard.grad(), upstream.narrow(2, 2 * r, 2)));
    EXPECT_EQ(OpsSince(comm, start),
              std::vector<CollectiveOp>{CollectiveOp::kAllGather});
    // Scatter: this rank's block forward, the gathered gradient backward.
    const at::Tensor whole = full.clone().requires_grad_(true);
    const at::Tensor mine = ScatterToTensorParallelRegion(whole, &comm);
    EXPECT_TRUE(at::equal(mine, full.narrow(2, 2 * r, 2)));
    (mine * upstream.narrow(2, 2 * r, 2)).sum().backward();
    // Each rank's gradient block arrives from that rank.
    EXPECT_TRUE(at::equal(whole.grad(), upstream));
  }).ok());
}

TEST_P(TensorParallel, SequenceGatherAndReduceScatterAreConjugate) {
  ASSERT_TRUE(collective::RunRanksAsThreads(GetParam(), [](Communicator& comm) {
    const int n = comm.world_size(), r = comm.rank();
    const int64_t t = 3 * n;  // sequence length
    const at::Tensor full = Seeded({2, t, 4}, 7);
    const at::Tensor upstream = Seeded({n, 2, t, 4}, 8);  // one per rank
    const at::Tensor shard =
        full.narrow(1, 3 * r, 3).clone().requires_grad_(true);
    const int64_t start = comm.log().NextSequence();
    const at::Tensor gathered =
        GatherFromSequenceParallelRegion(shard, 1, &comm);
    EXPECT_TRUE(at::equal(gathered, full));
    (gathered * upstream[r]).sum().backward();
    // Every rank used the gathered tensor: the gradient of this rank's rows
    // is the sum of all ranks' upstream rows.
    ExpectClose(shard.grad(), upstream.sum(0).narrow(1, 3 * r, 3),
                "shard.grad");
    EXPECT_EQ(OpsSince(comm, start),
              (std::vector<CollectiveOp>{CollectiveOp::kAllGather,
                                         CollectiveOp::kReduceScatter}));

    const at::Tensor partials = Seeded({n, 2, t, 4}, 9);
    const at::Tensor partial = partials[r].clone().requires_grad_(true);
    const at::Tensor scattered =
        ReduceScatterToSequenceParallelRegion(partial, 1, &comm);
    ExpectClose(scattered, partials.sum(0).narrow(1, 3 * r, 3), "scattered");
    (scattered * upstream[0].narrow(1, 3 * r, 3)).sum().backward();
    EXPECT_TRUE(at::equal(partial.grad(), upstream[0]));
  }).ok());
}

TEST_P(TensorParallel, SequenceScatterSplitsForwardAndGathersBackward) {
  ASSERT_TRUE(collective::RunRanksAsThreads(GetParam(), [](Communicator& comm) {
    const int n = comm.world_size(), r = comm.rank();
    const int64_t t = 2 * n;
    const at::Tensor full = Seeded({3, t, 4}, 21);
    const at::Tensor upstream = Seeded({3, t, 4}, 22);
    const at::Tensor whole = full.clone().requires_grad_(true);
    const int64_t start = comm.log().NextSequence();
    const at::Tensor mine = ScatterToSequenceParallelRegion(whole, 1, &comm);
    EXPECT_TRUE(at::equal(mine, full.narrow(1, 2 * r, 2)));
    EXPECT_TRUE(OpsSince(comm, start).empty());
    (mine * upstream.narrow(1, 2 * r, 2)).sum().backward();
    // Each rank's rows of the gradient arrive from that rank.
    EXPECT_TRUE(at::equal(whole.grad(), upstream));
    EXPECT_EQ(OpsSince(comm, start),
              std::vector<CollectiveOp>{CollectiveOp::kAllGather});
  }).ok());
}

TEST_P(TensorParallel, VocabParallelEmbeddingEqualsTheWholeTable) {
  ASSERT_TRUE(collective::RunRanksAsThreads(GetParam(), [](Communicator& comm) {
    const int n = comm.world_size(), r = comm.rank();
    const int64_t vocab = 4 * n;
    const at::Tensor table = Seeded({vocab, 5}, 10);
    const at::Tensor tokens =
        at::arange(vocab, at::kLong).flip(0).repeat({2}).view({2, vocab});
    const at::Tensor upstream = Seeded({2, vocab, 5}, 11);
    const at::Tensor whole = table.clone().requires_grad_(true);
    const at::Tensor expected = at::embedding(whole, tokens);
    (expected * upstream).sum().backward();
    const at::Tensor shard =
        table.narrow(0, 4 * r, 4).clone().requires_grad_(true);
    const at::Tensor actual = VocabParallelEmbedding(tokens, shard, &comm);
    EXPECT_TRUE(at::equal(actual, expected));
    (actual * upstream).sum().backward();
    ExpectClose(shard.grad(), whole.grad().narrow(0, 4 * r, 4), "grad");
  }).ok());
}

TEST_P(TensorParallel, VocabParallelCrossEntropyEqualsTheWholeLogits) {
  ASSERT_TRUE(collective::RunRanksAsThreads(GetParam(), [](Communicator& comm) {
    const int n = comm.world_size(), r = comm.rank();
    const int64_t rows = 6, vocab = 3 * n;
    const at::Tensor logits = Seeded({rows, vocab}, 12) * 3.0;
    const at::Tensor targets = at::arange(rows, at::kLong) * 5 % vocab;
    const at::Tensor upstream = Seeded({rows}, 13);
    const at::Tensor whole = logits.clone().requires_grad_(true);
    const at::Tensor expected = at::cross_entropy_loss(
        whole, targets, {}, at::Reduction::None);
    (expected * upstream).sum().backward();

    int64_t widest = 0;
    const at::Tensor shard =
        logits.narrow(1, 3 * r, 3).clone().requires_grad_(true);
    const int64_t start = comm.log().NextSequence();
    const at::Tensor actual = VocabParallelCrossEntropy(
        shard, targets, &comm,
        [&](const at::Tensor& t) { widest = std::max(widest, t.size(-1)); });
    ExpectClose(actual, expected, "loss");
    EXPECT_EQ(OpsSince(comm, start),
              (std::vector<CollectiveOp>{CollectiveOp::kAllReduce,
                                         CollectiveOp::kAllReduce,
                                         CollectiveOp::kAllReduce}));
    (actual * upstream).sum().backward();
    ExpectClose(shard.grad(), whole.grad().narrow(1, 3 * r, 3), "grad");
    EXPECT_EQ(OpsSince(comm, start).size(), 3u) << "backward communicated";
    EXPECT_EQ(widest, 3);
  }).ok());
}

INSTANTIATE_TEST_SUITE_P(Ranks, TensorParallel, ::testing::Values(1, 2, 3),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "Ranks";
                         });

}  // namespace
}  // namespace nn
}  // namespace mtb
