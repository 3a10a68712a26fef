// moe_comm's flags (defined in flags.cc) read into one MoeCommOptions.
#ifndef MTB_MOE_COMM_FLAGS_H_
#define MTB_MOE_COMM_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "moe_comm/check.h"
#include "moe_comm/moe_comm.pb.h"
#include "moe_comm/run.h"

namespace mtb::moe_comm {

// kInvalidArgument naming the flag when a list does not parse.
absl::StatusOr<MoeCommOptions> OptionsFromFlags();
// --test_packing_bug (the classic bug, for the smoke test's exit-1 case).
MoeCheckHooks HooksFromFlags();
// --trace_dir (resolved, checked writable) and --trace_steps (a window of the
// sweep's `configurations`); `timeout` bounds the run id / clock exchange.
// kInvalidArgument naming the flag.
absl::StatusOr<MoeTraceOptions> TraceOptionsFromFlags(int configurations,
                                                      absl::Duration timeout);
std::string OutFlag();
// --fault= as given ("" none).
std::string FaultFlag();
bool MarkdownFlag();
bool PlotFlag();

}  // namespace mtb::moe_comm

#endif  // MTB_MOE_COMM_FLAGS_H_
