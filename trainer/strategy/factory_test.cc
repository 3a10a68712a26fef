#include "trainer/strategy/factory.h"

#include "gtest/gtest.h"
#include "trainer/tests/test_config.h"
#include "trainer/config/config_names.h"

namespace mtb {
namespace {

TEST(StrategyFactory, EveryRegistryEntryBuildsItsStrategyOnOneRank) {
  for (const StrategyEntry& entry : AllStrategyEntries()) {
    SCOPED_TRACE(entry.name);
    EXPECT_TRUE(HasFactory(entry.kind));
    TrainConfig config = TinyConfig();
    config.set_strategy(*StrategyFromName(entry.name));
    absl::StatusOr<std::unique_ptr<Strategy>> strategy =
        MakeStrategy(config, nullptr);
    ASSERT_TRUE(strategy.ok()) << strategy.status();
    EXPECT_EQ((*strategy)->name(), entry.name);
    EXPECT_EQ((*strategy)->world_size(), 1);
    EXPECT_EQ((*strategy)->backend(), "none");
  }
}

TEST(StrategyFactory, AnUnknownStrategyIsInvalidArgument) {
  TrainConfig config = TinyConfig();
  config.set_strategy(static_cast<TrainConfig::Strategy>(7));
  const absl::Status status = MakeStrategy(config, nullptr).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--strategy=7 is not a strategy"),
            absl::string_view::npos)
      << status;
}

}  // namespace
}  // namespace mtb
