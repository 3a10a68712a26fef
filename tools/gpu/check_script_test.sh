#!/usr/bin/env bash
# tools/gpu/check.sh's own logic, on the CPU, with stand-ins for the two GPU
# binaries (its first real run costs scarce GPU time, so a script bug must not
# be found there): every check passes with good stand-ins; a loss off by 1e-3,
# a planted off-by-one that passes and a failing kernel each fail their check
# (and the exit code), as does a missing reference folder; bad usage exits 2.
set -u
script=tools/gpu/check.sh
losses=tools/gpu/cpu_losses_small.txt
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
stubs="$tmp/stubs"
mkdir -p "$stubs" "$tmp/refs"
: > "$tmp/refs/manifest.txt"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

cat > "$stubs/trainer_cuda" <<'EOF'
#!/usr/bin/env bash
# Stand-in trainer_cuda (bash and awk: a Python start costs seconds under
# load): refuses --fault (exit 2); the small run returns the CPU losses
# (+ $STUB_SHIFT), the large one a falling loss.
out=""
small=0
for a in "$@"; do
  case "$a" in
    --fault*) echo "trainer_cuda: --fault is not supported with --device=cuda" >&2; exit 2 ;;
    --out=*) out="${a#--out=}" ;;
    --vocab_size=256) small=1 ;;
  esac
done
if [[ $small == 1 ]]; then
  awk -v shift="${STUB_SHIFT:-0}" '!/^#/ && NF == 2 { printf "%s%.17g", (n++ ? "," : ""), $2 + shift }' \
    "$CPU_LOSSES" > "$out.losses"
else
  awk 'BEGIN { for (i = 0; i < 12; ++i) printf "%s%.17g", (i ? "," : ""), 11 - 0.1 * i }' > "$out.losses"
fi
awk '{ n = split($0, l, ","); printf "{\"runs\": [{\"tokens_per_second\": 1234.0, \"steps\": ["
       for (i = 1; i <= n; ++i) printf "%s{\"loss\": %s}", (i > 1 ? ", " : ""), l[i]
       print "]}]}" }' "$out.losses" > "$out"
EOF

cat > "$stubs/kernel_check" <<'EOF'
#!/usr/bin/env bash
# Stand-in kernel_check: PASS lines; --plant_off_by_one fails the softmax
# (unless $STUB_PLANT_PASSES); $STUB_KERNEL_FAIL fails the classifier.
planted=0
for a in "$@"; do [[ "$a" == --plant_off_by_one ]] && planted=1; done
echo "# stand-in GPU"
if [[ $planted == 1 && -z "${STUB_PLANT_PASSES:-}" ]]; then
  echo "FAIL causal_softmax_forward/att max_err=0.996 bound=3.89e-06 ratio=2.56e+05 at=6401"
  exit 1
fi
echo "PASS causal_softmax_forward/att max_err=1e-07 bound=3.89e-06 ratio=0.03 at=1"
if [[ -n "${STUB_KERNEL_FAIL:-}" ]]; then
  echo "FAIL classifier/losses max_err=1 bound=0.000262 ratio=3.8e+03 at=4"
  exit 1
fi
echo "PASS classifier/losses max_err=1e-07 bound=0.000262 ratio=0.0004 at=4"
EOF
chmod +x "$stubs/trainer_cuda" "$stubs/kernel_check"

# run NAME [ENV=VALUE...]: check.sh into $tmp/NAME; sets $code.
run() {
  local name="$1"
  shift
  code=0
  env TRAINER_CUDA="$stubs/trainer_cuda" KERNEL_CHECK="$stubs/kernel_check" \
    KERNEL_REFS="$tmp/refs" CPU_LOSSES="$losses" "$@" \
    bash "$script" "$tmp/$name" > "$tmp/$name.log" 2>&1 || code=$?
}
expect_line() {  # expect_line NAME REGEX
  grep -Eq "$2" "$tmp/$1/checks.txt" || fail "$1: no line matching '$2' in checks.txt: $(cat "$tmp/$1/checks.txt")"
}

run good
[[ $code == 0 ]] || fail "good: exit $code, want 0: $(cat "$tmp/good.log")"
for check in kernels planted refusal small gpt2; do expect_line good "^PASS $check "; done
[[ $(wc -l < "$tmp/good/checks.txt") == 5 ]] || fail "good: want 5 checks: $(cat "$tmp/good/checks.txt")"
expect_line good "^PASS small max\|gpu-cpu\|=0 "
[[ -s "$tmp/good/kernels.txt" && -s "$tmp/good/kernels_planted.txt" ]] || fail "good: kernel outputs not kept"

# Three faults at once, each failing its own check.
run bad STUB_SHIFT=1e-3 STUB_PLANT_PASSES=1 STUB_KERNEL_FAIL=1
[[ $code == 1 ]] || fail "bad: exit $code, want 1"
expect_line bad "^FAIL small max\|gpu-cpu\|=0.001 "
expect_line bad "^FAIL planted exit 1, want 1 with causal_softmax_forward/att failing"
expect_line bad "^FAIL kernels exit 1, 1 outputs failed, 1 passed"
expect_line bad "^PASS refusal "
expect_line bad "^PASS gpt2 "

run no_refs KERNEL_REFS="$tmp/absent"
[[ $code == 1 ]] || fail "no_refs: exit $code, want 1"
expect_line no_refs "^FAIL kernels no kernel_check at .* or no references at "

code=0
bash "$script" > /dev/null 2>&1 || code=$?
[[ $code == 2 ]] || fail "no OUT_DIR: exit $code, want 2"

if [[ $failures != 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "PASS"
