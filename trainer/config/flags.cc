#include "trainer/config/flags.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/base/flags.h"
#include "common/base/status.h"
#include "common/results/output_path.h"
#include "trainer/strategy/registry.h"

// Model.
ABSL_FLAG(int32_t, vocab_size, 256, "vocabulary size (byte-level corpus: 256)");
ABSL_FLAG(int32_t, d_model, 128, "model width");
ABSL_FLAG(int32_t, n_layers, 4, "transformer blocks");
ABSL_FLAG(int32_t, n_heads, 4, "attention heads (must divide --d_model)");
ABSL_FLAG(int32_t, seq_len, 128, "context length (tokens per sample)");
ABSL_FLAG(int32_t, batch_size, 8,
          "samples per rank per micro-batch (the default job: 2 ranks x 8)");
ABSL_FLAG(double, dropout, 0.0,
          "dropout on attention probabilities and residual branches, masks "
          "keyed by (seed, step, global sample, layer, site)");
ABSL_FLAG(bool, activation_checkpointing, false,
          "recompute each block in backward (identical dropout masks)");
ABSL_FLAG(std::string, precision, "fp32",
          "fp32, or bf16 (CPU autocast, fp32 master weights and optimizer "
          "state)");
// Data.
ABSL_FLAG(std::string, data, "testdata/gnu_licenses.bin",
          "'synthetic' (uniform random tokens) or an llm.c token file (256 "
          "int32 header, magic 20240520, uint16 tokens); relative paths are "
          "resolved against your checkout under bazel run");
// Optimizer and schedule.
ABSL_FLAG(double, lr, 1e-3, "AdamW peak learning rate");
ABSL_FLAG(double, beta1, 0.9, "AdamW beta1");
ABSL_FLAG(double, beta2, 0.999, "AdamW beta2");
ABSL_FLAG(double, eps, 1e-8, "AdamW epsilon");
ABSL_FLAG(double, weight_decay, 0.01,
          "AdamW decoupled weight decay (linear weights only; not biases, "
          "LayerNorm or embeddings)");
ABSL_FLAG(std::string, lr_schedule, "cosine",
          "constant or cosine, both after --lr_warmup_steps of linear warm-up");
ABSL_FLAG(int32_t, lr_warmup_steps, 10,
          "linear learning-rate warm-up steps, < --steps (left unset, shrinks "
          "to --steps - 1 for a shorter run)");
ABSL_FLAG(int32_t, lr_decay_steps, 0,
          "cosine: the step where the rate reaches --min_lr (0: --steps)");
ABSL_FLAG(double, min_lr, -1, "cosine floor (negative: --lr / 10)");
ABSL_FLAG(int32_t, grad_accum, 1,
          "micro-batches per optimizer step (each loss divided by it)");
ABSL_FLAG(double, max_grad_norm, 1.0,
          "clip the global gradient norm to this (0: no clipping)");
// Run.
ABSL_FLAG(int32_t, steps, 200, "the run's total number of optimizer steps");
ABSL_FLAG(int32_t, timing_warmup_steps, 2,
          "first steps excluded from timing figures (not learning-rate "
          "warm-up); left unset, shrinks to --steps - 1 for a shorter run");
ABSL_FLAG(int32_t, repeat, 1, "runs from scratch; the summary is mean ± std");
ABSL_FLAG(uint64_t, seed, 1234,
          "seeds initialisation, data sampling and dropout masks");
ABSL_FLAG(int32_t, intra_op_threads, 0,
          "LibTorch intra-op (and OpenBLAS) threads per rank (0: this "
          "machine's cores divided among this host's ranks; 1 under "
          "--reduction=exact, whose bits depend on it)");
ABSL_FLAG(std::string, reduction, "float",
          "float (gradients averaged in fp32 by the strategy's collectives) "
          "or exact (chunk gradients on a fixed-point grid summed as int64: "
          "bit-identical on any world size, --grad_accum and strategy; "
          "trainer/exact/exact.h)");
ABSL_FLAG(int32_t, testonly_exact_grid_finer_bits, 0,
          "tests only: the default exact grid this many bits finer, so that "
          "ordinary gradients overflow it and steps are redone");
