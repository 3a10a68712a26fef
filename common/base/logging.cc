#include "common/base/logging.h"

#include <atomic>
#include <iomanip>
#include <mutex>
#include <ostream>

#include "glog/logging.h"

namespace mtb {
namespace {

std::atomic<int> process_rank{-1};
thread_local int thread_rank = -1;

void RankPrefix(std::ostream& out, const google::LogMessageInfo& info, void*) {
  const int rank = CurrentLogRank();
  out << info.severity[0] << std::setfill('0') << std::setw(4)
      << 1900 + info.time.year() << std::setw(2) << 1 + info.time.month()
      << std::setw(2) << info.time.day() << ' ' << std::setw(2)
      << info.time.hour() << ':' << std::setw(2) << info.time.min() << ':'
      << std::setw(2) << info.time.sec() << '.' << std::setw(6)
      << info.time.usec() << std::setfill(' ') << " rank ";
  if (rank >= 0) {
    out << rank;
  } else {
    out << '-';
  }
  out << ' ' << info.filename << ':' << info.line_number << ']';
}

}  // namespace

void InitLogging(const char* argv0) {
  static std::once_flag once;
  std::call_once(once, [argv0] {
    FLAGS_logtostderr = true;
    if (!google::IsGoogleLoggingInitialized()) {
      google::InitGoogleLogging(argv0, &RankPrefix, nullptr);
    }
  });
}

void SetProcessLogRank(int rank) { process_rank.store(rank); }

ScopedThreadLogRank::ScopedThreadLogRank(int rank) : previous_(thread_rank) {
  thread_rank = rank;
}

ScopedThreadLogRank::~ScopedThreadLogRank() { thread_rank = previous_; }

int CurrentLogRank() {
  return thread_rank >= 0 ? thread_rank : process_rank.load();
}

}  // namespace mtb
