# Shared by trainer_cli_test.sh and trainer_run_test.sh (sourced from the
# runfiles root): the binary, a scratch folder, a tiny configuration and
# expect CODE SUBSTRING ARGS..., which runs the trainer, checks the exit code
# and that stderr contains SUBSTRING.
trainer="$(pwd)/trainer/trainer"
out="$TEST_TMPDIR/out"
mkdir -p "$out"
tiny=(--vocab_size=64 --d_model=32 --n_layers=1 --n_heads=4 --seq_len=16
      --batch_size=4 --steps=3 --timing_warmup_steps=1 --intra_op_threads=1
      --data=synthetic)

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect CODE SUBSTRING ARGS...: runs the trainer, checks the exit code and
# that stderr contains SUBSTRING.
expect() {
  local code="$1" substring="$2"
  shift 2
  local actual=0
  "$trainer" "$@" > "$out/stdout" 2> "$out/stderr" || actual=$?
  [[ "$actual" == "$code" ]] || { cat "$out/stderr" >&2; fail "exit $actual, want $code: $*"; }
  grep -qF -- "$substring" "$out/stderr" || { cat "$out/stderr" >&2; fail "stderr lacks '$substring': $*"; }
}
