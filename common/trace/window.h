// --trace_steps=A:B, the window of a traced run, for every tool with
// --trace_dir: the trainer's steps, comm_bench's sweep points, moe_comm's
// configurations (benchmark points or checks). Numbered from 1.
#ifndef MTB_COMMON_TRACE_WINDOW_H_
#define MTB_COMMON_TRACE_WINDOW_H_

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mtb::trace {

struct TraceWindow {
  int64_t first = 1;
  int64_t last = std::numeric_limits<int64_t>::max();
  bool Contains(int64_t index) const { return index >= first && index <= last; }
};

// `text` is --trace_steps' value ("" = every one), `trace_dir` --trace_dir's,
// `count` how many there are and `count_text` how the user set it
// ("--steps=10", "3 configurations"). kInvalidArgument with one line:
// "--trace_steps=0:2 must be A:B with 1 <= A <= B <= --steps=10", or
// "--trace_steps needs --trace_dir".
absl::StatusOr<TraceWindow> ParseTraceWindow(absl::string_view text,
                                             absl::string_view trace_dir,
                                             int64_t count,
                                             absl::string_view count_text);

}  // namespace mtb::trace

#endif  // MTB_COMMON_TRACE_WINDOW_H_
