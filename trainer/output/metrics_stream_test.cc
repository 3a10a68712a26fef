#include "trainer/output/metrics_stream.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "gtest/gtest.h"
#include "trainer/metrics_line.pb.h"

namespace mtb {
namespace {

StepRecord Record(int step) {
  StepRecord record;
  record.set_step(step);
  record.set_loss(4.5 - step);
  record.set_lr(1e-3 * step);
  record.set_tokens_per_second(1000.0 + step);
  record.set_grad_norm(0.25);
  record.set_comm_wait_ms(1.5);
  record.set_step_ms(20);
  record.set_peak_memory_bytes(int64_t{3} << 40);  // beyond int32, below 2^53
  record.set_live_bytes(1024);
  return record;
}

TEST(MetricsStream, EachStepAppendsOneJsonLineThatReadsBack) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/m/metrics.jsonl";
  {
    absl::StatusOr<std::unique_ptr<MetricsStream>> stream = MetricsStream::Open(path);
    ASSERT_TRUE(stream.ok()) << stream.status();
    ASSERT_TRUE((*stream)->Append(Record(1), 0).ok());
    ASSERT_TRUE((*stream)->Append(Record(2), 0).ok());
  }
  {
    // A second run (a restart) appends; nothing is lost.
    absl::StatusOr<std::unique_ptr<MetricsStream>> stream = MetricsStream::Open(path);
    ASSERT_TRUE(stream.ok()) << stream.status();
    ASSERT_TRUE((*stream)->Append(Record(3), 1).ok());
  }
  absl::StatusOr<std::string> text = ReadFileToString(path);
  ASSERT_TRUE(text.ok());
  ASSERT_TRUE(absl::EndsWith(*text, "\n"));
  const std::vector<std::string> lines = absl::StrSplit(text->substr(0, text->size() - 1), '\n');
  ASSERT_EQ(lines.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    MetricsLine line;
    ASSERT_TRUE(FromJson(lines[i], &line).ok()) << lines[i];
    EXPECT_EQ(line.step(), i + 1);
    EXPECT_EQ(line.run(), i == 2 ? 1 : 0);
    EXPECT_EQ(line.loss(), 4.5 - (i + 1));
    EXPECT_EQ(line.lr(), 1e-3 * (i + 1));
    EXPECT_EQ(line.tokens_per_second(), 1000.0 + i + 1);
    EXPECT_EQ(line.grad_norm(), 0.25);
    EXPECT_EQ(line.comm_wait_ms(), 1.5);
    EXPECT_EQ(line.peak_memory_bytes(), static_cast<double>(int64_t{3} << 40));
    EXPECT_FALSE(line.utc().empty());
  }
  // Numbers, not proto3's int64 strings: jq and pandas read them as numbers.
  EXPECT_TRUE(absl::StrContains(lines[0], "\"peak_memory_bytes\":3298534883328")) << lines[0];
}

TEST(MetricsStream, AnUnopenablePathIsInvalidNamingTheFlag) {
  absl::StatusOr<std::unique_ptr<MetricsStream>> stream = MetricsStream::Open("/proc/m.jsonl");
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(stream.status().message(), "--metrics_jsonl=/proc/m.jsonl"))
      << stream.status();
}

}  // namespace
}  // namespace mtb
