#include "moe_comm/check.h"

#include <string>
#include <tuple>
#include <vector>

#include "ATen/ATen.h"
#include "ATen/Parallel.h"
#include "absl/strings/str_cat.h"
#include "common/collective/test_util.h"
#include "gtest/gtest.h"
#include "moe_comm/model.h"
#include "moe_comm/options.h"

namespace mtb::moe_comm {
namespace {

// Small and deliberately uneven: 3 experts per rank, N = 12 tokens per rank
// (not a multiple of E), routing skewed zipf:1 toward expert 0.
MoeConfig SmallConfig(int world_size, int top_k, double capacity_factor) {
  MoeConfig config;
  config.set_tokens_per_rank(12);
  config.set_hidden(8);
  config.set_ffn_hidden(12);
  config.set_num_experts(3 * world_size);
  config.set_top_k(top_k);
  config.set_capacity_factor(capacity_factor);
  config.set_skew("zipf:1");
  return config;
}

std::vector<absl::StatusOr<ConfigCheck>> RunOnThreads(
    int world_size, const MoeConfig& config, const MoeCheckHooks& hooks = {}) {
  at::set_num_threads(1);
  std::vector<absl::StatusOr<ConfigCheck>> results(
      world_size, absl::UnknownError("rank did not run"));
  MoeCommOptions options = DefaultOptions();
  // At these sizes (n·N <= 48 tokens) the reordered fp32 sums stay far below
  // torch.testing's atol 1e-5; rtol 1e-5 rather than 1.3e-6 because the
  // router gradient and routing sums are added in another order.
  options.set_rtol(1e-5);
  options.set_atol(1e-5);
  const absl::Status ran = collective::RunRanksAsThreads(
      world_size, [&](collective::Communicator& comm) {
        results[comm.rank()] = RunMoeCheck(config, options, comm, hooks);
      });
  EXPECT_TRUE(ran.ok()) << ran;
  return results;
}

std::string Failures(const equivalence::CheckResult& check) {
  std::string lines;
  for (const auto& t : check.tensors()) {
    if (!t.ok()) absl::StrAppend(&lines, t.name(), ": ", t.message(), "\n");
  }
  for (const auto& c : check.collectives()) {
    if (!c.ok()) {
      absl::StrAppend(&lines, c.phase(), " ", c.op(), ": ", c.count(), " calls ",
                      c.bytes_sent(), "/", c.bytes_received(), " B, expected ",
                      c.expected_count(), " calls ", c.expected_bytes(), " B\n");
    }
  }
  return lines;
}

// (ranks, top_k, capacity factor): 0.5 drops assignments on every rank
// count; 100 never drops (capacity >= N * k).
using Case = std::tuple<int, int, double>;
class MoeEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(MoeEquivalence, ExpertParallelLayerEqualsTheReferenceForwardAndBackward) {
  const auto [ranks, top_k, capacity_factor] = GetParam();
  const MoeConfig config = SmallConfig(ranks, top_k, capacity_factor);
  const auto results = RunOnThreads(ranks, config);
  for (int rank = 0; rank < ranks; ++rank) {
    ASSERT_TRUE(results[rank].ok()) << "rank " << rank << ": "
                                    << results[rank].status();
    const ConfigCheck& result = *results[rank];
    EXPECT_TRUE(result.check().pass())
        << "rank " << rank << ":\n" << Failures(result.check());
    EXPECT_EQ(result.check().tensors_size(), 9);
    EXPECT_EQ(result.assignments(), int64_t{12} * ranks * top_k);
    if (capacity_factor < 1) {
      EXPECT_GT(result.dropped(), 0) << "the case must drop tokens";
    } else {
      EXPECT_EQ(result.dropped(), 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Ranks, MoeEquivalence,
    ::testing::Combine(::testing::Values(1, 2, 4), ::testing::Values(1, 2),
                       ::testing::Values(0.5, 100.0)),
    [](const ::testing::TestParamInfo<Case>& info) {
      return absl::StrCat(std::get<0>(info.param), "Ranks_Top",
                          std::get<1>(info.param),
                          std::get<2>(info.param) < 1 ? "_Drops" : "_NoDrops");
    });

TEST(MoeEquivalence, ClassicPackingBugFailsTheCheckNamingTheOutput) {
  MoeCheckHooks hooks;
  hooks.packing = PackingOrder::kExpertThenDestination;
  const auto results = RunOnThreads(2, SmallConfig(2, 2, 100.0), hooks);
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(results[rank].ok()) << results[rank].status();
    const equivalence::CheckResult& check = results[rank]->check();
    EXPECT_FALSE(check.pass());
    for (const auto& t : check.tensors()) {
      if (t.name() == "out" || t.name() == "grad_fc_weight") {
        EXPECT_FALSE(t.ok()) << t.name();
      }
      // Routing and its losses do not depend on the packing.
      if (t.name() == "aux_loss" || t.name() == "z_loss") {
        EXPECT_TRUE(t.ok()) << t.name();
      }
    }
  }
}

TEST(MoeEquivalence, PerturbedExpertGradientFailsNamingIt) {
  MoeCheckHooks hooks;
  hooks.perturb.perturb_rank = 1;
  hooks.perturb.perturb_tensor = "grad_proj_weight";
  const auto results = RunOnThreads(2, SmallConfig(2, 1, 0.5), hooks);
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(results[rank].ok()) << results[rank].status();
    const equivalence::CheckResult& check = results[rank]->check();
    EXPECT_FALSE(check.pass());
    for (const auto& t : check.tensors()) {
      EXPECT_EQ(t.ok(), t.name() != "grad_proj_weight") << t.name();
    }
    EXPECT_TRUE(check.collective_mismatch_ranks().empty());
  }
}


// The layer trains: plain SGD on the expert weights alone lowers a
// regression loss on 2 ranks. Their gradients exist only through combine's
// reverse all-to-all (and dispatch's for the input), so with a backward that
// returns zeros the loss stays put and this test fails (tried by hand, as the
// equivalence tests above fail too).
TEST(ExpertParallelMoe, SgdThroughDispatchAndCombineLowersTheLoss) {
  at::set_num_threads(1);
  const MoeConfig config = SmallConfig(2, 2, 1.0);
  std::vector<double> first(2), last(2);
  const absl::Status ran =
      collective::RunRanksAsThreads(2, [&](collective::Communicator& comm) {
        const MoeInstance instance = SeededInstance(config, 99, 2);
        nn::MoeParams p = ExpertBlock(instance.whole, comm.rank(), 2);
        std::vector<at::Tensor*> trained = {&p.fc_weight, &p.fc_bias,
                                            &p.proj_weight, &p.proj_bias};
        for (at::Tensor* t : trained) *t = t->detach().clone().requires_grad_(true);
        const at::Tensor x = RankRows(instance.x, comm.rank(), 2);
        const at::Tensor target = RankRows(instance.upstream, comm.rank(), 2);
        LayerOptions options;
        options.num_experts = config.num_experts();
        options.top_k = 2;
        options.capacity_factor = 1.0;
        for (int step = 0; step < 30; ++step) {
          absl::StatusOr<LayerOutput> out = ExpertParallelMoe(p, x, options, comm);
          ASSERT_TRUE(out.ok()) << out.status();
          const at::Tensor loss = (out->out - target).pow(2).mean();
          loss.backward();
          at::Tensor global = loss.detach().reshape({1}).clone();
          ASSERT_TRUE(comm.AllReduce(global, collective::ReduceOp::kAvg).ok());
          if (step == 0) first[comm.rank()] = global.item<double>();
          last[comm.rank()] = global.item<double>();
          at::NoGradGuard no_grad;
          for (at::Tensor* t : trained) {
            ASSERT_TRUE(t->grad().defined());
            t->sub_(t->grad(), 0.5);
            t->mutable_grad().zero_();
          }
        }
      });
  ASSERT_TRUE(ran.ok()) << ran;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_LT(last[rank], 0.9 * first[rank])
        << "rank " << rank << ": " << first[rank] << " -> " << last[rank];
  }
}

}  // namespace
}  // namespace mtb::moe_comm
