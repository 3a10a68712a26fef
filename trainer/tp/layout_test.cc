// The tensor-parallel parameter layout on thread ranks: which split each
// GPT parameter gets, that gathering every rank's local part gives the global
// tensor back bit for bit, and that the local-to-global runs (what
// checkpoints save) cover every global element exactly once.
#include "trainer/tp/layout.h"

#include <vector>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "common/collective/test_util.h"
#include "gtest/gtest.h"

namespace mtb::tp {
namespace {

TEST(SplitOf, FollowsMegatronsColumnAndRowParallelLayers) {
  EXPECT_EQ(SplitOf("wte"), Split::kRows);
  EXPECT_EQ(SplitOf("wpe"), Split::kReplicated);
  EXPECT_EQ(SplitOf("h.0.ln_1.weight"), Split::kReplicated);
  EXPECT_EQ(SplitOf("h.3.attn.c_attn.weight"), Split::kQkvRows);
  EXPECT_EQ(SplitOf("h.3.attn.c_attn.bias"), Split::kQkvRows);
  EXPECT_EQ(SplitOf("h.1.attn.c_proj.weight"), Split::kColumns);
  EXPECT_EQ(SplitOf("h.1.attn.c_proj.bias"), Split::kReplicated);
  EXPECT_EQ(SplitOf("h.1.mlp.c_fc.weight"), Split::kRows);
  EXPECT_EQ(SplitOf("h.1.mlp.c_fc.bias"), Split::kRows);
  EXPECT_EQ(SplitOf("h.1.mlp.c_proj.weight"), Split::kColumns);
  EXPECT_EQ(SplitOf("h.1.mlp.c_proj.bias"), Split::kReplicated);
  EXPECT_EQ(SplitOf("ln_f.bias"), Split::kReplicated);
}

TEST(LocalPart, QkvTakesThisRanksHeadsOfEachThird) {
  const at::Tensor qkv = at::arange(12, at::kFloat);  // D = 4
  EXPECT_TRUE(at::equal(LocalPart(Split::kQkvRows, qkv, 1, 2),
                        at::tensor({2.f, 3.f, 6.f, 7.f, 10.f, 11.f})));
  EXPECT_EQ(LocalShape(Split::kQkvRows, {12, 4}, 2),
            (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(LocalShape(Split::kColumns, {4, 16}, 2),
            (std::vector<int64_t>{4, 8}));
}

struct Case {
  Split split;
  std::vector<int64_t> shape;
};

TEST(Layout, GatheringTheLocalPartsGivesTheGlobalTensorAndRunsCoverIt) {
  const std::vector<Case> cases = {
      {Split::kRows, {8, 3}},     {Split::kRows, {8}},
      {Split::kQkvRows, {12, 4}}, {Split::kQkvRows, {12}},
      {Split::kColumns, {3, 8}},  {Split::kReplicated, {5, 2}}};
  for (int n : {1, 2, 4}) {
    SCOPED_TRACE(absl::StrCat(n, " ranks"));
    ASSERT_TRUE(collective::RunRanksAsThreads(n, [&](collective::Communicator&
                                                          comm) {
      for (const Case& c : cases) {
        const int64_t numel = at::ones(c.shape).numel();
        const at::Tensor global =
            at::arange(numel, at::kFloat).reshape(c.shape);
        const at::Tensor local = LocalPart(c.split, global, comm.rank(), n);
        EXPECT_EQ(local.sizes().vec(), LocalShape(c.split, c.shape, n));
        absl::StatusOr<at::Tensor> gathered = GatherGlobal(c.split, local, comm);
        ASSERT_TRUE(gathered.ok()) << gathered.status();
        EXPECT_TRUE(at::equal(*gathered, global));
        // Runs over a window of the local part map its values to the same
        // global elements (the global tensor holds each element's index).
        const at::Tensor flat = local.reshape({-1});
        const int64_t offset = flat.numel() / 3;
        const int64_t length = flat.numel() - offset;
        int64_t covered = 0;
        for (const GlobalRun& run : GlobalRuns(c.split, c.shape, comm.rank(),
                                               n, offset, length)) {
          EXPECT_TRUE(at::equal(
              flat.narrow(0, run.local_offset, run.numel),
              at::arange(run.global_offset, run.global_offset + run.numel,
                         at::kFloat)));
          covered += run.numel;
        }
        EXPECT_EQ(covered, length);
      }
    }).ok());
  }
}

}  // namespace
}  // namespace mtb::tp
