#include "trainer/config/config.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"
#include "common/results/json_io.h"
#include "common/base/sha256.h"
#include "common/base/status.h"
#include "common/gemm/backend.h"
#include "trainer/pipeline/pipeline_config.h"
#include "trainer/strategy/registry.h"
#include "trainer/tp/options.h"

namespace mtb {
namespace {

absl::Status Invalid(const std::string& message) {
  return absl::InvalidArgumentError(message);
}

// The first of `flags` that kConditionalFlags scopes to a value `c` does not
// have: "--min_lr applies to --lr_schedule=cosine, not constant: it would do
// nothing (a constant rate stays at --lr after the warm-up)".
absl::Status ConditionalFlagsApply(const TrainConfig& c,
                                   const std::vector<std::string>& flags) {
  for (const ConditionalFlag& conditional : kConditionalFlags) {
    if (std::find(flags.begin(), flags.end(), conditional.flag) == flags.end()) {
      continue;
    }
    const google::protobuf::FieldDescriptor* under =
        c.GetDescriptor()->FindFieldByName(conditional.under);
    if (under == nullptr ||
        under->type() != google::protobuf::FieldDescriptor::TYPE_ENUM) {
      return absl::InternalError(absl::StrCat(
          "kConditionalFlags: --", conditional.flag, " depends on '",
          conditional.under, "', which is no enum field of TrainConfig"));
    }
    const std::string& value = c.GetReflection()->GetEnum(c, under)->name();
    if (value == conditional.value) continue;
    return Invalid(absl::StrCat("--", conditional.flag, " applies to --",
                                conditional.under, "=", conditional.value,
                                ", not ", value, ": it would do nothing (",
                                conditional.why, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> FitDefaultWarmupsToSteps(TrainConfig* config,
                                                  WarmupsGiven given) {
  std::vector<std::string> notes;
  const int32_t fits = std::max(0, config->steps() - 1);
  auto shrink = [&](bool user_gave, int32_t value, const char* what,
                    const char* why, auto set) {
    if (user_gave || value <= fits) return;
    set(fits);
    notes.push_back(absl::StrCat("--steps=", config->steps(), ": the ", what,
                                 " shrinks from its default ", value, " to ",
                                 fits, " steps ", why));
  };
  // One step is also the cosine decay's last: it runs at --min_lr, not --lr.
  const char* lr_why = fits > 0 || config->lr_schedule() == TrainConfig::constant
                           ? "so that the rate reaches --lr"
                           : "(one step is the end of the cosine schedule: it runs at --min_lr; "
                             "--lr_schedule=constant runs it at --lr)";
  shrink(given.lr_warmup_steps, config->lr_warmup_steps(), "learning-rate warm-up", lr_why,
         [&](int32_t v) { config->set_lr_warmup_steps(v); });
  shrink(given.timing_warmup_steps, config->timing_warmup_steps(),
         "timing warm-up", "so that some step is timed",
         [&](int32_t v) { config->set_timing_warmup_steps(v); });
  return notes;
}

void ResolveConfig(TrainConfig* config, int ranks_per_host) {
  if (config->min_lr() < 0) config->set_min_lr(config->lr() / 10);
  if (config->lr_decay_steps() == 0) {
    config->set_lr_decay_steps(config->steps());
  }
  if (config->grad_sync() == "auto") {
    // ddp, zero1 (and the one-rank reference) accumulate locally and
    // synchronise once; zero2 and fsdp synchronise every micro-batch so that
    // a rank never keeps a full gradient across micro-batches. An unknown
    // strategy resolves to "last" and fails validation by name.
    const absl::StatusOr<StrategyKind> kind = ParseStrategy(ConfigName(config->strategy()));
    config->set_grad_sync(kind.ok() ? AutoGradSync(*kind) : "last");
  }
  if (config->intra_op_threads() == 0 && IsExact(*config)) {
    // OpenBLAS's sgemm bits change with its thread count, and the per-host
    // default differs between layouts: exact mode pins one value.
    config->set_intra_op_threads(1);
  }
  if (config->intra_op_threads() == 0) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    config->set_intra_op_threads(
        std::max(1, cores / std::max(1, ranks_per_host)));
  }
}

absl::Status ValidateConfig(const TrainConfig& c,
                            const std::vector<std::string>& flags_set) {
  auto positive = [](const char* flag, int64_t value) -> absl::Status {
    if (value >= 1) return absl::OkStatus();
    return Invalid(absl::StrCat("--", flag, "=", value, " must be at least 1"));
  };
  if (c.vocab_size() < 2 || c.vocab_size() > 65536) {
    return Invalid(absl::StrCat("--vocab_size=", c.vocab_size(),
                                " must be in [2, 65536] (tokens are uint16)"));
  }
  for (const auto& [flag, value] :
       {std::pair<const char*, int64_t>{"d_model", c.d_model()},
        {"n_layers", c.n_layers()},
        {"n_heads", c.n_heads()},
        {"seq_len", c.seq_len()},
        {"batch_size", c.batch_size()},
        {"grad_accum", c.grad_accum()},
        {"steps", c.steps()},
        {"repeat", c.repeat()},
        {"log_every", c.log_every()},
        {"intra_op_threads", c.intra_op_threads()}}) {
    if (absl::Status status = positive(flag, value); !status.ok()) {
      return status;
    }
  }
  if (c.d_model() % c.n_heads() != 0) {
    return Invalid(absl::StrCat("--d_model=", c.d_model(),
                                " must be divisible by --n_heads=",
                                c.n_heads()));
  }
  if (!(c.dropout() >= 0 && c.dropout() < 1)) {
    return Invalid(
        absl::StrCat("--dropout=", c.dropout(), " must be in [0, 1)"));
  }
  // The enums' values are refused when the flags are parsed; a number no
  // value has (from a JSON file or a test) is refused here.
  if (!TrainConfig::Precision_IsValid(c.precision())) {
    return Invalid(absl::StrCat("--precision=", ConfigName(c.precision()),
                                " must be fp32 or bf16"));
  }
  if (c.data().empty()) {
    return Invalid("--data must be 'synthetic' or a token file path");
  }
  if (!(c.lr() > 0)) {
    return Invalid(absl::StrCat("--lr=", c.lr(), " must be positive"));
  }
  if (!(c.beta1() >= 0 && c.beta1() < 1)) {
    return Invalid(absl::StrCat("--beta1=", c.beta1(), " must be in [0, 1)"));
  }
  if (!(c.beta2() >= 0 && c.beta2() < 1)) {
    return Invalid(absl::StrCat("--beta2=", c.beta2(), " must be in [0, 1)"));
  }
  if (!(c.eps() > 0)) {
    return Invalid(absl::StrCat("--eps=", c.eps(), " must be positive"));
  }
  if (!(c.weight_decay() >= 0)) {
    return Invalid(absl::StrCat("--weight_decay=", c.weight_decay(),
                                " must be non-negative"));
  }
  if (!TrainConfig::LrSchedule_IsValid(c.lr_schedule())) {
    return Invalid(absl::StrCat("--lr_schedule=", ConfigName(c.lr_schedule()),
                                " must be constant or cosine"));
  }
  if (c.lr_warmup_steps() < 0) {
    return Invalid(absl::StrCat("--lr_warmup_steps=", c.lr_warmup_steps(),
                                " must be non-negative"));
  }
  if (c.lr_decay_steps() < 0) {
    return Invalid(absl::StrCat("--lr_decay_steps=", c.lr_decay_steps(),
                                " must be non-negative (0: --steps)"));
  }
  if (c.lr_warmup_steps() > 0 && c.lr_warmup_steps() >= c.steps()) {
    return Invalid(absl::StrCat(
        "--lr_warmup_steps=", c.lr_warmup_steps(), " must be < --steps=",
        c.steps(), ": the learning rate would never reach --lr (leave the "
        "flag unset and its default shrinks to fit a short run)"));
  }
  if (c.lr_schedule() == TrainConfig::cosine &&
      c.lr_decay_steps() <= c.lr_warmup_steps()) {
    return Invalid(absl::StrCat(
        "--lr_decay_steps=", c.lr_decay_steps(),
        " must be after the warm-up end (--lr_warmup_steps=",
        c.lr_warmup_steps(), "): the cosine decay would have no length and "
        "the rate would drop from --lr to --min_lr at once"));
  }
  if (!(c.min_lr() >= 0 && c.min_lr() <= c.lr())) {
    return Invalid(absl::StrCat("--min_lr=", c.min_lr(),
                                " must be in [0, --lr=", c.lr(), "]"));
  }
  if (!(c.max_grad_norm() >= 0)) {
    return Invalid(absl::StrCat("--max_grad_norm=", c.max_grad_norm(),
                                " must be non-negative (0 disables clipping)"));
  }
  if (c.timing_warmup_steps() < 0 || c.timing_warmup_steps() >= c.steps()) {
    return Invalid(absl::StrCat("--timing_warmup_steps=",
                                c.timing_warmup_steps(),
                                " must be in [0, --steps=", c.steps(),
                                ") so that some step is timed"));
  }
  absl::StatusOr<StrategyKind> kind = ParseStrategy(ConfigName(c.strategy()));
  if (!kind.ok()) return kind.status();
  // The strategy-scoped flags the config shows (those left at a value that
  // changes something) and those given on the command line must apply.
  std::vector<std::string> scoped = flags_set;
  if (c.ddp_launch_after_backward()) scoped.push_back("ddp_overlap");
  if (c.fsdp_keep_gathered_until_backward()) {
    scoped.push_back("reshard_after_forward");
  }
  if (c.fsdp_prefetch()) scoped.push_back("fsdp_prefetch");
  RETURN_IF_ERROR(StrategyFlagsApply(*kind, scoped));
  if (c.grad_sync() != "every" && c.grad_sync() != "last") {
    return Invalid(absl::StrCat("--grad_sync=", c.grad_sync(),
                                " must be auto, every or last"));
  }
  if (!(c.bucket_cap_mb() > 0)) {
    return Invalid(absl::StrCat("--bucket_cap_mb=", c.bucket_cap_mb(),
                                " must be positive"));
  }
  if (!c.gemm().empty()) {
    const absl::StatusOr<gemm::Backend> backend = gemm::ParseBackend(c.gemm());
    if (!backend.ok()) return backend.status();
  }
  if (!TrainConfig::Reduction_IsValid(c.reduction())) {
    return Invalid(absl::StrCat("--reduction=", ConfigName(c.reduction()),
                                " must be float or exact"));
  }
  // Flags that apply under another flag's value: those given, and those the
  // config shows away from their defaults.
  std::vector<std::string> conditional = flags_set;
  if (c.exact_chunk() != 1) conditional.push_back("exact_chunk");
  if (c.testonly_exact_grid_finer_bits() != 0) {
    conditional.push_back("testonly_exact_grid_finer_bits");
  }
  RETURN_IF_ERROR(ConditionalFlagsApply(c, conditional));
  if (IsExact(c)) {
    if (c.exact_chunk() < 1) {
      return Invalid(absl::StrCat("--exact_chunk=", c.exact_chunk(),
                                  " must be at least 1"));
    }
    if (c.batch_size() % c.exact_chunk() != 0) {
      return Invalid(absl::StrCat(
          "--reduction=exact: the micro-batch --batch_size=", c.batch_size(),
          " is not a multiple of --exact_chunk=", c.exact_chunk(),
          " (every chunk must hold the same samples on every layout)"));
    }
    if (c.testonly_exact_grid_finer_bits() < 0 ||
        c.testonly_exact_grid_finer_bits() > 40) {
      return Invalid(absl::StrCat("--testonly_exact_grid_finer_bits=",
                                  c.testonly_exact_grid_finer_bits(),
                                  " must be in [0, 40]"));
    }
    if (c.precision() != TrainConfig::fp32) {
      return Invalid(absl::StrCat("--reduction=exact supports --precision=fp32 "
                                  "only, not ",
                                  ConfigName(c.precision())));
    }
  }
  RETURN_IF_ERROR(pipeline::ValidatePipelineConfig(c));
  if (!(c.peak_flops() >= 0)) {
    return Invalid(absl::StrCat("--peak_flops=", c.peak_flops(),
                                " must be non-negative (0: measure)"));
  }
  return tp::ValidateTensorParallel(c);
}

absl::Status ValidateConfigForWorldSize(const TrainConfig& c, int world_size) {
  if (world_size < 1) {
    return Invalid(absl::StrCat("world size ", world_size,
                                " must be at least 1"));
  }
  if (absl::Status tp = tp::ValidateTensorParallelWorld(c, world_size);
      !tp.ok()) {
    return tp;
  }
  RETURN_IF_ERROR(pipeline::ValidatePipelineWorldSize(c, world_size));
  absl::StatusOr<const StrategyEntry*> entry = FindStrategy(ConfigName(c.strategy()));
  if (!entry.ok()) return entry.status();
  if ((*entry)->max_world_size > 0 && world_size > (*entry)->max_world_size) {
    return Invalid(absl::StrCat(
        "--strategy=", ConfigName(c.strategy()), " runs ",
        (*entry)->max_world_size == 1
            ? std::string("one rank")
            : absl::StrCat("at most ", (*entry)->max_world_size, " ranks"),
        ", but the world size is ", world_size,
        ": use --strategy=ddp (or zero1, zero2, fsdp) or --nproc=",
        (*entry)->max_world_size));
  }
  return absl::OkStatus();
}

std::vector<std::pair<std::string, std::string>> FlagValues(
    const TrainConfig& config) {
  std::vector<std::pair<std::string, std::string>> rows;
  const google::protobuf::Descriptor* descriptor = config.GetDescriptor();
  const google::protobuf::Reflection* reflection = config.GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = descriptor->field(i);
    std::string flag = field->name();
    bool negated = false;
    for (const NegatedFlag& n : kNegatedFlags) {
      if (field->name() == n.field) {
        flag = n.flag;
        negated = true;
      }
    }
    std::string value;
    if (negated) {
      value = reflection->GetBool(config, field) ? "false" : "true";
    } else {
      google::protobuf::TextFormat::PrintFieldValueToString(config, field, -1,
                                                            &value);
    }
    rows.push_back({absl::StrCat("--", flag), value});
  }
  return rows;
}

std::string ConfigFingerprint(const TrainConfig& config) {
  TrainConfig canonical = config;
  canonical.clear_timing_warmup_steps();
  canonical.clear_repeat();
  // Exact mode's bits depend on the thread count and the GEMM library: they
  // stay in.
  if (!IsExact(config)) {
    canonical.clear_intra_op_threads();
    canonical.clear_gemm();
  }
  canonical.clear_log_every();
  canonical.clear_activation_checkpointing();
  canonical.clear_peak_flops();
  canonical.clear_ddp_launch_after_backward();
  canonical.clear_fsdp_keep_gathered_until_backward();
  canonical.clear_fsdp_prefetch();
  return Sha256Hex(ToJson(canonical));
}

}  // namespace mtb
