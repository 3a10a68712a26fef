#include "doctor/group_checks.h"

#include <mutex>
#include <vector>

#include "common/collective/test_util.h"
#include "gtest/gtest.h"

namespace mtb::doctor {
namespace {

// Every rank's checks, by rank.
std::vector<std::vector<DoctorCheck>> RunGroup(int world_size,
                                          const GroupCheckOptions& options) {
  std::vector<std::vector<DoctorCheck>> by_rank(world_size);
  std::mutex mutex;
  const absl::Status status = collective::RunRanksAsThreads(
      world_size, [&](collective::Communicator& communicator) {
        std::vector<DoctorCheck> checks = CheckGroup(communicator, options);
        std::lock_guard<std::mutex> lock(mutex);
        by_rank[communicator.rank()] = std::move(checks);
      });
  EXPECT_TRUE(status.ok()) << status;
  return by_rank;
}

const DoctorCheck* Find(const std::vector<DoctorCheck>& checks,
                        const std::string& name) {
  for (const DoctorCheck& check : checks) {
    if (check.name() == name) return &check;
  }
  return nullptr;
}

TEST(GroupChecks, AHealthyGroupPassesEveryCheckOnEveryRank) {
  GroupCheckOptions options;
  options.expected_world_size = 3;
  options.bandwidth_bytes = 1 << 20;
  options.bandwidth_iters = 2;
  for (const std::vector<DoctorCheck>& checks : RunGroup(3, options)) {
    ASSERT_EQ(checks.size(), 4u);
    for (const DoctorCheck& check : checks) {
      EXPECT_EQ(check.status(), "pass") << check.name() << ": " << check.value();
    }
    EXPECT_GT(Find(checks, "bandwidth")->measured(), 0);
  }
}

TEST(GroupChecks, AWrongWorldSizeAndAMisroutedRowFailOnEveryRank) {
  GroupCheckOptions options;
  options.expected_world_size = 4;
  options.bandwidth_bytes = 1 << 16;
  options.bandwidth_iters = 1;
  options.testonly_corrupt = true;  // rank 1 sees one wrong element
  for (const std::vector<DoctorCheck>& checks : RunGroup(2, options)) {
    EXPECT_EQ(Find(checks, "world size")->status(), "fail");
    EXPECT_NE(Find(checks, "world size")->value().find("--expected_world_size=4"),
              std::string::npos);
    EXPECT_EQ(Find(checks, "all_reduce")->status(), "pass");
    // Rank 0 received correct rows but reports the group's verdict too.
    EXPECT_EQ(Find(checks, "all_to_allv")->status(), "fail");
  }
}

}  // namespace
}  // namespace mtb::doctor
