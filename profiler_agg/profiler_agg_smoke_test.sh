#!/usr/bin/env bash
set -euo pipefail
agg="$(pwd)/profiler_agg/profiler_agg"
fixtures="$(pwd)/profiler_agg/testdata"
out="$TEST_TMPDIR/out"
mkdir -p "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }

run() { local code=0; "$agg" "$@" > "$out/stdout" 2> "$out/stderr" || code=$?; echo "$code"; }

[[ "$(run)" == 2 ]] || fail "no directory: want exit 2"
[[ "$(run "$fixtures" --out="$out/x.json")" == 2 ]] || fail "no traces: want exit 2"
grep -qF "no rank_<r>.trace.json files" "$out/stderr" || fail "no-traces message"
[[ "$(run "$fixtures/mixed_runs" --out="$out/x.json")" == 1 ]] || fail "mixed runs: want exit 1"
grep -qF "mixed_runs/rank_1.trace.json: trace of run another-run" "$out/stderr" || fail "mixed message"
[[ "$(run "$fixtures/truncated" --out="$out/x.json")" == 1 ]] || fail "truncated: want exit 1"
[[ "$(wc -l < "$out/stderr")" == 1 ]] || fail "truncated: not one line"
grep -qF "truncated/rank_1.trace.json: not a complete trace: it does not parse as trace JSON, so it is truncated" "$out/stderr" || fail "truncated file not named"

# No output replaces a trace it reads, by any spelling; nothing is written.
cp -r "$fixtures/two_ranks" "$out/traces"
before=$(sha256sum < "$out/traces/rank_0.trace.json")
[[ "$(run "$out/traces" --out="$out/traces/./rank_0.trace.json")" == 2 ]] || fail "--out onto a trace: want exit 2"
grep -qF "is the same file as the trace rank_0.trace.json" "$out/stderr" || fail "collision message"
ln -s "$out/traces/rank_1.trace.json" "$out/link.json"
[[ "$(run "$out/traces" --out="$out/link.json")" == 2 ]] || fail "--out onto a symlinked trace: want exit 2"
[[ "$(sha256sum < "$out/traces/rank_0.trace.json")" == "$before" ]] || fail "a trace was changed"
[[ ! -e "$out/traces/rank_0.md" ]] || fail "a refused run wrote a companion"
[[ "$(run "$fixtures/two_ranks" --step=-1 --out="$out/z.json")" == 2 ]] || fail "--step=-1: want exit 2"
grep -qF -- "--step=-1 must be >= 1" "$out/stderr" || fail "--step=-1 message"
[[ "$(run "$fixtures/two_ranks" stray --out="$out/z.json")" == 2 ]] || fail "a stray argument: want exit 2"

[[ "$(run "$fixtures/two_ranks" --step=1 --out="$out/agg.json")" == 0 ]] || { cat "$out/stderr" >&2; fail "fixtures"; }
for f in agg.json agg.md agg.step1.svg agg.merged.trace.json; do [[ -s "$out/$f" ]] || fail "no $f"; done
/usr/bin/python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); assert {e["pid"] for e in t["traceEvents"]} == {0, 1}' \
  "$out/agg.merged.trace.json" || fail "the merged trace is not trace-event JSON of both ranks"
[[ "$(run "$fixtures/two_ranks" --step=1 --out="$out/agg.json")" == 0 ]] || fail "rerun"
grep -qF "wrote: $out/agg.merged.trace.json" "$out/stdout" || fail "a rerun did not replace its merged trace"
echo '{"mine": 1}' > "$out/other.merged.trace.json"
[[ "$(run "$fixtures/two_ranks" --out="$out/other.json")" == 0 ]] || fail "other"
grep -qF "kept $out/other.merged.trace.json" "$out/stdout" || fail "a foreign file was not kept"
[[ "$(cat "$out/other.merged.trace.json")" == '{"mine": 1}' ]] || fail "a foreign file was overwritten"
[[ "$(run "$fixtures/two_ranks" --step=7 --out="$out/y.json")" == 2 ]] || fail "--step=7: want exit 2"

# forensics (real dumps: trainer_hang_test): a folder without dumps or no
# folder is a usage error.
[[ "$(run forensics)" == 2 ]] || fail "forensics without a folder: want exit 2"
[[ "$(run forensics "$fixtures" --out="$out/f.json")" == 2 ]] || fail "forensics without dumps: want exit 2"
grep -qF "no flight recorder dumps (flight_*.json)" "$out/stderr" || fail "no-dumps message"
echo PASS
