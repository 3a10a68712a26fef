#include "trainer/strategy/registry.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace mtb {
namespace {

// P parameters on N ranks with no units and no buckets: the closed forms'
// leading terms alone.
MemoryInputs Plain(int64_t parameters, int world_size) {
  MemoryInputs in;
  in.parameters = parameters;
  in.world_size = world_size;
  in.grad_sync_every = true;
  return in;
}

int64_t Total(const StateMemory& m) {
  return m.parameters + m.gradients + m.optimizer_state;
}

TEST(StrategyRegistry, EveryStrategyHasOneEntryFoundByItsName) {
  std::vector<std::string> names;
  for (const StrategyEntry& entry : AllStrategyEntries()) {
    names.push_back(entry.name);
    absl::StatusOr<const StrategyEntry*> found = FindStrategy(entry.name);
    ASSERT_TRUE(found.ok()) << entry.name;
    EXPECT_EQ((*found)->kind, entry.kind);
    EXPECT_EQ(&EntryFor(entry.kind), *found);
    EXPECT_NE(std::string(entry.description), "");
  }
  EXPECT_EQ(names, (std::vector<std::string>{"ddp", "zero1", "zero2", "fsdp",
                                             "single"}));
}

TEST(StrategyRegistry, AnUnknownNameIsRefusedWithTheChoices) {
  const absl::Status status = FindStrategy("zero3").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "--strategy=zero3 is not a strategy: use ddp, zero1, zero2, fsdp "
            "(or single, the one-rank reference)");
}

TEST(StrategyRegistry, MemoryLabelsAndTheirLeadingTermsAgree) {
  constexpr int64_t kP = 1200;
  constexpr int kN = 4;
  const StateMemory ddp = EntryFor(StrategyKind::kDdp).estimate(Plain(kP, kN));
  EXPECT_STREQ(EntryFor(StrategyKind::kDdp).memory_label, "16P");
  EXPECT_EQ(Total(ddp), 16 * kP);
  EXPECT_STREQ(EntryFor(StrategyKind::kZero1).memory_label, "8P + 8P/N");
  MemoryInputs zero1 = Plain(kP, kN);
  zero1.grad_sync_every = false;  // no gradient shard beside the full ones
  EXPECT_EQ(Total(EntryFor(StrategyKind::kZero1).estimate(zero1)),
            8 * kP + 8 * kP / kN);
  EXPECT_STREQ(EntryFor(StrategyKind::kZero2).memory_label,
               "4P + 12P/N + buckets in flight");
  EXPECT_EQ(Total(EntryFor(StrategyKind::kZero2).estimate(Plain(kP, kN))),
            4 * kP + 12 * kP / kN);
  // fsdp: 16P/N, and its unit terms on top: the root gathered with its full
  // gradient (8R), the computing block gathered and its gradient (8U).
  const StrategyEntry& fsdp = EntryFor(StrategyKind::kFsdp);
  EXPECT_EQ(std::string(fsdp.memory_label).rfind("16P/N + ", 0), 0u)
      << fsdp.memory_label;
  EXPECT_EQ(Total(fsdp.estimate(Plain(kP, kN))), 16 * kP / kN);
  MemoryInputs units = Plain(kP, kN);
  units.root_unit = 100;
  units.block_unit = 50;
  EXPECT_EQ(Total(fsdp.estimate(units)), 16 * kP / kN + 8 * 100 + 8 * 50);
  EXPECT_STREQ(EntryFor(StrategyKind::kSingle).memory_label, "16P");
}

TEST(StrategyRegistry, ByteClosedFormsAreTheAllReduceForDdpAndHalfOfItForSharding) {
  constexpr int64_t kBytes = 1000;
  const StrategyEntry& ddp = EntryFor(StrategyKind::kDdp);
  EXPECT_EQ(ddp.grad_bytes(4, kBytes), 1500);  // 2(n-1)/n
  EXPECT_STREQ(ddp.grad_bytes_label, "2(n-1)/n x gradient bytes x syncs");
  EXPECT_EQ(ddp.gather_bytes(4, kBytes), 0);
  for (StrategyKind kind :
       {StrategyKind::kZero1, StrategyKind::kZero2, StrategyKind::kFsdp}) {
    const StrategyEntry& entry = EntryFor(kind);
    SCOPED_TRACE(entry.name);
    EXPECT_EQ(entry.grad_bytes(4, kBytes), 750);  // (n-1)/n
    EXPECT_STREQ(entry.grad_bytes_label, "(n-1)/n x gradient bytes x syncs");
    EXPECT_EQ(entry.gather_bytes(4, kBytes), 750);
    EXPECT_EQ(entry.grad_bytes(1, kBytes), 0);
  }
  EXPECT_EQ(EntryFor(StrategyKind::kSingle).grad_bytes(1, kBytes), 0);
}

TEST(StrategyRegistry, AFlagThatDoesNothingForTheStrategyIsRefused) {
  absl::Status status =
      StrategyFlagsApply(StrategyKind::kFsdp, {"lr", "bucket_cap_mb"});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "--bucket_cap_mb applies to --strategy=ddp, zero1 or zero2, not "
            "fsdp: it would do nothing");
  status = StrategyFlagsApply(StrategyKind::kDdp, {"reshard_after_forward"});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "--reshard_after_forward applies to --strategy=fsdp, not ddp: it "
            "would do nothing");
  EXPECT_EQ(StrategyFlagsApply(StrategyKind::kZero1, {"ddp_overlap"}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StrategyRegistry, FlagsThatApplyAndFlagsOfEveryStrategyPass) {
  EXPECT_TRUE(StrategyFlagsApply(StrategyKind::kDdp,
                                 {"bucket_cap_mb", "ddp_overlap", "lr"})
                  .ok());
  EXPECT_TRUE(StrategyFlagsApply(StrategyKind::kFsdp,
                                 {"reshard_after_forward", "fsdp_prefetch",
                                  "grad_sync"})
                  .ok());
  EXPECT_TRUE(StrategyFlagsApply(StrategyKind::kSingle, {"steps"}).ok());
}

TEST(StrategyRegistry, AutoGradSyncKeepsShardedGradientsSharded) {
  EXPECT_EQ(AutoGradSync(StrategyKind::kDdp), "last");
  EXPECT_EQ(AutoGradSync(StrategyKind::kZero1), "last");
  EXPECT_EQ(AutoGradSync(StrategyKind::kZero2), "every");
  EXPECT_EQ(AutoGradSync(StrategyKind::kFsdp), "every");
}

}  // namespace
}  // namespace mtb
