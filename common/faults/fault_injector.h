// Acting on --fault= (fault_spec.h) at the points a tool names: the one place
// that kills, exits, hangs or slows a rank, for the trainer, comm_bench and
// moe_comm alike.
#ifndef MTB_COMMON_FAULTS_FAULT_INJECTOR_H_
#define MTB_COMMON_FAULTS_FAULT_INJECTOR_H_

#include <cstdint>
#include <functional>
#include <vector>

#include <utility>

#include "absl/strings/string_view.h"
#include "common/faults/fault_spec.h"

namespace mtb {

// One rank's faults. Not thread-safe: one thread calls At.
class FaultInjector {
 public:
  // No faults.
  FaultInjector() = default;
  // `faults` validated; `attempt` is the launcher's restart count
  // (TORCHELASTIC_RESTART_COUNT): faults act on the first attempt only, so a
  // restarted group runs as after a transient failure (logged once).
  FaultInjector(std::vector<Fault> faults, int rank, int attempt = 0);

  // Call at the start of `phase` of `step` (1-based). This rank's fault
  // there: kill raises SIGKILL, exit exits with its code (after flushing
  // logs), hang stops this thread for good (other threads, such as the
  // heartbeat, go on), slow sleeps its milliseconds at the first call of a
  // step it applies to. Returns true when a nan fault fires here (the caller
  // makes its loss NaN; a line says so).
  bool At(int64_t step, absl::string_view phase);

  // This rank's corrupt fault of `step` (the tool flips a byte of the
  // checkpoint of that step once it is published), or nullptr.
  const Fault* Corruption(int64_t step) const;

  bool empty() const { return faults_.empty(); }

  // Tests: what slow calls instead of sleeping (the milliseconds).
  void set_sleep_for_testing(std::function<void(int64_t)> sleep) {
    sleep_ = std::move(sleep);
  }

 private:
  std::vector<Fault> faults_;
  int rank_ = 0;
  int64_t last_slowed_step_ = 0;
  int64_t last_nan_step_ = 0;
  std::function<void(int64_t)> sleep_;
};

}  // namespace mtb

#endif  // MTB_COMMON_FAULTS_FAULT_INJECTOR_H_
