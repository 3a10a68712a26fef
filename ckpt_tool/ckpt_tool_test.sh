#!/usr/bin/env bash
set -euo pipefail
tool="$(pwd)/ckpt_tool/ckpt_tool"
make="$(pwd)/ckpt_tool/make_test_checkpoint"
root="$TEST_TMPDIR/ckpt"
out="$TEST_TMPDIR/out"
mkdir -p "$root" "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }
run() { local code=0; "$tool" "$@" > "$out/stdout" 2> "$out/stderr" || code=$?; echo "$code"; }

"$make" "$root" 2 && "$make" "$root" 4 || fail "making checkpoints"
[[ "$(run)" == 2 ]] || fail "no command: want 2"
[[ "$(run frobnicate "$root")" == 2 ]] || fail "bad command: want 2"

[[ "$(run inspect "$root")" == 0 ]] || { cat "$out/stderr" >&2; fail "inspect"; }
grep -qF "$root/step_00000004: step 4 of run test-run, ddp on 2 ranks" "$out/stdout" || { cat "$out/stdout" >&2; fail "inspect header"; }
grep -qF "| model/w | float32 | 2x3 | 2 | 24 |" "$out/stdout" || fail "inspect tensor row"
[[ "$(run inspect "$root/step_00000002" --json)" == 0 ]] || fail "inspect --json"
/usr/bin/python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["step"]=="2" and s["world_size"]==2 and len(s["ranks"])==2' "$out/stdout" || fail "inspect JSON"

[[ "$(run verify "$root")" == 0 ]] || { cat "$out/stderr" >&2; fail "verify"; }
grep -qF "step_00000004: OK" "$out/stdout" || fail "verify OK line"

printf 'X' | dd of="$root/step_00000004/rank_00001.bin" bs=1 seek=25 conv=notrunc 2>/dev/null
[[ "$(run verify "$root/step_00000004")" == 1 ]] || fail "corrupt: want 1"
grep -qF "rank_00001.bin: corrupt: SHA-256 differs" "$out/stderr" || { cat "$out/stderr" >&2; fail "corrupt message"; }
# The root resolves past the broken newest checkpoint, and says so.
[[ "$(run verify "$root")" == 0 ]] || fail "verify root with a broken newest"
grep -qF "falling back to step_00000002" "$out/stdout" || fail "fallback note"

rm "$root/step_00000002/rank_00000.meta"
[[ "$(run verify "$root/step_00000002")" == 1 ]] || fail "missing: want 1"
grep -qF "rank_00000.meta: missing (listed in the manifest)" "$out/stderr" || fail "missing message"
[[ "$(run verify "$TEST_TMPDIR/nowhere")" == 1 ]] || fail "no path: want 1"
echo PASS
