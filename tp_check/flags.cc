#include "tp_check/flags.h"

#include <cstdint>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_split.h"
#include "tp_check/options.h"

ABSL_FLAG(std::string, check, "",
          "comma-separated checks to run, in order (default: all): "
          "column_linear, row_linear, mlp, attention, sequence_parallel, "
          "vocab_parallel_ce");
ABSL_FLAG(int32_t, batch, mtb::tp_check::DefaultCheckOptions().batch(),
          "B, samples per batch");
ABSL_FLAG(int32_t, seq_len, mtb::tp_check::DefaultCheckOptions().seq_len(),
          "T, positions per sample (sequence_parallel splits it)");
ABSL_FLAG(int32_t, hidden, mtb::tp_check::DefaultCheckOptions().hidden(),
          "D, the model width");
ABSL_FLAG(int32_t, ffn_hidden, 0,
          "F, the MLP width and the linear checks' split dimension "
          "(0: 4 x --hidden)");
ABSL_FLAG(int32_t, heads, mtb::tp_check::DefaultCheckOptions().heads(),
          "attention heads (attention splits them)");
ABSL_FLAG(int32_t, vocab, mtb::tp_check::DefaultCheckOptions().vocab(),
          "V, the vocabulary (vocab_parallel_ce splits it)");
ABSL_FLAG(bool, gather_output, true,
          "column_linear: all-gather the output (false: compare each rank's "
          "shard)");
ABSL_FLAG(double, dropout, mtb::tp_check::DefaultCheckOptions().dropout(),
          "sequence_parallel: dropout probability on the MLP output");
ABSL_FLAG(uint64_t, seed, mtb::tp_check::DefaultCheckOptions().seed(),
          "keys every weight, input and dropout mask");
ABSL_FLAG(double, rtol, mtb::tp_check::DefaultCheckOptions().rtol(),
          "AllClose relative tolerance (torch.testing's fp32 default)");
ABSL_FLAG(double, atol, mtb::tp_check::DefaultCheckOptions().atol(),
          "AllClose absolute tolerance (torch.testing's fp32 default)");
ABSL_FLAG(int32_t, perturb_rank, -1,
          "test hook: on this rank, add --perturb_delta to the first element "
          "of --perturb_tensor, so that check fails naming it (-1: off)");
ABSL_FLAG(std::string, perturb_tensor, "",
          "test hook: the tensor to perturb, e.g. grad_weight");
ABSL_FLAG(double, perturb_delta, 1e-3, "test hook: what to add");
ABSL_FLAG(std::string, out, "",
          "result JSON path (default results/tp_check_<UTC time>.json in "
          "your checkout)");
ABSL_FLAG(bool, markdown, false, "also write a Markdown report beside --out");

namespace mtb::tp_check {

CheckOptions CheckOptionsFromFlags() {
  CheckOptions options = DefaultCheckOptions();
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_check), ',', absl::SkipEmpty())) {
    options.add_checks(std::string(name));
  }
  options.set_batch(absl::GetFlag(FLAGS_batch));
  options.set_seq_len(absl::GetFlag(FLAGS_seq_len));
  options.set_hidden(absl::GetFlag(FLAGS_hidden));
  const int32_t ffn_hidden = absl::GetFlag(FLAGS_ffn_hidden);
  options.set_ffn_hidden(ffn_hidden == 0 ? 4 * options.hidden() : ffn_hidden);
  options.set_heads(absl::GetFlag(FLAGS_heads));
  options.set_vocab(absl::GetFlag(FLAGS_vocab));
  options.set_gather_output(absl::GetFlag(FLAGS_gather_output));
  options.set_dropout(absl::GetFlag(FLAGS_dropout));
  options.set_seed(absl::GetFlag(FLAGS_seed));
  options.set_rtol(absl::GetFlag(FLAGS_rtol));
  options.set_atol(absl::GetFlag(FLAGS_atol));
  return options;
}

CheckHooks CheckHooksFromFlags() {
  CheckHooks hooks;
  hooks.perturb_rank = absl::GetFlag(FLAGS_perturb_rank);
  hooks.perturb_tensor = absl::GetFlag(FLAGS_perturb_tensor);
  hooks.perturb_delta = absl::GetFlag(FLAGS_perturb_delta);
  return hooks;
}

std::string OutFlag() { return absl::GetFlag(FLAGS_out); }
bool MarkdownFlag() { return absl::GetFlag(FLAGS_markdown); }

}  // namespace mtb::tp_check
