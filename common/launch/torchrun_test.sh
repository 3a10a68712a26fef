#!/usr/bin/env bash
# The trainer and comm_bench started by the real torchrun (Debian's PyTorch
# 1.13, /usr/bin/python3 -m torch.distributed.run), as docs/tour.md shows: each
# process is one rank (a worker, no launcher of ours), rank 0's result names a
# world of 2. torchrun 1.13 under Python 3.11 crashes in its own log-redirect
# parsing with the default --redirects/--tee (Python 3.11 changed IntFlag
# iteration; 0 and 3 crash too), so the command carries --redirects=1
# --tee=1: stdout goes to torchrun's log files and is also teed to the console.
set -euo pipefail

trainer="$(pwd)/trainer/trainer"
comm_bench="$(pwd)/comm_bench/comm_bench"
out="$TEST_TMPDIR/out"
mkdir -p "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# torchrun ARGS...: the command docs/tour.md gives, with a free port and logs in $out.
torchrun() {
  local log="$1"
  shift
  /usr/bin/python3 -m torch.distributed.run --redirects=1 --tee=1 \
    --log_dir="$out/torchrun_logs_$log" --nproc_per_node=2 \
    --master_addr=127.0.0.1 --master_port="$(free_port)" --no_python "$@" \
    > "$out/$log.log" 2>&1 || { cat "$out/$log.log" >&2; fail "torchrun $log failed"; }
  ! grep -q "launch: node " "$out/$log.log" || fail "$log: a torchrun worker launched ranks of its own"
}

torchrun trainer "$trainer" --vocab_size=64 --d_model=32 --n_layers=1 --n_heads=4 \
  --seq_len=16 --batch_size=4 --steps=2 --intra_op_threads=1 --data=synthetic \
  --nomarkdown --out="$out/trainer.json"
grep -q '"world_size": 2' "$out/trainer.json" || fail "trainer: not 2 ranks"
grep -q 'step 2/2 | loss' "$out/trainer.log" || fail "trainer: no progress line"

torchrun comm_bench "$comm_bench" --ops=all_reduce,all_gather --minbytes=1K \
  --maxbytes=4K --iters=2 --warmup_iters=1 --out="$out/comm_bench.json"
grep -q '"world_size": 2' "$out/comm_bench.json" || fail "comm_bench: not 2 ranks"
grep -q '"verdict": "pass' "$out/comm_bench.json" || { cat "$out/comm_bench.json" >&2; fail "comm_bench: not PASS"; }
# A NaN loss is a deterministic failure: every rank exits 3, and torchrun
# reports that code for the ranks (an outer scheduler reads it there).
set +e
/usr/bin/python3 -m torch.distributed.run --redirects=1 --tee=1 \
  --log_dir="$out/torchrun_logs_nan" --nproc_per_node=2 --master_addr=127.0.0.1 \
  --master_port="$(free_port)" --no_python "$trainer" --vocab_size=64 --d_model=32 \
  --n_layers=1 --n_heads=4 --seq_len=16 --batch_size=4 --steps=3 --intra_op_threads=1 \
  --data=synthetic --nomarkdown --fault=nan:rank=0,step=2 --out="$out/nan.json" \
  > "$out/nan.log" 2>&1
code=$?
set -e
[[ $code != 0 ]] || { cat "$out/nan.log" >&2; fail "torchrun exited 0 after a NaN"; }
grep -qE "exitcode +: 3" "$out/nan.log" || { cat "$out/nan.log" >&2; fail "torchrun did not see exit code 3"; }
echo "PASS"
