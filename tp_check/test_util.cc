#include "tp_check/test_util.h"

#include "ATen/Parallel.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/collective/test_util.h"
#include "gtest/gtest.h"
#include "tp_check/options.h"

namespace mtb::tp_check {

absl::StatusOr<std::vector<absl::StatusOr<CheckResult>>> RunOnThreads(
    const CheckFn& check, int world_size, const CheckOptions& options,
    const CheckHooks& hooks) {
  at::set_num_threads(1);
  std::vector<absl::StatusOr<CheckResult>> results(
      world_size, absl::UnknownError("rank did not run"));
  absl::Status ran =
      collective::RunRanksAsThreads(world_size, [&](collective::Communicator& comm) {
        results[comm.rank()] = check(options, comm, hooks);
      });
  if (!ran.ok()) return ran;
  return results;
}

const TensorCheck* FindTensor(const CheckResult& result,
                              const std::string& name) {
  for (const TensorCheck& tensor : result.tensors()) {
    if (tensor.name() == name) return &tensor;
  }
  return nullptr;
}

std::string DescribeFailures(const CheckResult& result) {
  std::vector<std::string> lines;
  for (const TensorCheck& tensor : result.tensors()) {
    if (!tensor.ok()) lines.push_back(tensor.name() + ": " + tensor.message());
  }
  for (const CollectiveCheck& c : result.collectives()) {
    if (!c.ok()) {
      lines.push_back(absl::StrCat(
          c.phase(), " ", c.op(), ": ", c.count(), " calls, ", c.bytes_sent(),
          "/", c.bytes_received(), " bytes; expected ", c.expected_count(),
          " calls, ", c.expected_bytes(), " bytes"));
    }
  }
  if (result.largest_logits_columns() > result.vocab_shard_columns()) {
    lines.push_back(absl::StrCat("logits columns ",
                                 result.largest_logits_columns(), " > ",
                                 result.vocab_shard_columns()));
  }
  return lines.empty() ? "no failures" : absl::StrJoin(lines, "\n");
}

void ExpectPassesOnEveryRank(const CheckFn& check, int world_size,
                             const CheckOptions& options, int tensors) {
  auto results = RunOnThreads(check, world_size, options);
  ASSERT_TRUE(results.ok()) << results.status();
  for (int rank = 0; rank < world_size; ++rank) {
    const absl::StatusOr<CheckResult>& result = (*results)[rank];
    ASSERT_TRUE(result.ok()) << "rank " << rank << ": " << result.status();
    EXPECT_TRUE(result->pass()) << "rank " << rank << ":\n"
                                << DescribeFailures(*result);
    EXPECT_EQ(result->world_size(), world_size);
    EXPECT_EQ(result->tensors_size(), tensors);
    EXPECT_TRUE(result->perturbed().empty());
  }
}

void ExpectPerturbationIsNamed(const CheckFn& check, int world_size,
                               const CheckOptions& options,
                               const std::string& tensor) {
  CheckHooks hooks;
  hooks.perturb_rank = world_size - 1;
  hooks.perturb_tensor = tensor;
  auto results = RunOnThreads(check, world_size, options, hooks);
  ASSERT_TRUE(results.ok()) << results.status();
  for (int rank = 0; rank < world_size; ++rank) {
    const absl::StatusOr<CheckResult>& result = (*results)[rank];
    ASSERT_TRUE(result.ok()) << "rank " << rank << ": " << result.status();
    EXPECT_FALSE(result->pass()) << "rank " << rank;
    for (const TensorCheck& row : result->tensors()) {
      EXPECT_EQ(row.ok(), row.name() != tensor)
          << "rank " << rank << ", " << row.name() << ": " << row.message();
      if (row.name() == tensor) {
        EXPECT_GE(row.max_abs_error(), 0.5 * hooks.perturb_delta);
        EXPECT_FALSE(row.failed_ranks().empty());
        EXPECT_NE(row.message().find("not close"), std::string::npos)
            << row.message();
      }
    }
    EXPECT_TRUE(result->collective_mismatch_ranks().empty());
    EXPECT_EQ(result->perturbed(),
              absl::StrCat("rank ", world_size - 1, ": ", tensor, " + 0.001"));
  }
}

void ExpectCollectives(const CheckFn& check, int world_size,
                       const CheckOptions& options,
                       const std::vector<CollectiveRow>& expected) {
  auto results = RunOnThreads(check, world_size, options);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_TRUE((*results)[0].ok()) << (*results)[0].status();
  const CheckResult& result = *(*results)[0];
  EXPECT_TRUE(result.collective_mismatch_ranks().empty());
  ASSERT_EQ(result.collectives_size(), static_cast<int>(expected.size()))
      << DescribeFailures(result);
  for (size_t i = 0; i < expected.size(); ++i) {
    const CollectiveCheck& row = result.collectives(static_cast<int>(i));
    EXPECT_EQ(row.phase(), expected[i].phase);
    EXPECT_EQ(row.op(), expected[i].op);
    EXPECT_EQ(row.count(), expected[i].count) << row.phase() << " " << row.op();
    EXPECT_EQ(row.bytes_sent(), expected[i].bytes)
        << row.phase() << " " << row.op();
    EXPECT_EQ(row.bytes_received(), expected[i].bytes)
        << row.phase() << " " << row.op();
    EXPECT_EQ(row.expected_count(), expected[i].count);
    EXPECT_EQ(row.expected_bytes(), expected[i].bytes);
    EXPECT_TRUE(row.ok());
  }
}

namespace {
int64_t RoundUpToMultiple(int64_t value, int64_t factor) {
  return (value + factor - 1) / factor * factor;
}
}  // namespace

CheckOptions DefaultOptionsFor(int n) {
  CheckOptions options = DefaultCheckOptions();
  options.set_seq_len(RoundUpToMultiple(options.seq_len(), n));
  options.set_ffn_hidden(RoundUpToMultiple(options.ffn_hidden(), n));
  options.set_heads(RoundUpToMultiple(options.heads(), n));
  options.set_hidden(RoundUpToMultiple(options.hidden(), options.heads()));
  options.set_vocab(RoundUpToMultiple(options.vocab(), n));
  return options;
}

CheckOptions SmallestOptions(int n) {
  CheckOptions options = DefaultCheckOptions();
  options.set_batch(1);
  options.set_seq_len(n);
  options.set_hidden(n);
  options.set_heads(n);
  options.set_ffn_hidden(n);
  options.set_vocab(n);
  return options;
}

}  // namespace mtb::tp_check
