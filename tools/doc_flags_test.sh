#!/usr/bin/env bash
# Every --flag that README.md and docs/*.md name exists in the binary it is
# written for (tools/doc_flags.py says how a flag is tied to a binary), and
# the check fails where it must: a flag no binary has, a flag given to a
# binary that lacks it, a flag before the binary that its runner lacks.
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
out="$TEST_TMPDIR/out"
mkdir -p "$out"

tools=(
  --binary trainer=trainer/trainer
  --binary make_token_file=trainer/make_token_file
  --binary golden_losses=trainer/golden_losses
  --binary comm_bench=comm_bench/comm_bench
  --binary ceiling=comm_bench/ceiling
  --binary loopback_ceiling=comm_bench/loopback_ceiling
  --binary tp_check=tp_check/tp_check
  --binary moe_comm=moe_comm/moe_comm
  --binary ckpt_tool=ckpt_tool/ckpt_tool
  --binary profiler_agg=profiler_agg/profiler_agg
  --binary report=report/report
  --binary doctor=doctor/doctor
  --binary planner=planner/planner
  --binary checkpoint_benchmark=trainer/checkpoint/checkpoint_benchmark
  --binary async_checkpoint_benchmark=trainer/checkpoint/async_checkpoint_benchmark
  --binary strategy_matrix=trainer/bench/strategy_matrix
  --binary fault_matrix=trainer/bench/fault_matrix
  --binary reduce_scatter_benchmark=common/collective/reduce_scatter_benchmark
  --script ddp_bench.py=trainer/bench/ddp_bench.py
  --script ddp_peer.py=trainer/bench/ddp_peer.py
  --script memory_breakdown.py=trainer/bench/memory_breakdown.py
  --script step_profile.py=trainer/bench/step_profile.py
  --script trace_overhead.py=trainer/bench/trace_overhead.py
  --script compare_with_torch=comm_bench/bench/compare_with_torch.py
  --script compare_with_torch.py=comm_bench/bench/compare_with_torch.py
  --script torch_peer.py=comm_bench/bench/torch_peer.py
  --source comm_bench_nccl=comm_bench/nccl_main.cc
  --source gemm_benchmark=common/gemm/gemm_benchmark.cc
  --source tp_matrix=trainer/bench/tp_matrix_main.cc
  --source kernel_check=trainer/cuda/kernel_check.cc
  --usage figures=tools/figures/figures.py
)
check() { /usr/bin/python3 tools/doc_flags.py "${tools[@]}" "$@"; }

# The documentation.
check README.md docs/*.md || fail "the docs name flags that do not exist (above)"

# The negative cases: each planted line is reported, naming the flag, the
# line and why; the control line beside them is not.
cat > "$out/planted.md" <<'MD'
Prose naming `--strategy=fsdp`, --nomarkdown and a [link](x.md#fsdp---strategyfsdp): fine.
Prose naming --no_such_flag_anywhere.
```
bazel run //ckpt_tool -- verify --steps=3
torchrun --nproc_per_node=2 --stpes=3 trainer/trainer --steps=3
bazel run --no_such_bazel_flag //trainer -- --steps=3
$ trainer --resume=latest --frobnicate
```
MD
code=0
check "$out/planted.md" > "$out/report" || code=$?
[[ "$code" == 1 ]] || { cat "$out/report" >&2; fail "planted flags: exit $code, want 1"; }
for line in \
  "planted.md:2: --no_such_flag_anywhere: not a flag of any binary or tool the docs use" \
  "planted.md:4: --steps: not a flag of ckpt_tool" \
  "planted.md:5: --stpes: not a flag of the tool that runs trainer" \
  "planted.md:6: --no_such_bazel_flag: not a flag of the tool that runs trainer" \
  "planted.md:7: --frobnicate: not a flag of trainer"; do
  grep -qF -- "$line" "$out/report" || { cat "$out/report" >&2; fail "not reported: $line"; }
done
[[ "$(wc -l < "$out/report")" == 5 ]] || { cat "$out/report" >&2; fail "more than the 5 planted lines reported"; }
echo PASS
