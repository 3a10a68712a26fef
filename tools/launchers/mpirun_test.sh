#!/usr/bin/env bash
# The trainer, comm_bench and doctor started by Open MPI's mpirun (Debian's
# openmpi-bin 4.1), as docs/launch.md shows:
#   mpirun --allow-run-as-root -np 2 trainer ...
# Each process is one rank that reads OMPI_COMM_WORLD_RANK / _SIZE and, all
# on this host, meets on 127.0.0.1 at a port derived from Open MPI's job id;
# rank 0's result must name a world of 2, and doctor must report "openmpi".
set -euo pipefail

trainer="$(pwd)/trainer/trainer"
comm_bench="$(pwd)/comm_bench/comm_bench"
doctor="$(pwd)/doctor/doctor"
work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/mpirun.XXXXXX")"
out="$work/out"
mkdir -p "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v mpirun > /dev/null || fail "mpirun is not installed (./bazelw installs openmpi-bin)"
# Open MPI's session directory.
export TMPDIR="$work"

mpirun_two() {
  local log="$1"
  shift
  mpirun --allow-run-as-root --oversubscribe -np 2 "$@" > "$out/$log.log" 2>&1 ||
    { cat "$out/$log.log" >&2; fail "mpirun $log failed"; }
  ! grep -q "launch: node " "$out/$log.log" || fail "$log: an mpirun rank launched ranks of its own"
}

mpirun_two trainer "$trainer" --vocab_size=64 --d_model=32 --n_layers=1 --n_heads=4 \
  --seq_len=16 --batch_size=4 --steps=2 --intra_op_threads=1 --data=synthetic \
  --nomarkdown --out="$out/trainer.json"
grep -q '"world_size": 2' "$out/trainer.json" || fail "trainer: not 2 ranks"
grep -q 'step 2/2 | loss' "$out/trainer.log" || fail "trainer: no progress line"

mpirun_two comm_bench "$comm_bench" --ops=all_reduce,all_gather --minbytes=1K \
  --maxbytes=4K --iters=2 --warmup_iters=1 --out="$out/comm_bench.json"
grep -q '"world_size": 2' "$out/comm_bench.json" || fail "comm_bench: not 2 ranks"
grep -q '"verdict": "pass' "$out/comm_bench.json" ||
  { cat "$out/comm_bench.json" >&2; fail "comm_bench: not PASS"; }

mpirun_two doctor "$doctor" --disk_check_mb=1 --checkpoint_dir="$work" --out="$out/doctor.json"
grep -q 'openmpi (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE: mpirun): rank 0 of 2' \
  "$out/doctor.json" || { cat "$out/doctor.log" >&2; fail "doctor: no openmpi launcher check"; }
echo "PASS"
