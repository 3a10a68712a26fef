#!/usr/bin/env bash
# gpt2_torch_peer.py's plumbing on the CPU with /usr/bin/python3's PyTorch
# (1.13: no torch.compile, so the compile mode is only checked to refuse
# cleanly there): a tiny model, 3 steps, 1 of them warm-up; the JSON's fields,
# the median over the timed steps only, the parameter count of the trainer's
# model of that shape (118528: tied head, biases, LayerNorms), a falling-free
# finite loss near ln 256; bad arguments exit 2.
set -u
peer=trainer/bench/gpt2_torch_peer.py
py=/usr/bin/python3
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

code=0
"$py" "$peer" --device=cpu --tiny --steps=3 --warmup=1 --out="$tmp/peer.json" \
  > "$tmp/out" 2>&1 || code=$?
[[ $code == 0 ]] || fail "tiny eager run exited $code: $(cat "$tmp/out")"
[[ $(grep -c '^step ' "$tmp/out") == 3 ]] || fail "want 3 step lines: $(cat "$tmp/out")"
grep -q '^step 1 .*(warm-up)$' "$tmp/out" || fail "step 1 not marked warm-up"
"$py" - "$tmp/peer.json" <<'PY' || fail "the JSON"
import json, math, statistics, sys
r = json.load(open(sys.argv[1]))
assert r["mode"] == "eager" and r["device"] == "cpu" and r["precision"] == "bf16", r
assert r["parameters"] == 118528, r["parameters"]
assert r["tokens_per_step"] == 4 * 32, r["tokens_per_step"]
steps = r["steps"]
assert [s["step"] for s in steps] == [1, 2, 3]
assert [s["timed"] for s in steps] == [False, True, True]
for s in steps:
    assert math.isfinite(s["loss"]) and abs(s["loss"] - math.log(256)) < 0.5, s
    assert abs(s["tokens_per_second"] - 128 / (s["ms"] / 1e3)) < 1e-6 * s["tokens_per_second"], s
want = statistics.median(s["tokens_per_second"] for s in steps[1:])
assert r["median_tokens_per_second"] == want, (r["median_tokens_per_second"], want)
for key in ("torch_version", "fused_adamw", "attention", "config", "device_name",
            "max_memory_allocated_bytes"):
    assert key in r, key
PY

# torch.compile where this PyTorch has it; a clean refusal where it does not.
if "$py" -c 'import sys, torch; sys.exit(0 if hasattr(torch, "compile") else 1)'; then
  echo "this PyTorch has torch.compile: the compile mode runs on the GPU machine only"
else
  code=0
  "$py" "$peer" --device=cpu --tiny --mode=compile --steps=2 --warmup=1 > "$tmp/out" 2>&1 || code=$?
  [[ $code == 2 ]] || fail "compile without torch.compile: exit $code, want 2"
  grep -q '^gpt2_torch_peer: --mode=compile: PyTorch .* has no torch.compile$' "$tmp/out" \
    || fail "compile refusal: $(cat "$tmp/out")"
fi
# Bad arguments: exit 2 before any model is built.
for bad in "--warmup=3 --steps=3" "--precision=fp16" "--batch_size=0"; do
  code=0
  # shellcheck disable=SC2086
  "$py" "$peer" --device=cpu --tiny $bad > "$tmp/out" 2>&1 || code=$?
  [[ $code == 2 ]] || fail "$bad: exit $code, want 2"
done

if [[ $failures != 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo PASS
