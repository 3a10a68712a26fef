#!/usr/bin/env bash
# doctor end to end: usage errors exit 2 before anything runs; this host with
# one rank and with a 2-rank group passes (warnings allowed), writing a JSON
# with the rendezvous checks; a node whose master is unreachable fails that
# check within --connect_timeout, naming the address, exit 1, no rank started.
set -euo pipefail

doctor="$(pwd)/doctor/doctor"
out="$TEST_TMPDIR/out"
mkdir -p "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }

expect() {
  local code="$1" substring="$2"
  shift 2
  local actual=0
  "$doctor" "$@" > "$out/stdout" 2> "$out/stderr" || actual=$?
  [[ "$actual" == "$code" ]] || { cat "$out/stdout" "$out/stderr" >&2; fail "exit $actual, want $code: $*"; }
  grep -qF -- "$substring" "$out/stdout" "$out/stderr" || { cat "$out/stdout" "$out/stderr" >&2; fail "output lacks '$substring': $*"; }
}

expect 2 "unknown flag --no_such_flag" --no_such_flag=1
expect 2 "--disk_check_mb=0 must be in [1, 64]" --disk_check_mb=0
expect 2 "--disk_check_mb=65 must be in [1, 64]" --disk_check_mb=65
expect 2 "unexpected argument 'stray'" stray
expect 2 "--expected_world_size=-1 must be >= 0" --expected_world_size=-1
expect 2 "--connect_timeout" --connect_timeout=0s

common=(--checkpoint_dir="$out/ckpt" --disk_check_mb=4)
expect 0 "verdict: pass" "${common[@]}" --out="$out/one.json"
grep -q '"name": "BLAS"' "$out/one.json" || fail "no BLAS check in the JSON"
grep -q '"name": "matmul bf16"' "$out/one.json" || fail "no bf16 matmul check"
grep -q '"tool": "doctor"' "$out/one.json" || fail "no provenance"

expect 0 "| rendezvous | all_to_allv | pass |" "${common[@]}" --nproc=2 --expected_world_size=2 --out="$out/two.json"
grep -q '"name": "bandwidth"' "$out/two.json" || fail "no bandwidth check"
grep -q '"verdict": "pass"' "$out/two.json" || fail "2-rank verdict not pass"

grep -q '"value": "collectives over shm (--transport=auto)"' "$out/two.json" ||
  fail "one host, --transport=auto: not shared memory"
expect 0 "collectives over tcp (--transport=tcp)" "${common[@]}" --nproc=2 --transport=tcp \
  --out="$out/tcp.json"
expect 2 "transport" --transport=udp

expect 1 "| rendezvous | world size | FAIL |" "${common[@]}" --nproc=2 --expected_world_size=3 --out="$out/wrong.json"
# Every failing rank says why, not only the one that prints the table.
grep -qF "[rank 1] doctor: rank 1: rendezvous world size failed: " "$out/stderr" ||
  { cat "$out/stderr" >&2; fail "rank 1 failed without saying why"; }

# An address nobody resolves: one line at once, exit 2, no rank started.
expect 2 "--master_addr=no-such-host.invalid does not resolve" "${common[@]}" --nnodes=2 \
  --node_rank=0 --master_addr=no-such-host.invalid --connect_timeout=2s --out="$out/nx.json"
[[ "$(wc -l < "$out/stderr")" == 1 ]] || { cat "$out/stderr" >&2; fail "not one line"; }

port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
expect 1 "127.0.0.1:$port not reachable within 2s" "${common[@]}" --nnodes=2 --node_rank=1 --nproc=1 \
  --master_addr=127.0.0.1 --master_port="$port" --connect_timeout=2s --out="$out/master.json"
! grep -q "launch: node" "$out/stderr" || fail "ranks were started with an unreachable master"
grep -q '"verdict": "fail: master"' "$out/master.json" || fail "master verdict"
# Node 0 hosting the store at an address it cannot reach (TEST-NET-1) gives
# up after --connect_timeout, not after a fixed 30 s.
start=$SECONDS
expect 1 "timed out after 2s" "${common[@]}" --nnodes=2 --node_rank=0 --nproc=1 \
  --master_addr=192.0.2.1 --connect_timeout=2s --out="$out/host.json"
(( SECONDS - start < 20 )) || fail "node 0 waited $((SECONDS - start)) s with --connect_timeout=2s"
echo "PASS"
