#!/usr/bin/env bash
# Feeds tools/test_times.py a fake bazel-testlogs tree (Bazel's
# test.cache_status, a gtest test.xml, the one Bazel writes for an sh_test, a
# sharded target, a failed test, a timed-out one, a cached one, broken files)
# and checks the table it prints, slowest first.
set -euo pipefail

script="$(pwd)/tools/test_times.py"
logs="$TEST_TMPDIR/bazel-testlogs"

write() {  # write DIR XML
  mkdir -p "$logs/$1"
  printf '%s\n' "$2" > "$logs/$1/test.xml"
}

write common/launch/launch_test \
  '<testsuites tests="2" failures="0" errors="0" time="20.5" name="AllTests">
     <testsuite name="Launch" tests="2" failures="0" errors="0" time="20.5">
       <testcase name="A" time="14.4"/><testcase name="B" time="6.1"/>
     </testsuite></testsuites>'
write trainer/trainer_cli_test \
  '<testsuites><testsuite name="trainer/trainer_cli_test" tests="1" failures="0" errors="0">
     <testcase name="trainer/trainer_cli_test" status="run" duration="13" time="13"></testcase>
   </testsuite></testsuites>'
write comm_bench/sharded_test/shard_1_of_2 \
  '<testsuites time="3"><testsuite name="S" time="3"/></testsuites>'
write comm_bench/sharded_test/shard_2_of_2 \
  '<testsuites time="5.04"><testsuite name="S" time="5.04"/></testsuites>'
write tp_check/mlp_test \
  '<testsuites tests="1" failures="1" errors="0" time="0.4">
     <testsuite name="Mlp" tests="1" failures="1" time="0.4">
       <testcase name="A" time="0.4"><failure message="x"/></testcase>
     </testsuite></testsuites>'
write common/base/stats_test \
  '<testsuites tests="1" failures="0" errors="0" time="0.01"></testsuites>'
touch -d @1000 "$logs/common/base/stats_test/test.xml"
write trainer/broken_test '<testsuites time="1"'

# test.cache_status (TestResultData): field 3 the status, field 9 the wall
# time in ms. It wins over test.xml; an unreadable one falls back to it.
status() {  # status DIR BYTES (printf escapes)
  mkdir -p "$logs/$1"
  printf "$2" > "$logs/$1/test.cache_status"
}
# passed (2:1), PASSED (3:1), 26250 ms (9: varint 8a cd 01), a string (10).
status common/launch/launch_test '\x10\x01\x18\x01\x48\x8a\xcd\x01\x52\x03abc'
# TIMEOUT (3:3) after 300000 ms (varint e0 a7 12), no test.xml.
status trainer/timeout_test '\x18\x03\x48\xe0\xa7\x12'
# Truncated: test.xml's 13 s stand.
status trainer/trainer_cli_test '\x48\xff'

actual="$(/usr/bin/python3 "$script" --since 2000 "$logs")"
expected="Test times, slowest first (7 targets, 344.7 s in all, from $logs):
  300.0 s //trainer:timeout_test TIMEOUT
   26.2 s //common/launch:launch_test
   13.0 s //trainer:trainer_cli_test
    5.0 s //comm_bench:sharded_test
    0.4 s //tp_check:mlp_test FAILED
    0.0 s //common/base:stats_test (cached)
     ?   //trainer:broken_test FAILED"
if [[ "$actual" != "$expected" ]]; then
  echo "FAIL: got"; echo "$actual"; echo "expected"; echo "$expected"
  exit 1
fi

# --most cuts the table; a missing tree is not an error (nothing ran).
[[ "$(/usr/bin/python3 "$script" --most 1 "$logs" | wc -l)" == 2 ]] \
  || { echo "FAIL: --most 1"; exit 1; }
/usr/bin/python3 "$script" "$TEST_TMPDIR/none" | grep -q "no test logs" \
  || { echo "FAIL: missing tree"; exit 1; }
# Bad arguments: exit 2 (argparse).
if /usr/bin/python3 "$script" --most x "$logs" 2>/dev/null; then
  echo "FAIL: bad --most accepted"; exit 1
fi
echo PASS
