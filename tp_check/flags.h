// tp_check's own flags (the launch flags --nproc, --nnodes, ... come from
// common/launch) and the options they make.
#ifndef MTB_TP_CHECK_FLAGS_H_
#define MTB_TP_CHECK_FLAGS_H_

#include <string>

#include "absl/time/time.h"
#include "tp_check/check_util.h"
#include "tp_check/tp_check.pb.h"

namespace mtb::tp_check {

// --check, --batch, --seq_len, --hidden, --ffn_hidden (0: 4 x --hidden),
// --heads, --vocab, --gather_output, --dropout, --seed, --rtol, --atol.
CheckOptions CheckOptionsFromFlags();

// --perturb_rank, --perturb_tensor, --perturb_delta (demonstrates a failing
// check; off by default).
CheckHooks CheckHooksFromFlags();

// --out (resolved against the checkout under bazel run; empty: the default
// results/tp_check_<UTC time>.json), --markdown; the timeouts are common/launch/timeouts.h's flags.
std::string OutFlag();
bool MarkdownFlag();

}  // namespace mtb::tp_check

#endif  // MTB_TP_CHECK_FLAGS_H_
