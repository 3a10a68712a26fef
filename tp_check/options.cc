#include "tp_check/options.h"

#include "absl/strings/str_cat.h"
#include "common/libtorch/allclose.h"
#include "common/base/status.h"

namespace mtb::tp_check {

CheckOptions DefaultCheckOptions() {
  CheckOptions options;
  options.set_batch(2);
  options.set_seq_len(8);
  options.set_hidden(32);
  options.set_ffn_hidden(128);
  options.set_heads(4);
  options.set_vocab(64);
  options.set_gather_output(true);
  options.set_dropout(0.1);
  options.set_seed(1234);
  options.set_rtol(kFp32Rtol);
  options.set_atol(kFp32Atol);
  return options;
}

World NprocWorld(int world_size) {
  return World{world_size, absl::StrCat("--nproc=", world_size)};
}

namespace {

absl::Status RequirePositive(absl::string_view flag, int64_t value) {
  if (value >= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", value, " must be >= 1"));
}

}  // namespace

absl::Status ValidateSizes(const CheckOptions& options) {
  RETURN_IF_ERROR(RequirePositive("batch", options.batch()));
  RETURN_IF_ERROR(RequirePositive("seq_len", options.seq_len()));
  RETURN_IF_ERROR(RequirePositive("hidden", options.hidden()));
  RETURN_IF_ERROR(RequirePositive("ffn_hidden", options.ffn_hidden()));
  RETURN_IF_ERROR(RequirePositive("heads", options.heads()));
  RETURN_IF_ERROR(RequirePositive("vocab", options.vocab()));
  if (!(options.dropout() >= 0.0 && options.dropout() < 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dropout=", options.dropout(), " must be in [0, 1)"));
  }
  if (!(options.rtol() >= 0.0) || !(options.atol() >= 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rtol=", options.rtol(), " and --atol=", options.atol(),
                     " must be >= 0"));
  }
  return absl::OkStatus();
}

absl::Status RequireDivisibleByWorld(absl::string_view flag, int64_t value,
                                     const World& world,
                                     absl::string_view why) {
  if (value % world.size == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", value, " is not divisible by ", world.label,
                   " (", why, ")"));
}

}  // namespace mtb::tp_check
