// The trainer's configuration (TrainConfig in train_result.proto): derived
// defaults and the rules every value must satisfy, checked before anything
// runs (docs/design.md "One validation pass").
#ifndef MTB_TRAINER_CONFIG_CONFIG_H_
#define MTB_TRAINER_CONFIG_CONFIG_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "trainer/config/config_names.h"
#include "trainer/train_result.pb.h"

namespace mtb {

inline constexpr int kTrainResultSchemaVersion = 1;

// Which warm-up lengths the user gave (flags set on the command line), as
// opposed to left at their defaults.
struct WarmupsGiven {
  bool lr_warmup_steps = false;
  bool timing_warmup_steps = false;
};

// A newcomer's `--steps=1` must run with every other flag left alone, but the
// default warm-ups (10 learning-rate steps, 2 untimed steps) do not fit in so
// short a run. Each warm-up the user did not give shrinks to --steps - 1 when
// it does not fit; one note per value changed says so ("--steps=1: the
// learning-rate warm-up shrinks from its default 10 to 0 steps"). A value the
// user gave is left for ValidateConfig to accept or refuse with the reason.
std::vector<std::string> FitDefaultWarmupsToSteps(TrainConfig* config,
                                                  WarmupsGiven given);

// Fills the values a user leaves to us: min_lr < 0 -> lr / 10;
// lr_decay_steps == 0 -> steps; grad_sync "auto" -> "last"; intra_op_threads
// == 0 -> this machine's cores divided among `ranks_per_host` ranks (at least
// 1).
void ResolveConfig(TrainConfig* config, int ranks_per_host);

// --reduction=exact (trainer/exact/exact.h).
inline bool IsExact(const TrainConfig& config) {
  return config.reduction() == TrainConfig::exact;
}

// The flags that do something only when another flag has a given value
// (the strategy-scoped flags are the strategy registry's:
// trainer/strategy/registry.h). Given on the command line where they do
// nothing, they are refused by ValidateConfig with one line: "--exact_chunk
// applies to --reduction=exact, not float: it would do nothing". Flag names
// are TrainConfig field names (enum fields for `under`).
struct ConditionalFlag {
  const char* flag;
  const char* under;     // the flag it depends on: "reduction"
  const char* value;     // the value under which it applies: "exact"
  const char* why;       // what it would not do otherwise
};
inline constexpr ConditionalFlag kConditionalFlags[] = {
    {"exact_chunk", "reduction", "exact",
     "float reduction runs each micro-batch whole"},
    {"testonly_exact_grid_finer_bits", "reduction", "exact",
     "float reduction has no grid"},
    {"lr_decay_steps", "lr_schedule", "cosine",
     "a constant rate stays at --lr after the warm-up"},
    {"min_lr", "lr_schedule", "cosine",
     "a constant rate stays at --lr after the warm-up"},
};

// kInvalidArgument with one line naming the flag, its value and the rule
// ("--d_model=100 must be divisible by --n_heads=3"), for the first rule
// broken. Call after ResolveConfig. Token-file checks that need the file
// (vocabulary, length) are made when the file is opened (trainer/data/data.h).
// `flags_set`: the flags (without "--") given on the command line; a
// strategy-scoped one that does nothing for config.strategy() is refused
// (trainer/strategy/registry.h), as is a scoped field the config sets; so is
// a kConditionalFlags one whose condition does not hold (or whose field
// differs from its default: --exact_chunk, the exact grid's test bits).
absl::Status ValidateConfig(const TrainConfig& config,
                            const std::vector<std::string>& flags_set = {});

// The rules that need the world size (known before any rank communicates:
// from the launch flags or WORLD_SIZE): --strategy=single needs one rank.
// kInvalidArgument, one line.
absl::Status ValidateConfigForWorldSize(const TrainConfig& config,
                                        int world_size);

// The flag that sets each TrainConfig field: the field's own name, except for
// the fields that hold a flag's negation (the flags keep the names users
// type; the fields say what the code does when set).
struct NegatedFlag {
  const char* field;
  const char* flag;
};
inline constexpr NegatedFlag kNegatedFlags[] = {
    {"ddp_launch_after_backward", "ddp_overlap"},
    {"fsdp_keep_gathered_until_backward", "reshard_after_forward"},
};

// One ("--flag", value) row per TrainConfig field, the value as the flag
// takes it (a negated field printed as its flag's value).
std::vector<std::pair<std::string, std::string>> FlagValues(
    const TrainConfig& config);

// SHA-256 (hex) of the canonical JSON of `config` with the fields that do not
// change any number of the run cleared: timing_warmup_steps, repeat,
// intra_op_threads, log_every, activation_checkpointing (proven not to
// change results, trainer tests), peak_flops (MFU's denominator only) and the
// scheduling switches proven not to change a bit (ddp_launch_after_backward,
// fsdp_keep_gathered_until_backward, fsdp_prefetch).
std::string ConfigFingerprint(const TrainConfig& config);

}  // namespace mtb

#endif  // MTB_TRAINER_CONFIG_CONFIG_H_
