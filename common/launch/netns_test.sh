#!/usr/bin/env bash
# Two hosts for real: two network namespaces joined by a veth pair, one
# launcher in each with --nnodes=2. Node 1's ranks can reach node 0 only over
# the veth link, so their rendezvous (node 0's TCPStore at --master_addr) and
# the all-reduce (//common/collective over Gloo, bound to the namespace's interface
# through GLOO_SOCKET_IFNAME) really cross "hosts".
#
# With --max_restarts=1 rank 3 (node 1) fails the first attempt: node 1's
# launcher tells node 0's through the store, node 0's launcher tears its
# ranks down and decides the restart, node 1 follows, and the second attempt
# all-reduces across both namespaces.
#
# Must run as root or under CI=true: there, failing to create the namespaces
# fails the test. Elsewhere it says why it did not run and passes (Bazel shows
# a skipped test as PASSED either way, hence the rule).
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"

worker="$PWD/common/launch/testdata/launch_test_worker"
out_dir="${TEST_TMPDIR:-$(mktemp -d)}"
must_run=false
if [[ "$(id -u)" == 0 || "${CI:-}" == "true" ]]; then must_run=true; fi

not_possible() {
  if $must_run; then
    echo "netns_test: FAILED: $1 (root or CI=true: this test must run)" >&2
    exit 1
  fi
  echo "netns_test: not run: $1 (runs as root or with CI=true)"
  exit 0
}

command -v ip >/dev/null || not_possible "iproute2's ip is not installed"

# Names unique per run (interface names have at most 15 characters).
tag="mtb$$"
ns0="${tag}n0"
ns1="${tag}n1"
veth0="${tag}a"
veth1="${tag}b"
addr0=10.77.0.1
addr1=10.77.0.2
pids=()

cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  ip netns del "$ns0" 2>/dev/null || true
  ip netns del "$ns1" 2>/dev/null || true
  ip link del "$veth0" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! error=$(ip netns add "$ns0" 2>&1); then
  not_possible "cannot create a network namespace: ip netns add: $error"
fi
if ! error=$({ ip netns add "$ns1" &&
  ip link add "$veth0" type veth peer name "$veth1" &&
  ip link set "$veth0" netns "$ns0" &&
  ip link set "$veth1" netns "$ns1" &&
  ip -n "$ns0" addr add "$addr0/24" dev "$veth0" &&
  ip -n "$ns1" addr add "$addr1/24" dev "$veth1" &&
  ip -n "$ns0" link set lo up && ip -n "$ns0" link set "$veth0" up &&
  ip -n "$ns1" link set lo up && ip -n "$ns1" link set "$veth1" up; } 2>&1); then
  not_possible "cannot join the namespaces with a veth pair: $error"
fi

# Liveness bound only: the launch takes seconds.
launch() {  # namespace interface node_rank
  timeout 300 ip netns exec "$1" env GLOO_SOCKET_IFNAME="$2" "$worker" \
    --nnodes=2 --node_rank="$3" --nproc=2 --master_addr="$addr0" \
    --master_port=29500 --all_reduce --connect_timeout=60s \
    --max_restarts=1 --exit_rank=3 --exit_code=5 --exit_attempts=1 \
    >"$out_dir/node$3.out" 2>"$out_dir/node$3.err"
}
# Node 1 first: its ranks wait for node 0's store to appear.
launch "$ns1" "$veth1" 1 &
pids+=($!)
launch "$ns0" "$veth0" 0 &
pids+=($!)

status=0
for node in 0 1; do
  if ! wait "${pids[$((1 - node))]}"; then
    echo "netns_test: node $node's launcher failed; its stderr:" >&2
    cat "$out_dir/node$node.err" >&2
    status=1
  fi
done
pids=()
for rank in 0 1 2 3; do
  node=$((rank / 2))
  expected="[rank $rank] all_reduce sum=6 world_size=4"
  if ! grep -qxF "$expected" "$out_dir/node$node.out"; then
    echo "netns_test: node $node's output lacks '$expected':" >&2
    cat "$out_dir/node$node.out" >&2
    status=1
  fi
done
# Each namespace is a host of its own (the host identity carries the network
# namespace), so the all-reduce ran hierarchically: shared memory within each
# namespace's two ranks, Gloo between the two leaders.
for rank in 0 1 2 3; do
  node=$((rank / 2))
  expected="[rank $rank] collective transport=shm+tcp algorithm=hierarchical("
  if ! grep -qF -- "$expected" "$out_dir/node$node.out"; then
    echo "netns_test: rank $rank did not all-reduce hierarchically (no '$expected'):" >&2
    cat "$out_dir/node$node.out" >&2
    status=1
  fi
done
if ! grep -qF "TCPStore at $addr0:29500 (hosted by node 0)" "$out_dir/node1.err"; then
  echo "netns_test: node 1 did not use node 0's store:" >&2
  cat "$out_dir/node1.err" >&2
  status=1
fi
expect_line() {  # node text
  if ! grep -qF -- "$2" "$out_dir/node$1.$3"; then
    echo "netns_test: node $1's $3 lacks '$2':" >&2
    cat "$out_dir/node$1.$3" >&2
    status=1
  fi
}
expect_line 1 ") exited with code 5" err
expect_line 0 "launch: node 1 stopped: rank 3 (pid" err
expect_line 0 "launch: restarting all 4 ranks on 2 nodes (restart 1 of 1) with --resumed" err
expect_line 1 "launch: restarting all 4 ranks on 2 nodes (restart 1 of 1) with --resumed, as node 0 decided" err
for rank in 0 1 2 3; do
  expect_line $((rank / 2)) "[rank $rank] rank $rank pid" out
  expect_line $((rank / 2)) "ready (attempt 1, resumed)" out
done
[[ $status == 0 ]] && echo "netns_test: a failure on node 1 restarted all 4 ranks on 2 namespaces; they all-reduced to 6, hierarchically (shm within, gloo between)"
exit $status
