// Pipeline x data parallelism, the refusal: --strategy=fsdp under --pp is
// refused in one line, exit 2, before any rank starts (docs/pipeline.md says
// why). A launcher invocation that starts no rank.
//
// Where the rest of pp x dp is proven, to keep rank launches few (each costs
// about as much as the training it runs): pp=2 x dp=2 equal to one rank
// with real processes is pp_process_test's (zero1, GPipe; it shares that
// test's one-rank reference); ddp, zero1 and zero2 over each stage's dp
// group, the reduction that sums instead of averaging (the negative) and a
// pp=2 x dp=2 checkpoint resumed at pp=1 and at pp=4 are
// //trainer/pipeline:pipeline_training_test's (rank threads, the trainer's
// Checkpointer writing and reading real checkpoint directories).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "trainer/tests/ddp_process_check.h"

namespace mtb {
namespace {

TEST(PipelineTimesData, FsdpIsRefusedInOneLineBeforeAnyRankStarts) {
  std::vector<std::string> flags = TinyDdpFlags();
  flags.push_back(absl::StrCat("--batch_size=", kTinyGlobalBatch / 2));
  for (const char* flag : {"--pp=2", "--pp_schedule=1f1b",
                           "--pp_microbatches=2", "--strategy=fsdp"}) {
    flags.push_back(flag);
  }
  ExpectRefusedBeforeRanks("fsdp", 4, flags,
                           "--strategy=fsdp is not supported with --pp=2: ");
}

}  // namespace
}  // namespace mtb
