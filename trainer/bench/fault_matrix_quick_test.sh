#!/usr/bin/env bash
# The fault matrix's quick subset with real processes: a rank killed while
# writing a checkpoint under zero1, zero2 and fsdp, each restarted and equal
# to its uninterrupted run bit for bit (ddp's every phase:
# //trainer:trainer_restart_test); the matrix writes its JSON (with
# provenance) and Markdown and exits 0 only when every row is as expected;
# a bad --kinds exits 2.
set -euo pipefail
matrix="$(pwd)/trainer/bench/fault_matrix"
out="$TEST_TMPDIR/out"
mkdir -p "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }

code=0
"$matrix" --kinds=explode > "$out/stdout" 2> "$out/stderr" || code=$?
[[ "$code" == 2 ]] && grep -qF "fault_matrix: --kinds: 'explode' is not one of" "$out/stderr" ||
  fail "bad --kinds: exit $code"

TMPDIR="$TEST_TMPDIR" "$matrix" --strategies=zero1,zero2,fsdp --kinds=kill \
  --phases=checkpoint_write --out="$out/matrix.json" > "$out/stdout" 2> "$out/stderr" ||
  { cat "$out/stderr" "$out/stdout" >&2; fail "the matrix exited non-zero"; }
grep -qF "3 of 3 rows as expected." "$out/matrix.md" || fail "markdown"
/usr/bin/python3 - "$out/matrix.json" <<'PY' || fail "rows"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["run_context"]["tool"] == "fault_matrix", r["run_context"]
rows = r["rows"]
assert [x["strategy"] for x in rows] == ["zero1", "zero2", "fsdp"], rows
for x in rows:
    assert x["fault"] == "kill:rank=1,step=4,phase=checkpoint_write", x
    assert x["as_expected"] and x["restarted"] and x["exact"] and x["tree_unchanged"], x
    assert x["detected_by"] == "launcher: rank SIGKILLed" and x["detect_seconds"] > 0, x
PY
echo PASS
