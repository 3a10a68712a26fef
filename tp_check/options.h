// tp_check's options: defaults, and the rules every check's sizes follow.
// Each check states what it splits (its Validate function); this file holds
// the shared arithmetic so every message reads alike:
//   "--ffn_hidden=30 is not divisible by --nproc=4 (column_linear splits ...)"
#ifndef MTB_TP_CHECK_OPTIONS_H_
#define MTB_TP_CHECK_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tp_check/tp_check.pb.h"

namespace mtb::tp_check {

// B 2, T 8, D 32, F 128 (4D), 4 heads, V 64 (all divisible by 4), column
// output gathered, dropout 0.1, seed 1234, AllClose's fp32 tolerances.
CheckOptions DefaultCheckOptions();

// The number of ranks and how the user set it, for messages: "--nproc=4",
// "WORLD_SIZE=8".
struct World {
  int size = 1;
  std::string label;
};
// World{n, "--nproc=<n>"}.
World NprocWorld(int world_size);

// Sizes >= 1, dropout in [0, 1), tolerances >= 0: kInvalidArgument naming the
// flag and its value.
absl::Status ValidateSizes(const CheckOptions& options);

// OK when world.size divides `value`, else kInvalidArgument:
// "--<flag>=<value> is not divisible by <world.label> (<why>)".
absl::Status RequireDivisibleByWorld(absl::string_view flag, int64_t value,
                                     const World& world, absl::string_view why);

}  // namespace mtb::tp_check

#endif  // MTB_TP_CHECK_OPTIONS_H_
