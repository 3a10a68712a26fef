#include "common/faults/fault_injector.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <utility>

#include "glog/logging.h"

namespace mtb {

FaultInjector::FaultInjector(std::vector<Fault> faults, int rank, int attempt)
    : rank_(rank) {
  if (attempt > 0 && !faults.empty()) {
    LOG(INFO) << "--fault= does not act on restart " << attempt
              << ": faults act on the first attempt only";
    return;
  }
  faults_ = std::move(faults);
}

bool FaultInjector::At(int64_t step, absl::string_view phase) {
  if (faults_.empty()) return false;
  if (const Fault* slow = FindFault(faults_, FaultKind::kSlow, rank_, step, phase);
      slow != nullptr && step != last_slowed_step_) {
    last_slowed_step_ = step;
    if (sleep_) {
      sleep_(slow->ms);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(slow->ms));
    }
  }
  if (const Fault* kill = FindFault(faults_, FaultKind::kKill, rank_, step, phase)) {
    LOG(ERROR) << "--fault=" << FaultToString(*kill) << kKillAnnouncement;
    google::FlushLogFiles(google::GLOG_INFO);
    std::fflush(nullptr);
    ::raise(SIGKILL);
  }
  if (const Fault* exit = FindFault(faults_, FaultKind::kExit, rank_, step, phase)) {
    LOG(ERROR) << "--fault=" << FaultToString(*exit) << ": exiting with code "
               << exit->code;
    std::fflush(nullptr);
    ::_exit(exit->code);
  }
  if (const Fault* hang = FindFault(faults_, FaultKind::kHang, rank_, step, phase)) {
    LOG(ERROR) << "--fault=" << FaultToString(*hang)
               << ": this rank stops making progress";
    std::fflush(nullptr);
    while (true) std::this_thread::sleep_for(std::chrono::hours(1));
  }
  if (const Fault* nan = FindFault(faults_, FaultKind::kNan, rank_, step, phase)) {
    // Asked at every phase of the step: say it once.
    if (step != last_nan_step_) {
      last_nan_step_ = step;
      LOG(ERROR) << "--fault=" << FaultToString(*nan) << ": this rank's loss becomes NaN";
    }
    return true;
  }
  return false;
}

const Fault* FaultInjector::Corruption(int64_t step) const {
  return FindFault(faults_, FaultKind::kCorrupt, rank_, step, "");
}

}  // namespace mtb
