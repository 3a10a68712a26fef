#include "common/collective/collective_log.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "gtest/gtest.h"

namespace mtb::collective {
namespace {

CollectiveRecord Record(CollectiveOp op, int64_t sent, int64_t received) {
  CollectiveRecord record;
  record.op = op;
  record.bytes_sent = sent;
  record.bytes_received = received;
  return record;
}

CollectiveRecord Completed(CollectiveRecord record, absl::Status status) {
  record.completed = true;
  record.duration = absl::Milliseconds(2);
  record.wait_time = absl::Milliseconds(1);
  record.status = std::move(status);
  return record;
}

TEST(CollectiveLog, EveryObserverSeesEveryEventUntilRemoved) {
  CollectiveLog log;
  std::vector<std::string> seen;
  const CollectiveLog::ObserverId first = log.AddObserver(
      [&](CollectiveEvent event, const CollectiveRecord& record) {
        seen.push_back(absl::StrCat("first ", static_cast<int>(event), " #",
                                    record.sequence));
      });
  const CollectiveLog::ObserverId second = log.AddObserver(
      [&](CollectiveEvent event, const CollectiveRecord& record) {
        seen.push_back(absl::StrCat("second ", static_cast<int>(event), " #",
                                    record.sequence));
      });
  EXPECT_NE(first, second);
  const CollectiveRecord a = log.Issue(Record(CollectiveOp::kAllReduce, 4, 4));
  log.RemoveObserver(first);
  log.Complete(Completed(a, absl::OkStatus()));
  log.RemoveObserver(second);
  log.Issue(Record(CollectiveOp::kBarrier, 0, 0));
  const std::vector<std::string> expected = {"first 0 #0", "second 0 #0",
                                             "second 1 #0"};
  EXPECT_EQ(seen, expected);
}

TEST(CollectiveLog, SequenceNumbersFollowIssueOrder) {
  CollectiveLog log;
  EXPECT_EQ(log.Issue(Record(CollectiveOp::kAllReduce, 1, 1)).sequence, 0);
  EXPECT_EQ(log.Issue(Record(CollectiveOp::kBarrier, 0, 0)).sequence, 1);
  EXPECT_EQ(log.NextSequence(), 2);
  EXPECT_EQ(log.InFlight(), 2);
}

TEST(CollectiveLog, TotalsCountSuccessfulCompletionsOnly) {
  CollectiveLog log;
  const CollectiveRecord a =
      log.Issue(Record(CollectiveOp::kAllReduce, 64, 64));
  const CollectiveRecord b =
      log.Issue(Record(CollectiveOp::kAllGather, 32, 32));
  const CollectiveRecord c = log.Issue(Record(CollectiveOp::kAllReduce, 8, 8));
  log.Complete(Completed(a, absl::OkStatus()));
  log.Complete(Completed(b, absl::OkStatus()));
  log.Complete(Completed(c, absl::DeadlineExceededError("timeout")));
  const CollectiveTotals totals = log.Totals();
  EXPECT_EQ(totals.calls, 2);
  EXPECT_EQ(totals.bytes_sent, 96);
  EXPECT_EQ(totals.bytes_received, 96);
  EXPECT_EQ(totals.duration, absl::Milliseconds(4));
  EXPECT_EQ(log.TotalsByOp().at(CollectiveOp::kAllReduce).calls, 1);
  EXPECT_EQ(log.InFlight(), 0);
  // The failed one is still recorded.
  ASSERT_EQ(log.Records().size(), 3u);
  EXPECT_FALSE(log.Records()[2].status.ok());
}

TEST(CollectiveLog, TakeRecordsEmptiesRecordsButKeepsTotals) {
  CollectiveLog log;
  log.Complete(Completed(log.Issue(Record(CollectiveOp::kSend, 4, 0)),
                         absl::OkStatus()));
  EXPECT_EQ(log.TakeRecords().size(), 1u);
  EXPECT_TRUE(log.Records().empty());
  EXPECT_EQ(log.Totals().bytes_sent, 4);
}

TEST(CollectiveLog, WithoutKeepRecordsOnlyTotalsAreKept) {
  CollectiveLog log(/*keep_records=*/false);
  log.Complete(Completed(log.Issue(Record(CollectiveOp::kSend, 4, 0)),
                         absl::OkStatus()));
  EXPECT_TRUE(log.Records().empty());
  EXPECT_EQ(log.Totals().calls, 1);
}

TEST(CollectiveLog, ObserverSeesIssueAndCompletion) {
  CollectiveLog log;
  std::vector<std::pair<CollectiveEvent, int64_t>> events;
  log.AddObserver([&](CollectiveEvent event, const CollectiveRecord& record) {
    events.emplace_back(event, record.sequence);
    (void)log.Totals();  // may call back into the log
  });
  const CollectiveRecord a = log.Issue(Record(CollectiveOp::kAllReduce, 1, 1));
  const CollectiveRecord b = log.Issue(Record(CollectiveOp::kAllReduce, 1, 1));
  log.Complete(Completed(b, absl::OkStatus()));
  log.Complete(Completed(a, absl::OkStatus()));
  const std::vector<std::pair<CollectiveEvent, int64_t>> expected = {
      {CollectiveEvent::kIssued, 0},
      {CollectiveEvent::kIssued, 1},
      {CollectiveEvent::kCompleted, 1},
      {CollectiveEvent::kCompleted, 0}};
  EXPECT_EQ(events, expected);
}

}  // namespace
}  // namespace mtb::collective