ABSL_FLAG(int32_t, exact_chunk, 1,
          "--reduction=exact: global samples per chunk (forward and backward "
          "run chunk by chunk; --batch_size must be a multiple)");
ABSL_FLAG(std::string, gemm, "auto",
          "the model's matrix products: auto (onednn), onednn (oneDNN's "
          "sgemm; bf16 stays on LibTorch's oneDNN kernels) or blas "
          "(LibTorch's own path, OpenBLAS); docs/gemm.md");
ABSL_FLAG(int32_t, log_every, 1, "progress line every this many steps");
ABSL_FLAG(std::string, strategy, "ddp",
          "how steps are distributed: ddp (replicated parameters, bucketed "
          "gradient all-reduce overlapped with backward), zero1 (optimizer "
          "state sharded: gradient reduce-scatter, parameter all-gather), "
          "zero2 (gradients sharded too: reduce-scatter per bucket during "
          "backward), fsdp (parameters sharded too: each block all-gathered "
          "for its forward and backward, its gradient reduce-scattered as its "
          "backward finishes), or single (the one-rank reference, no "
          "buckets)");
ABSL_FLAG(double, bucket_cap_mb, 25,
          "gradient bucket size in MiB after the first bucket (which holds "
          "1 MiB, as PyTorch's DDP); zero1/zero2 reduce-scatter and "
          "all-gather in the same pieces");
ABSL_FLAG(std::string, grad_sync, "auto",
          "with --grad_accum > 1: every (all-reduce after every micro-batch), "
          "last (no_sync for all but the last), auto (ddp, zero1: last; "
          "zero2, fsdp: every)");
ABSL_FLAG(bool, reshard_after_forward, true,
          "fsdp: free each block's gathered parameters after its forward and "
          "gather them again before its backward (ZeRO-3); false keeps them "
          "until the backward (less traffic, more memory)");
ABSL_FLAG(bool, fsdp_prefetch, false,
          "fsdp: issue the next unit's all-gather while the current unit "
          "computes (one unit ahead, forward and backward); the result says "
          "how much gather time it hid");
ABSL_FLAG(bool, ddp_overlap, true,
          "ddp: launch each bucket's all-reduce from backward as soon as it is "
          "complete (false: all after backward, the no-overlap baseline)");
ABSL_FLAG(int32_t, tp, 1,
          "tensor parallelism: ranks per group that split every block's "
          "heads and MLP and the vocabulary (Megatron); world = dp x tp, tp "
          "innermost; --strategy runs over the dp group (docs/tp.md)");
ABSL_FLAG(bool, sequence_parallel, false,
          "with --tp > 1: LayerNorms and residuals sharded along the sequence "
          "over the tp group (all-gather / reduce-scatter instead of "
          "all-reduce)");
ABSL_FLAG(double, peak_flops, 0,
          "peak FLOP/s of one rank for MFU (0: measure a matmul at start in "
          "the run's precision)");

// Checkpoints (docs/checkpoint.md); not part of TrainConfig: a resume may
// change them.
ABSL_FLAG(std::string, checkpoint_dir, "",
          "save checkpoints here (and resume from here): DIR/step_NNNNNNNN/, "
          "DIR/latest; every rank must see the same directory");
ABSL_FLAG(int64_t, save_every, 0,
          "save a checkpoint every N steps and after the last step (0: never)");
ABSL_FLAG(int64_t, keep_last, 3,
          "keep this run's N newest checkpoints, pruning older ones of this run "
          "only (0: keep every one)");
ABSL_FLAG(std::string, resume, "",
          "latest (the checkpoint DIR/latest names, falling back to the newest "
          "that verifies; none yet: start from step 0) or PATH (one checkpoint "
          "directory); --steps stays the run's total");
ABSL_FLAG(bool, allow_data_change, false,
          "resume on a data source other than the checkpoint's, deliberately (the "
          "differences are recorded in the result; docs/checkpoint.md)");
ABSL_FLAG(std::string, data_fingerprint, "auto",
          "how checkpoints identify a token file: auto (SHA-256 of the whole file up to "
          "256 MiB, a sampled fingerprint above) or full (the whole file, any size)");
ABSL_FLAG(bool, async_checkpoint, false,
          "save checkpoints in the background: the state is copied at the step "
          "boundary and written while training continues (one save in flight; "
          "the result records the blocking and background time of each)");
