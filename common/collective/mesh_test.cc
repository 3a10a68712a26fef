// The 2-D rank mesh on thread ranks: coordinates (tp innermost), which world
// ranks each group sums over, that each group is a communicator of its own
// (sequence numbers, byte totals, flight identity) and that shapes tp does
// not divide are refused before anything connects.
#include "common/collective/mesh.h"

#include <cmath>
#include <vector>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "common/collective/test_util.h"
#include "gtest/gtest.h"

namespace mtb::collective {
namespace {

MeshOptions OptionsFor(int tp) {
  MeshOptions options;
  options.tp = tp;
  options.communicator.gloo_hostname = "127.0.0.1";
  options.communicator.transport = Transport::kTcp;
  options.identity.run_id = "mesh_test";
  return options;
}

TEST(MeshCoordinates, TpIsInnermost) {
  // world 6 = dp 3 x tp 2.
  const std::vector<std::pair<int, int>> expected = {
      {0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 0}, {2, 1}};
  for (int w = 0; w < 6; ++w) {
    const MeshCoordinates at = MeshCoordinatesOf(w, 2);
    EXPECT_EQ(at.dp, expected[w].first) << w;
    EXPECT_EQ(at.tp, expected[w].second) << w;
    EXPECT_EQ(MeshWorldRank(at, 2), w);
  }
}

TEST(MeshShape, TpMustDivideTheWorld) {
  EXPECT_TRUE(ValidateMeshShape(4, 2).ok());
  EXPECT_TRUE(ValidateMeshShape(4, 4).ok());
  const absl::Status refused = ValidateMeshShape(4, 3);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("--tp=3"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("world size 4"), std::string::npos) << refused;
  EXPECT_FALSE(ValidateMeshShape(4, 0).ok());
}

// Each rank contributes 10^w: a group's sum names exactly its members.
TEST(RankMesh, GroupsSumOverTheirOwnRanksOnly) {
  const absl::Status status = RunRanksAsThreads(4, [](Communicator& world) {
    absl::StatusOr<std::unique_ptr<RankMesh>> mesh =
        RankMesh::Create(&world, OptionsFor(2));
    ASSERT_TRUE(mesh.ok()) << mesh.status();
    RankMesh& m = **mesh;
    const int w = world.rank();
    EXPECT_EQ(m.tp_size(), 2);
    EXPECT_EQ(m.dp_size(), 2);
    EXPECT_EQ(m.tp_rank(), w % 2);
    EXPECT_EQ(m.dp_rank(), w / 2);
    EXPECT_EQ(m.tp()->world_size(), 2);
    EXPECT_EQ(m.dp()->world_size(), 2);
    EXPECT_EQ(m.tp()->rank(), w % 2);
    EXPECT_EQ(m.dp()->rank(), w / 2);
    EXPECT_NE(m.tp(), &world);
    EXPECT_NE(m.dp(), &world);

    const double mine = std::pow(10.0, w);
    at::Tensor tp_sum = at::full({3}, mine, at::kDouble);
    at::Tensor dp_sum = at::full({5}, mine, at::kDouble);
    ASSERT_TRUE(m.tp()->AllReduce(tp_sum).ok());
    ASSERT_TRUE(m.dp()->AllReduce(dp_sum).ok());
    // tp group of w: {2*(w/2), 2*(w/2)+1}; dp group: {w%2, w%2+2}.
    const int g = w / 2, j = w % 2;
    EXPECT_EQ(tp_sum[0].item<double>(),
              std::pow(10.0, 2 * g) + std::pow(10.0, 2 * g + 1));
    EXPECT_EQ(dp_sum[0].item<double>(),
              std::pow(10.0, j) + std::pow(10.0, j + 2));

    // Own communicators: own sequence numbers and byte totals (3 and 5
    // doubles, 2 ranks: 2(n-1)/n x bytes = the bytes), the world's untouched.
    EXPECT_EQ(m.tp()->log().NextSequence(), 1);
    EXPECT_EQ(m.dp()->log().NextSequence(), 1);
    EXPECT_EQ(world.log().NextSequence(), 0);
    EXPECT_EQ(m.tp()->log().Totals().bytes_sent, 3 * 8);
    EXPECT_EQ(m.dp()->log().Totals().bytes_sent, 5 * 8);
    EXPECT_EQ(world.log().Totals().bytes_sent, 0);
    // Own flight recorder identities.
    EXPECT_EQ(m.tp()->flight_recorder().identity().group,
              absl::StrCat("tp.", g));
    EXPECT_EQ(m.dp()->flight_recorder().identity().group,
              absl::StrCat("dp.", j));
    EXPECT_EQ(m.tp()->flight_recorder().identity().run_id, "mesh_test");
    EXPECT_TRUE(m.SetTimeout(absl::Seconds(20)).ok());
    EXPECT_EQ(m.tp()->timeout(), absl::Seconds(20));
    EXPECT_EQ(m.dp()->timeout(), absl::Seconds(20));
    EXPECT_EQ(world.timeout(), absl::Seconds(20));
  });
  EXPECT_TRUE(status.ok()) << status;
}

// tp = 1 and tp = world: the whole-world group is a communicator of its own
// (its figures are not the world's), the other a one-rank communicator.
TEST(RankMesh, AWholeWorldGroupIsACommunicatorOfItsOwn) {
  for (int tp : {1, 2}) {
    SCOPED_TRACE(absl::StrCat("tp=", tp));
    const absl::Status status = RunRanksAsThreads(2, [tp](Communicator& world) {
      absl::StatusOr<std::unique_ptr<RankMesh>> mesh =
          RankMesh::Create(&world, OptionsFor(tp));
      ASSERT_TRUE(mesh.ok()) << mesh.status();
      Communicator* whole = tp == 1 ? (*mesh)->dp() : (*mesh)->tp();
      Communicator* single = tp == 1 ? (*mesh)->tp() : (*mesh)->dp();
      EXPECT_NE(whole, &world);
      EXPECT_EQ(whole->world_size(), 2);
      EXPECT_EQ(whole->rank(), world.rank());
      EXPECT_EQ(single->world_size(), 1);
      EXPECT_EQ(single->rank(), 0);
      at::Tensor x = at::full({2}, world.rank() + 1.0, at::kFloat);
      ASSERT_TRUE(single->AllReduce(x).ok());
      EXPECT_EQ(x[0].item<float>(), world.rank() + 1.0f);
      ASSERT_TRUE(whole->AllReduce(x).ok());
      EXPECT_EQ(x[0].item<float>(), 3.0f);
      EXPECT_EQ(world.log().NextSequence(), 0);
    });
    EXPECT_TRUE(status.ok()) << status;
  }
}

TEST(RankMesh, RefusesATpThatDoesNotDivideTheWorld) {
  const absl::Status status = RunRanksAsThreads(2, [](Communicator& world) {
    absl::StatusOr<std::unique_ptr<RankMesh>> mesh =
        RankMesh::Create(&world, OptionsFor(3));
    EXPECT_EQ(mesh.status().code(), absl::StatusCode::kInvalidArgument);
  });
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace mtb::collective
