// The per-step scalars every rank contributes (its loss, gradient norm,
// preemption notice, ...), gathered in one collective and read back by name:
// every rank then decides from the same values (stop on a non-finite loss,
// stop after a notice). Fields are named, not positional: a contributor adds
// its own without counting anyone else's. Each rank must add the same names
// with the same lengths in the same order (a field's length may differ
// between steps, never between ranks). Over the communicator directly: the
// Strategy interface has no scalar collectives.
#ifndef MTB_TRAINER_RUN_STEP_SCALARS_H_
#define MTB_TRAINER_RUN_STEP_SCALARS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/collective/communicator.h"

namespace mtb {

class StepScalars {
 public:
  // This rank's value(s) of field `name` (a string literal).
  void Add(const char* name, double value) { Add(name, std::vector<double>{value}); }
  void Add(const char* name, std::vector<double> values);

  // Every rank's fields. `communicator` nullptr or of one rank: this rank's.
  class Gathered {
   public:
    int ranks() const { return ranks_; }
    // Rank `rank`'s values of `name` (CHECK: a field this rank added).
    std::vector<double> Of(int rank, absl::string_view name) const;
    double One(int rank, absl::string_view name) const { return Of(rank, name)[0]; }

   private:
    friend class StepScalars;
    int ranks_ = 1;
    int64_t per_rank_ = 0;
    std::vector<std::pair<const char*, std::pair<int64_t, int64_t>>> layout_;
    std::vector<double> values_;
  };
  // Collective: one all-gather, bit-exact.
  absl::StatusOr<Gathered> Gather(collective::Communicator* communicator) const;

 private:
  std::vector<std::pair<const char*, std::vector<double>>> fields_;
};

}  // namespace mtb

#endif  // MTB_TRAINER_RUN_STEP_SCALARS_H_
