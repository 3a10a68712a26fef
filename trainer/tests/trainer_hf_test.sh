#!/usr/bin/env bash
# The trainer binary with --init_from and --metrics_jsonl, as users run it:
# a 1-rank run saves a checkpoint, ckpt_tool exports it to safetensors, a new
# 2-rank run starts from that directory and streams one JSON line per step;
# a mismatched model is refused (exit 2) naming the fields before any rank
# starts, and so is a missing one.
set -euo pipefail
source trainer/tests/cli_test_lib.sh
ckpt_tool="$(pwd)/ckpt_tool/ckpt_tool"

"$trainer" "${tiny[@]}" --nproc=1 --checkpoint_dir="$out/ckpt" --save_every=3 \
  --nomarkdown --out="$out/first.json" > "$out/first.log" 2>&1 ||
  { cat "$out/first.log" >&2; fail "training the model to export failed"; }
"$ckpt_tool" export "$out/ckpt" --format=safetensors --out="$out/hf" > "$out/export.log" 2>&1 ||
  { cat "$out/export.log" >&2; fail "export failed"; }
[[ -f "$out/hf/model.safetensors" && -f "$out/hf/config.json" ]] || fail "export wrote no model"

"$trainer" "${tiny[@]}" --nproc=2 --init_from="$out/hf" --metrics_jsonl="$out/metrics.jsonl" \
  --nomarkdown --out="$out/second.json" > "$out/second.log" 2>&1 ||
  { cat "$out/second.log" >&2; fail "--init_from run failed"; }
/usr/bin/python3 - "$out/metrics.jsonl" "$out/second.json" << 'PY' || fail "metrics stream"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 3, lines
rows = [json.loads(line) for line in lines]
assert [r["step"] for r in rows] == [1, 2, 3], rows
for key in ("loss", "lr", "tokens_per_second", "grad_norm", "comm_wait_ms", "peak_memory_bytes"):
    assert all(isinstance(r[key], (int, float)) for r in rows), key
result = json.load(open(sys.argv[2]))
losses = [s["loss"] for s in result["runs"][0]["steps"]]
assert [r["loss"] for r in rows] == losses, (rows, losses)
PY
# The imported model's first loss is not the seeded model's: it was trained.
first_loss() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["runs"][0]["steps"][0]["loss"])' "$1"; }
[[ "$(first_loss "$out/first.json")" != "$(first_loss "$out/second.json")" ]] ||
  fail "--init_from changed nothing"

expect 2 "config.json differs from this run: n_embd=32 vs --d_model=64; n_head=4 vs --n_heads=8" \
  "${tiny[@]}" --d_model=64 --n_heads=8 --init_from="$out/hf" --out="$out/bad.json"
! grep -q "launch: node" "$out/stdout" "$out/stderr" || fail "ranks started for a refused model"
[[ ! -e "$out/bad.json" ]] || fail "a refused run wrote a result"
expect 2 "--init_from=$out/nowhere: no such file or directory" "${tiny[@]}" --init_from="$out/nowhere"
mkdir -p "$out/empty"
expect 2 "--init_from=$out/empty: no config.json there" "${tiny[@]}" --init_from="$out/empty"
echo "PASS"
