// The dispatch buffers of a hand-written routing table, compared exactly, and
// the classic packing bug (rows in expert order, counts per destination)
// caught by the same comparison.
#include "moe_comm/layer.h"

#include <vector>

#include "ATen/ATen.h"
#include "ATen/Parallel.h"
#include "common/collective/test_util.h"
#include "gtest/gtest.h"

namespace mtb::moe_comm {
namespace {

// Two ranks, four experts (rank 0: experts 0 and 1; rank 1: 2 and 3), four
// tokens per rank, top-1, no drops. Each token's row is 10 * onehot(expert)
// (the router is [I | 0], so it picks that expert) plus a last column that
// names the token: 100 * rank + token (the router does not see it).
constexpr int kExperts = 4;
const std::vector<std::vector<int>> kRoute = {{2, 0, 2, 1}, {1, 3, 0, 3}};

at::Tensor TokensOf(int rank) {
  at::Tensor x = at::zeros({4, kExperts + 1});
  for (int t = 0; t < 4; ++t) {
    x[t][kRoute[rank][t]] = 10.0;
    x[t][kExperts] = 100.0 * rank + t;
  }
  return x;
}

nn::MoeParams BlockOf(int rank) {
  at::Generator generator = at::detail::createCPUGenerator(3);
  nn::MoeParams whole;
  whole.router_weight = at::cat({at::eye(kExperts), at::zeros({kExperts, 1})}, 1);
  whole.fc_weight = at::normal(0, 0.3, {kExperts, 6, kExperts + 1}, generator);
  whole.fc_bias = at::normal(0, 0.1, {kExperts, 6}, generator);
  whole.proj_weight = at::normal(0, 0.3, {kExperts, kExperts + 1, 6}, generator);
  whole.proj_bias = at::normal(0, 0.1, {kExperts, kExperts + 1}, generator);
  nn::MoeParams block = whole;
  block.fc_weight = whole.fc_weight.slice(0, 2 * rank, 2 * rank + 2);
  block.fc_bias = whole.fc_bias.slice(0, 2 * rank, 2 * rank + 2);
  block.proj_weight = whole.proj_weight.slice(0, 2 * rank, 2 * rank + 2);
  block.proj_bias = whole.proj_bias.slice(0, 2 * rank, 2 * rank + 2);
  return block;
}

// By hand. Rank 0 sends, grouped by destination then expert: to rank 0
// expert 0 (its token 1), expert 1 (token 3); to rank 1 expert 2 (tokens 0,
// 2). Rank 1 sends to rank 0 expert 0 (token 2), expert 1 (token 0); to rank
// 1 expert 3 (tokens 1, 3). So rank 0 receives (source 0: tokens 1, 3;
// source 1: tokens 2, 0) and rank 1 receives (source 0: 0, 2; source 1: 1, 3).
const std::vector<std::vector<std::pair<int, int>>> kReceived = {
    {{0, 1}, {0, 3}, {1, 2}, {1, 0}}, {{0, 0}, {0, 2}, {1, 1}, {1, 3}}};

at::Tensor ExpectedReceived(int rank) {
  std::vector<at::Tensor> rows;
  for (const auto& [source, token] : kReceived[rank]) {
    rows.push_back(TokensOf(source)[token]);
  }
  return at::stack(rows);
}

std::vector<LayerOutput> RunTable(PackingOrder packing) {
  at::set_num_threads(1);
  std::vector<LayerOutput> outputs(2);
  LayerOptions options;
  options.num_experts = kExperts;
  options.top_k = 1;
  options.capacity_factor = 100;
  options.packing = packing;
  const absl::Status ran =
      collective::RunRanksAsThreads(2, [&](collective::Communicator& comm) {
        absl::StatusOr<LayerOutput> out = ExpertParallelMoe(
            BlockOf(comm.rank()), TokensOf(comm.rank()), options, comm);
        ASSERT_TRUE(out.ok()) << out.status();
        outputs[comm.rank()] = *std::move(out);
      });
  EXPECT_TRUE(ran.ok()) << ran;
  return outputs;
}

TEST(ExpertParallelMoe, HandRoutingTableGivesTheHandComputedReceiveBuffers) {
  const std::vector<LayerOutput> outputs =
      RunTable(PackingOrder::kDestinationThenExpert);
  const std::vector<std::vector<int64_t>> recv_by_expert = {{1, 1, 1, 1},
                                                            {2, 0, 0, 2}};
  for (int rank = 0; rank < 2; ++rank) {
    const LayerTrace& trace = outputs[rank].trace;
    EXPECT_EQ(trace.send_counts, (std::vector<int64_t>{2, 2})) << rank;
    EXPECT_EQ(trace.recv_counts, (std::vector<int64_t>{2, 2})) << rank;
    EXPECT_TRUE(at::equal(trace.recv_counts_by_expert.reshape({-1}),
                          at::tensor(recv_by_expert[rank], at::kLong)))
        << rank << ": " << trace.recv_counts_by_expert;
    ASSERT_TRUE(trace.dispatched.defined());
    EXPECT_TRUE(at::equal(trace.dispatched, ExpectedReceived(rank)))
        << "rank " << rank << " received\n" << trace.dispatched;
    EXPECT_EQ(trace.global_dropped, 0);
    EXPECT_EQ(trace.global_assignments, 8);
    // Every token came back through its expert, gate 1 (top-1).
    for (int t = 0; t < 4; ++t) {
      const int expert = kRoute[rank][t];
      const nn::MoeParams owner = BlockOf(expert / 2);
      const at::Tensor expected =
          nn::ExpertForward(owner, expert % 2, TokensOf(rank).slice(0, t, t + 1));
      EXPECT_TRUE(at::allclose(outputs[rank].out.slice(0, t, t + 1), expected,
                               1e-5, 1e-6))
          << "rank " << rank << " token " << t;
    }
  }
}

TEST(ExpertParallelMoe, PackingInExpertOrderSendsTheWrongRows) {
  const std::vector<LayerOutput> outputs =
      RunTable(PackingOrder::kExpertThenDestination);
  // The counts per destination are unchanged, which is why the bug is silent...
  EXPECT_EQ(outputs[0].trace.send_counts, (std::vector<int64_t>{2, 2}));
  // ...but rank 0's buffer [t1 (e0), t0 (e2), t2 (e2), t3 (e1)] sends its
  // tokens 1 and 0 to rank 0, where 1 and 3 belong.
  EXPECT_FALSE(at::equal(outputs[0].trace.dispatched, ExpectedReceived(0)));
  EXPECT_EQ(outputs[0].trace.dispatched[1][kExperts].item<float>(), 0.0f);
}

}  // namespace
}  // namespace mtb::moe_comm
