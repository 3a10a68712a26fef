# Shared by the launcher's tests over real trainer ranks
# (trainer_supervision_test.sh, hang_naming_test.sh; sourced from the runfiles
# root): the binary, a scratch folder, a tiny configuration with the
# heartbeat floor shrunk to 1 s (the first step's allowance is 2 s) and a 2 s
# kill grace, and
#   run NAME CODE ARGS...  runs the trainer with the tiny configuration and
#                          ARGS, checks it exits CODE; stdout and stderr in
#                          $out/NAME.out and $out/NAME.err
#   last NAME REGEX        the launcher's last line of $out/NAME.err matches
# The caller sets the steps: tiny+=(--steps=N).
trainer="$(pwd)/trainer/trainer"
out="$TEST_TMPDIR/out"
mkdir -p "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }
tiny=(--vocab_size=64 --d_model=32 --n_layers=1 --n_heads=4 --seq_len=16 --batch_size=6
      --intra_op_threads=1 --data=synthetic --peak_flops=1e10 --nomarkdown
      --test_only_heartbeat_floor=1s --kill_grace=2s)

run() {
  local name="$1" want="$2" code=0
  shift 2
  "$trainer" "${tiny[@]}" "$@" --out="$out/$name/t.json" > "$out/$name.out" 2> "$out/$name.err" ||
    code=$?
  [[ "$code" == "$want" ]] || { cat "$out/$name.err" >&2; fail "$name: exit $code, want $want"; }
}

last() {
  tail -n 1 "$out/$1.err" | grep -qE "$2" || { cat "$out/$1.err" >&2; fail "$1: last line"; }
}
