#include "trainer/run/step_scalars.h"

#include "common/base/status.h"
#include "glog/logging.h"
#include "trainer/strategy/scalars.h"

namespace mtb {

void StepScalars::Add(const char* name, std::vector<double> values) {
  fields_.emplace_back(name, std::move(values));
}

absl::StatusOr<StepScalars::Gathered> StepScalars::Gather(
    collective::Communicator* communicator) const {
  Gathered gathered;
  std::vector<double> mine;
  for (const auto& [name, values] : fields_) {
    gathered.layout_.push_back(
        {name, {static_cast<int64_t>(mine.size()),
                static_cast<int64_t>(values.size())}});
    mine.insert(mine.end(), values.begin(), values.end());
  }
  gathered.per_rank_ = static_cast<int64_t>(mine.size());
  ASSIGN_OR_RETURN(gathered.values_,
                   GatherScalarsOverRanks(communicator, mine, "step scalars"));
  gathered.ranks_ =
      gathered.per_rank_ == 0
          ? 1
          : static_cast<int>(gathered.values_.size() / gathered.per_rank_);
  return gathered;
}

std::vector<double> StepScalars::Gathered::Of(int rank,
                                              absl::string_view name) const {
  CHECK(rank >= 0 && rank < ranks_) << rank;
  for (const auto& [field, place] : layout_) {
    if (name != field) continue;
    const double* first = values_.data() + rank * per_rank_ + place.first;
    return std::vector<double>(first, first + place.second);
  }
  LOG(FATAL) << "no step scalar named " << name;
}

}  // namespace mtb
