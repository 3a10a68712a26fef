// glog set-up with the rank in every line.
//
// Lines look like "I20261202 13:14:50.123456 rank 1 trainer.cc:42] message".
// The rank is per thread when a thread set one (tests run ranks as threads),
// else the process's rank, else "-".
#ifndef MTB_COMMON_BASE_LOGGING_H_
#define MTB_COMMON_BASE_LOGGING_H_

namespace mtb {

// Logs to stderr with the rank prefix. Safe to call more than once.
void InitLogging(const char* argv0);

// The rank every thread of this process logs as (worker processes).
void SetProcessLogRank(int rank);

// The rank the calling thread logs as while this object lives.
class ScopedThreadLogRank {
 public:
  explicit ScopedThreadLogRank(int rank);
  ~ScopedThreadLogRank();
  ScopedThreadLogRank(const ScopedThreadLogRank&) = delete;
  ScopedThreadLogRank& operator=(const ScopedThreadLogRank&) = delete;

 private:
  int previous_;
};

// The rank the calling thread logs as, or -1.
int CurrentLogRank();

}  // namespace mtb

#endif  // MTB_COMMON_BASE_LOGGING_H_
