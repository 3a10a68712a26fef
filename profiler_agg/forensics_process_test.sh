#!/usr/bin/env bash
# `profiler_agg forensics` on real hangs of variable-size collectives and of
# a sharded trainer, with the default heartbeat (its floor shrunk so each run
# ends within seconds): each run's flight recorder dumps must name the hung
# rank ("lagging"), never call the ranks' legitimately different all_to_allv
# sizes a divergence.
#  - moe_comm: rank 1 hangs as configuration 2's combine starts (its peers
#    wait in an all_to_allv whose per-rank sizes differ: uniform then zipf);
#  - comm_bench all_to_allv --imbalance=zipf:1: rank 1 hangs at sweep point 2;
#  - trainer --strategy=zero2 on 3 ranks: rank 2 hangs in backward at step 2
#    while the others wait in a gradient reduce-scatter (reduce_scatter_v:
#    uneven shards).
set -euo pipefail
agg="$(pwd)/profiler_agg/profiler_agg"
out="$TEST_TMPDIR/out"
mkdir -p "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }
fast=(--test_only_heartbeat_floor=1s --kill_grace=2s)

# run NAME CMD...: the command must exit 1 (the heartbeat's teardown).
run() {
  local name="$1" code=0
  shift
  "$@" > "$out/$name.out" 2> "$out/$name.err" || code=$?
  [[ "$code" == 1 ]] || { cat "$out/$name.err" >&2; fail "$name: exit $code, want 1"; }
  grep -q "^launch: heartbeat: no progress for " "$out/$name.err" ||
    { cat "$out/$name.err" >&2; fail "$name: the heartbeat did not end the hang"; }
}

# verdict NAME RANK OP: forensics of NAME's dumps names RANK lagging at OP.
verdict() {
  local name="$1" rank="$2" op="$3"
  "$agg" forensics "$out/$name" --out="$out/$name.forensics.json" > "$out/$name.forensics.md" ||
    fail "$name: forensics exited $?"
  /usr/bin/python3 - "$out/$name.forensics.json" "$rank" "$op" <<'PY' ||
import json, sys
group = json.load(open(sys.argv[1]))["groups"][0]
assert group["verdict"] == "lagging", (group["verdict"], group["finding"])
assert group["diverged_rank"] == int(sys.argv[2]), (group["diverged_rank"], group["finding"])
assert group["diverged_op"] == sys.argv[3], (group["diverged_op"], group["finding"])
PY
    { cat "$out/$name.forensics.md" >&2; fail "$name: forensics"; }
  grep -qF "The group waited for rank $rank at $op #" "$out/$name.forensics.md" ||
    fail "$name: the report does not name rank $rank"
}

run moe "$(pwd)/moe_comm/moe_comm" --nproc=2 --tokens_per_rank=32 --hidden=16 --iters=3 \
  --warmup_iters=1 --skew=uniform,zipf:1 --fault=hang:rank=1,step=2,phase=combine \
  "${fast[@]}" --log_dir="$out/moe" --out="$out/moe/moe.json"
verdict moe 1 all_to_allv

run comm "$(pwd)/comm_bench/comm_bench" --nproc=2 --ops=all_to_allv --imbalance=zipf:1 \
  --minbytes=1K --maxbytes=4K --stepfactor=4 --iters=2 --warmup_iters=0 \
  --fault=hang:rank=1,step=2 "${fast[@]}" --log_dir="$out/comm" --out="$out/comm/cb.json"
# Rank 0 waits in the point's first barrier, after all_to_allvs of unequal sizes.
verdict comm 1 barrier

run zero2 "$(pwd)/trainer/trainer" --nproc=3 --strategy=zero2 --vocab_size=64 --d_model=32 \
  --n_layers=1 --n_heads=4 --seq_len=16 --batch_size=6 --steps=3 --intra_op_threads=1 \
  --data=synthetic --peak_flops=1e10 --nomarkdown --fault=hang:rank=2,step=2,phase=backward \
  "${fast[@]}" --log_dir="$out/zero2" --out="$out/zero2/t.json"
grep -qE "^launch: heartbeat: .*: the group waits for rank 2" "$out/zero2.err" ||
  { cat "$out/zero2.err" >&2; fail "zero2: the launcher did not name rank 2"; }
verdict zero2 2 reduce_scatter_v
echo PASS
