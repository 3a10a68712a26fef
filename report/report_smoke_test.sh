#!/usr/bin/env bash
# report end to end: no inputs exit 2; the fixture directory gives a report
# and its loss SVG; a run with different provenance is refused (exit 1,
# differences named) unless --allow_mixed, which lists them in the report; a
# corrupt file is one line naming it, exit 1.
set -euo pipefail

report="$(pwd)/report/report"
fixtures="$(pwd)/report/testdata"
out="$TEST_TMPDIR/out"
mkdir -p "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }

code=0; "$report" > "$out/stdout" 2> "$out/stderr" || code=$?
[[ "$code" == 2 ]] || fail "no inputs: exit $code, want 2"

"$report" "$fixtures" --out="$out/r.md" > "$out/stdout" 2> "$out/stderr" || { cat "$out/stderr" >&2; fail "fixtures"; }
grep -q '^## trainer' "$out/r.md" || fail "no trainer section"
grep -q '^## comm_bench' "$out/r.md" || fail "no comm_bench section"
grep -q '^## tp_check' "$out/r.md" || fail "no tp_check section"
grep -q '<svg' "$out/r_loss.svg" || fail "no loss SVG"
grep -qF "plot: $out/r_loss.svg" "$out/stdout" || fail "no plot line"

sed 's/"git_commit": "[0-9a-f]*"/"git_commit": "0000000000000000000000000000000000000000"/' \
  "$fixtures/trainer_ddp.json" > "$out/old_commit.json"
code=0; "$report" "$fixtures/trainer_single.json" "$out/old_commit.json" --out="$out/mixed.md" \
  > "$out/stdout" 2> "$out/stderr" || code=$?
[[ "$code" == 1 ]] || fail "mixed provenance: exit $code, want 1"
grep -qF "report: the runs' provenance differs" "$out/stderr" || fail "no refusal line"
grep -qF "git_commit differs: " "$out/stderr" || fail "the difference is not named"
[[ ! -e "$out/mixed.md" ]] || fail "a refused report was written"
"$report" "$fixtures/trainer_single.json" "$out/old_commit.json" --allow_mixed --out="$out/mixed.md" \
  > /dev/null 2>&1 || fail "--allow_mixed"
grep -qF "**Mixed provenance (--allow_mixed):**" "$out/mixed.md" || fail "differences not listed"

printf '{"run_context": ' > "$out/corrupt.json"
code=0; "$report" "$out/corrupt.json" --out="$out/c.md" > "$out/stdout" 2> "$out/stderr" || code=$?
[[ "$code" == 1 ]] || fail "corrupt: exit $code, want 1"
[[ "$(wc -l < "$out/stderr")" == 1 ]] || { cat "$out/stderr" >&2; fail "not one line"; }
grep -qF "$out/corrupt.json: not a result file" "$out/stderr" || fail "the file is not named"
# No output replaces an input, by any spelling or link; nothing is written.
cp "$fixtures/trainer_single.json" "$out/in.json"
before=$(sha256sum < "$out/in.json")
code=0; "$report" "$out/in.json" --out="$out/./in.json" > "$out/stdout" 2> "$out/stderr" || code=$?
[[ "$code" == 2 ]] || fail "--out onto an input: exit $code, want 2"
grep -qF "is the same file as the input $out/in.json" "$out/stderr" || fail "collision message"
ln "$out/in.json" "$out/hard.json"
code=0; "$report" "$out/in.json" --out="$out/hard.json" > "$out/stdout" 2> "$out/stderr" || code=$?
[[ "$code" == 2 ]] || fail "--out onto a hard link of an input: exit $code, want 2"
[[ "$(sha256sum < "$out/in.json")" == "$before" ]] || fail "an input was changed"
echo "PASS"
