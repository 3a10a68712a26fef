#include "trainer/run/restart_history.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/base/status.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"

namespace mtb {
namespace {

// How long reading an earlier attempt's key may wait: it is there or it
// never will be (Check comes first), so this only covers the round trip.
constexpr absl::Duration kReadTimeout = absl::Seconds(10);

std::string Key(int attempt, const char* what) {
  return absl::StrCat("trainer/attempt_", attempt, "/", what);
}

}  // namespace

AttemptLog::AttemptLog(collective::Store store, int attempt)
    : store_(std::move(store)), attempt_(attempt) {}

absl::Status AttemptLog::RecordStart(const AttemptRecord& record) {
  return store_.Set(Key(attempt_, "start"), ToJson(record));
}

absl::Status AttemptLog::RecordStep(int64_t step) {
  return store_.Set(Key(attempt_, "step"), absl::StrCat(step));
}

absl::StatusOr<RestartHistory> AttemptLog::History(const std::vector<std::string>& earlier_ended,
                                                   int max_restarts, int64_t last_completed_step) {
  std::vector<AttemptRecord> attempts;
  for (int attempt = 0; attempt <= attempt_; ++attempt) {
    AttemptRecord record;
    ASSIGN_OR_RETURN(const bool started, store_.Check(Key(attempt, "start")));
    if (started) {
      ASSIGN_OR_RETURN(const std::string json, store_.Get(Key(attempt, "start"), kReadTimeout));
      RETURN_IF_ERROR(FromJson(json, &record));
      record.set_resumed_known(true);
    }
    record.set_attempt(attempt);
    record.set_last_completed_step(-1);
    ASSIGN_OR_RETURN(const bool stepped, store_.Check(Key(attempt, "step")));
    if (stepped) {
      ASSIGN_OR_RETURN(const std::string text, store_.Get(Key(attempt, "step"), kReadTimeout));
      int64_t step = -1;
      if (absl::SimpleAtoi(text, &step)) record.set_last_completed_step(step);
    }
    if (attempt == attempt_) {
      record.set_last_completed_step(last_completed_step);
    } else if (attempt < static_cast<int>(earlier_ended.size())) {
      record.set_ended(earlier_ended[attempt]);
    }
    attempts.push_back(std::move(record));
  }
  return AssembleHistory(std::move(attempts), max_restarts);
}

RestartHistory AssembleHistory(std::vector<AttemptRecord> attempts, int max_restarts) {
  RestartHistory history;
  history.set_max_restarts(max_restarts);
  history.set_restarts(attempts.empty() ? 0 : static_cast<int>(attempts.size()) - 1);
  for (size_t a = 0; a < attempts.size(); ++a) {
    AttemptRecord& record = attempts[a];
    record.set_steps_lost(0);
    if (a + 1 < attempts.size() && record.last_completed_step() >= 0 &&
        attempts[a + 1].resumed_known()) {
      record.set_steps_lost(
          std::max<int64_t>(0, record.last_completed_step() - attempts[a + 1].resumed_step()));
    }
    history.set_steps_lost(history.steps_lost() + record.steps_lost());
    *history.add_attempts() = std::move(record);
  }
  return history;
}

std::vector<std::string> DescribeHistory(const RestartHistory& history) {
  std::vector<std::string> lines;
  for (int a = 0; a + 1 < history.attempts_size(); ++a) {
    const AttemptRecord& record = history.attempts(a);
    const AttemptRecord& next = history.attempts(a + 1);
    const std::string start = !record.resumed_known() ? "start unknown"
                              : record.resumed_from().empty()
                                  ? "fresh start"
                                  : absl::StrCat("from step ", record.resumed_step());
    const std::string reached = record.last_completed_step() >= 0
                                    ? absl::StrCat("completed step ", record.last_completed_step())
                                    : "no step recorded";
    const std::string resumed =
        !next.resumed_known() ? "where attempt " + absl::StrCat(a + 1) + " began is unknown"
        : next.resumed_from().empty()
            ? "attempt " + absl::StrCat(a + 1) + " started afresh"
            : absl::StrCat("attempt ", a + 1, " resumed from ", BaseName(next.resumed_from()));
    lines.push_back(absl::StrCat(
        "restart ", a + 1, " of ", history.max_restarts(), ": attempt ", a, " (", start, ", ",
        reached, ") ended: ", record.ended().empty() ? "(not told)" : record.ended(), "; ", resumed,
        "; ", record.steps_lost(), " completed step(s) lost"));
  }
  return lines;
}

}  // namespace mtb
