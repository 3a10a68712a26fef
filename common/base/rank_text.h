// How messages name ranks: "rank 2", "ranks 0, 2" (launcher summaries,
// heartbeat diagnoses, forensics).
#ifndef MTB_COMMON_BASE_RANK_TEXT_H_
#define MTB_COMMON_BASE_RANK_TEXT_H_

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mtb {

// "rank 2" for one, "ranks 0, 2" for several (in the order given).
inline std::string RanksText(const std::vector<int>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ",
                      absl::StrJoin(ranks, ", "));
}

}  // namespace mtb

#endif  // MTB_COMMON_BASE_RANK_TEXT_H_
