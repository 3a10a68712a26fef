#!/usr/bin/env bash
# The trainer, comm_bench and doctor started by a real Slurm (Debian's
# slurm-wlm 22.05): this script configures munged, slurmctld and slurmd on
# 127.0.0.1 in a temporary directory (as root), then runs, as
# docs/launch.md shows,
#   srun --ntasks=2 trainer ...      srun --ntasks=2 comm_bench ...
# Each task is one rank that reads SLURM_PROCID / SLURM_NTASKS and meets on
# the first host of SLURM_STEP_NODELIST at a port derived from the job id;
# rank 0's result must name a world of 2, and doctor must report "slurm".
# When the daemons cannot start the test fails (it never skips) and says why.
set -euo pipefail

trainer="$(pwd)/trainer/trainer"
comm_bench="$(pwd)/comm_bench/comm_bench"
doctor="$(pwd)/doctor/doctor"
# Short and under /tmp: munged's socket path must fit in 108 bytes, which
# Bazel's test directories do not.
work="$(mktemp -d /tmp/mtb-slurm.XXXXXX)"
out="$work/out"
mkdir -p "$out" "$work/state" "$work/spool" "$work/munge"
fail() { echo "FAIL: $*" >&2; exit 1; }

[[ "$(id -u)" == 0 ]] || fail "slurmd must run as root to start tasks; this test runs as $(id -un)"
for tool in munged slurmctld slurmd srun sinfo; do
  command -v "$tool" > /dev/null ||
    fail "$tool is not installed (./bazelw installs slurm-wlm, slurm-client and munge)"
done

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

stop_daemons() {
  local pid_file
  for pid_file in "$work/slurmd.pid" "$work/slurmctld.pid" "$work/munge/munged.pid"; do
    [[ -s "$pid_file" ]] && kill "$(cat "$pid_file")" 2> /dev/null || true
  done
  # The daemons' files are ours alone; the results are kept for the log.
  cp -r "$out" "${TEST_UNDECLARED_OUTPUTS_DIR:-$work}/" 2> /dev/null || true
  sleep 0.5
  rm -rf "$work"
}
trap stop_daemons EXIT

# A daemon's log, for the failure message.
show_logs() {
  local log
  for log in "$work/munge/munged.log" "$work/slurmctld.log" "$work/slurmd.log"; do
    [[ -f "$log" ]] && { echo "--- $log" >&2; tail -n 20 "$log" >&2; }
  done
  return 0
}

# munge: a key of our own and a socket in $work (the system's is not running).
dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 status=none
chmod 0400 "$work/munge/munge.key"
chmod 0711 "$work/munge"
munged --force --socket="$work/munge/munge.socket" --key-file="$work/munge/munge.key" \
  --pid-file="$work/munge/munged.pid" --log-file="$work/munge/munged.log" \
  --seed-file="$work/munge/seed" ||
  { show_logs; fail "munged did not start"; }

node="$(hostname -s)"
cat > "$work/slurm.conf" << CONF
ClusterName=mtbtest
SlurmctldHost=$node(127.0.0.1)
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=10 State=UP OverSubscribe=FORCE
CONF
export SLURM_CONF="$work/slurm.conf"
slurmctld -f "$SLURM_CONF" || { show_logs; fail "slurmctld did not start"; }
slurmd -f "$SLURM_CONF" || { show_logs; fail "slurmd did not start"; }
for _ in $(seq 1 60); do
  [[ "$(sinfo -h -o %T 2> /dev/null)" == idle ]] && break
  sleep 0.5
done
[[ "$(sinfo -h -o %T 2> /dev/null)" == idle ]] ||
  { show_logs; fail "node $node is not idle after 30s: $(sinfo -h -o '%T %E' 2>&1)"; }

# srun LOG ARGS...: the docs' command; output in $out/LOG.log.
srun_two() {
  local log="$1"
  shift
  srun --ntasks=2 --time=2 --chdir="$work" "$@" > "$out/$log.log" 2>&1 ||
    { cat "$out/$log.log" >&2; show_logs; fail "srun $log failed"; }
  ! grep -q "launch: node " "$out/$log.log" || fail "$log: an srun task launched ranks of its own"
}

srun_two trainer "$trainer" --vocab_size=64 --d_model=32 --n_layers=1 --n_heads=4 \
  --seq_len=16 --batch_size=4 --steps=2 --intra_op_threads=1 --data=synthetic \
  --nomarkdown --out="$out/trainer.json"
grep -q '"world_size": 2' "$out/trainer.json" || fail "trainer: not 2 ranks"
grep -q 'step 2/2 | loss' "$out/trainer.log" || fail "trainer: no progress line"

srun_two comm_bench "$comm_bench" --ops=all_reduce,all_gather --minbytes=1K \
  --maxbytes=4K --iters=2 --warmup_iters=1 --out="$out/comm_bench.json"
grep -q '"world_size": 2' "$out/comm_bench.json" || fail "comm_bench: not 2 ranks"
grep -q '"verdict": "pass' "$out/comm_bench.json" ||
  { cat "$out/comm_bench.json" >&2; fail "comm_bench: not PASS"; }

srun_two doctor "$doctor" --disk_check_mb=1 --checkpoint_dir="$work" --out="$out/doctor.json"
grep -q 'slurm (SLURM_PROCID, SLURM_NTASKS: srun): rank 0 of 2' "$out/doctor.json" ||
  { cat "$out/doctor.log" >&2; fail "doctor: no slurm launcher check for rank 0 of 2"; }
echo "PASS"
