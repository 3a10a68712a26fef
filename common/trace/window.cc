#include "common/trace/window.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace mtb::trace {

absl::StatusOr<TraceWindow> ParseTraceWindow(absl::string_view text,
                                             absl::string_view trace_dir,
                                             int64_t count,
                                             absl::string_view count_text) {
  TraceWindow window;
  if (text.empty()) return window;
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &window.first) ||
      !absl::SimpleAtoi(parts[1], &window.last) || window.first < 1 ||
      window.last < window.first || window.last > count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--trace_steps=", text, " must be A:B with 1 <= A <= B <= ", count_text));
  }
  if (trace_dir.empty()) {
    return absl::InvalidArgumentError("--trace_steps needs --trace_dir");
  }
  return window;
}

}  // namespace mtb::trace