ABSL_FLAG(bool, overwrite_checkpoints, false,
          "start a new run in a --checkpoint_dir holding another run's "
          "checkpoints (deletes nothing; `latest` moves to the new run's)");

ABSL_FLAG(int32_t, pp, 1,
          "pipeline parallelism: stages (docs/pipeline.md); the world size "
          "must equal it (dp = 1)");
ABSL_FLAG(std::string, pp_schedule, "1f1b",
          "with --pp > 1: gpipe (every forward, then every backward) or 1f1b");
ABSL_FLAG(int32_t, pp_microbatches, 1,
          "with --pp > 1: micro-batches per step; must divide --batch_size");
ABSL_FLAG(std::string, pp_split, "",
          "with --pp > 1: blocks per stage, e.g. 3,1 (default: balanced by "
          "parameter count)");
ABSL_FLAG(bool, testonly_pp_skip_tied_embedding_sum, false,
          "testing only: do not sum the tied embedding's gradient between the "
          "first and last stages, to prove that tests catch it");

namespace mtb {

absl::StatusOr<TrainConfig> TrainConfigFromFlags() {
  TrainConfig c;
  c.set_vocab_size(absl::GetFlag(FLAGS_vocab_size));
  c.set_d_model(absl::GetFlag(FLAGS_d_model));
  c.set_n_layers(absl::GetFlag(FLAGS_n_layers));
  c.set_n_heads(absl::GetFlag(FLAGS_n_heads));
  c.set_seq_len(absl::GetFlag(FLAGS_seq_len));
  c.set_batch_size(absl::GetFlag(FLAGS_batch_size));
  c.set_dropout(absl::GetFlag(FLAGS_dropout));
  c.set_activation_checkpointing(absl::GetFlag(FLAGS_activation_checkpointing));
  ASSIGN_OR_RETURN(const TrainConfig::Precision precision,
                   PrecisionFromName(absl::GetFlag(FLAGS_precision)));
  c.set_precision(precision);
  c.set_data(absl::GetFlag(FLAGS_data));
  c.set_lr(absl::GetFlag(FLAGS_lr));
  c.set_beta1(absl::GetFlag(FLAGS_beta1));
  c.set_beta2(absl::GetFlag(FLAGS_beta2));
  c.set_eps(absl::GetFlag(FLAGS_eps));
  c.set_weight_decay(absl::GetFlag(FLAGS_weight_decay));
  ASSIGN_OR_RETURN(const TrainConfig::LrSchedule lr_schedule,
                   LrScheduleFromName(absl::GetFlag(FLAGS_lr_schedule)));
  c.set_lr_schedule(lr_schedule);
  c.set_lr_warmup_steps(absl::GetFlag(FLAGS_lr_warmup_steps));
  c.set_lr_decay_steps(absl::GetFlag(FLAGS_lr_decay_steps));
  c.set_min_lr(absl::GetFlag(FLAGS_min_lr));
  c.set_grad_accum(absl::GetFlag(FLAGS_grad_accum));
  c.set_max_grad_norm(absl::GetFlag(FLAGS_max_grad_norm));
  c.set_steps(absl::GetFlag(FLAGS_steps));
  c.set_timing_warmup_steps(absl::GetFlag(FLAGS_timing_warmup_steps));
  c.set_repeat(absl::GetFlag(FLAGS_repeat));
  c.set_seed(absl::GetFlag(FLAGS_seed));
  c.set_intra_op_threads(absl::GetFlag(FLAGS_intra_op_threads));
  c.set_log_every(absl::GetFlag(FLAGS_log_every));
  ASSIGN_OR_RETURN(const TrainConfig::Strategy strategy,
                   StrategyFromName(absl::GetFlag(FLAGS_strategy)));
  c.set_strategy(strategy);
  c.set_bucket_cap_mb(absl::GetFlag(FLAGS_bucket_cap_mb));
  c.set_grad_sync(absl::GetFlag(FLAGS_grad_sync));
  ASSIGN_OR_RETURN(const TrainConfig::Reduction reduction,
                   ReductionFromName(absl::GetFlag(FLAGS_reduction)));
  c.set_reduction(reduction);
  c.set_gemm(absl::GetFlag(FLAGS_gemm));
  c.set_exact_chunk(absl::GetFlag(FLAGS_exact_chunk));
  c.set_testonly_exact_grid_finer_bits(
      absl::GetFlag(FLAGS_testonly_exact_grid_finer_bits));
  c.set_peak_flops(absl::GetFlag(FLAGS_peak_flops));
  c.set_ddp_launch_after_backward(!absl::GetFlag(FLAGS_ddp_overlap));
  c.set_fsdp_keep_gathered_until_backward(
      !absl::GetFlag(FLAGS_reshard_after_forward));
  c.set_fsdp_prefetch(absl::GetFlag(FLAGS_fsdp_prefetch));
  // 0 is unset (1): a run without tensor parallelism keeps its fingerprint.
  // --tp < 1 is refused from the flag itself (TensorParallelFlagError).
  const int tp = absl::GetFlag(FLAGS_tp);
  c.set_tp(tp == 1 ? 0 : std::max(tp, 0));
  c.set_sequence_parallel(absl::GetFlag(FLAGS_sequence_parallel));
  // Pipeline fields stay unset unless the run is pipelined (fingerprints).
  const int32_t pp = absl::GetFlag(FLAGS_pp);
  if (pp != 1) {
    c.set_pp(pp);
    c.set_pp_schedule(absl::GetFlag(FLAGS_pp_schedule));
    c.set_pp_microbatches(absl::GetFlag(FLAGS_pp_microbatches));
  }
  c.set_pp_split(absl::GetFlag(FLAGS_pp_split));
  c.set_testonly_pp_skip_tied_embedding_sum(
      absl::GetFlag(FLAGS_testonly_pp_skip_tied_embedding_sum));
  return c;
}

absl::Status ValidatePipelineFlags() {
  const int32_t pp = absl::GetFlag(FLAGS_pp);
  if (pp < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--pp=", pp, " must be at least 1"));
  }
  if (pp == 1) {
    for (const char* flag : {"pp_schedule", "pp_microbatches"}) {
      if (FlagWasSet(flag)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", flag, " applies to pipelined runs only; add --pp > 1"));
      }
    }
  }
  return absl::OkStatus();
}

WarmupsGiven WarmupsGivenOnCommandLine() {
  WarmupsGiven given;
  given.lr_warmup_steps = FlagWasSet("lr_warmup_steps");
  given.timing_warmup_steps = FlagWasSet("timing_warmup_steps");
  return given;
}

std::vector<std::string> ScopedFlagsOnCommandLine() {
  std::vector<std::string> set;
  auto add = [&set](const char* flag) {
    if (FlagWasSet(flag) && std::find(set.begin(), set.end(), flag) == set.end()) {
      set.push_back(flag);
    }
  };
  for (const StrategyEntry& entry : AllStrategyEntries()) {
    for (const char* flag : entry.flags) add(flag);
  }
  for (const ConditionalFlag& conditional : kConditionalFlags) add(conditional.flag);
  return set;
}

checkpoint::CheckpointOptions CheckpointOptionsFromFlags() {
  checkpoint::CheckpointOptions options;
  options.dir = ResolveUserPath(absl::GetFlag(FLAGS_checkpoint_dir));
  options.save_every = absl::GetFlag(FLAGS_save_every);
  options.keep_last = absl::GetFlag(FLAGS_keep_last);
  options.keep_last_given = FlagWasSet("keep_last");
  const std::string resume = absl::GetFlag(FLAGS_resume);
  options.resume = resume == "latest" ? resume : ResolveUserPath(resume);
  options.overwrite = absl::GetFlag(FLAGS_overwrite_checkpoints);
  options.async_save = absl::GetFlag(FLAGS_async_checkpoint);
  options.allow_data_change = absl::GetFlag(FLAGS_allow_data_change);
  options.data_fingerprint_full = absl::GetFlag(FLAGS_data_fingerprint) == "full";
  options.data_fingerprint = absl::GetFlag(FLAGS_data_fingerprint);
  return options;
}

absl::Status TensorParallelFlagError() {
  const int tp = absl::GetFlag(FLAGS_tp);
  if (tp >= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--tp=", tp, " must be at least 1"));
}

}  // namespace mtb
