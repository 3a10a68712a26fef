"""Every figure the README, docs/ and the learning guide quote, and how to make it.

A figure is one command, run from the checkout's root by
`./bazelw run //tools/figures -- --only=NAME`, that writes
docs/figures/NAME.md + NAME.json (tools/figures/figures.py stamps them).

name      the file name under docs/figures/
title     one line: what the figure shows
command   a bash command line run in the checkout; {out} is a fresh scratch
          folder the command may write into
markdown  (optional) the Markdown table the command writes, relative to {out};
          otherwise the figure shows the command's output
json      (optional) the JSON result the command writes, relative to {out};
          embedded in NAME.json
inputs    git pathspecs of the sources whose behaviour the figure measures
          (folders, files, ":(exclude)..." to cut a folder's part out). A
          figure is stale once any of them changes after the commit it was
          measured at (//tools/figures:figures_check_test). Keep them
          precise: a file listed here that does not change the numbers only
          makes the figure go stale for nothing; one left out lets it rot.
cheap     True for a figure that takes seconds (CI runs it end to end).
minutes   the expected duration on a quiet 2-core machine, from the last
          measured run or, where none was timed, the run count times a run's
          time (`--list` shows it and the total; the quiet window's wait
          comes on top)
counted   True for a figure whose quoted numbers are all counts (bytes,
          allocator peaks, errors, bits) that the load cannot move: the
          harness runs it without waiting for a quiet window (the stamp still
          records the load), so it never takes a quiet window's time
"""

# The code every training figure runs: the trainer (model, data, runtime,
# strategies), the shared layers, GEMM backend, allocator and collective
# layer it calls. Not its checkpoint code (no save in these runs), the other
# benchmarks under trainer/bench, the test-only helpers under trainer/tests,
# nor the CUDA trainer (a separate binary the CPU trainer only hands
# --device=cuda to; these figures run on the CPU).
TRAINING = [
    "trainer/",
    ":(exclude)trainer/bench/",
    ":(exclude)trainer/checkpoint/",
    ":(exclude)trainer/tests/",
    ":(exclude)trainer/cuda/",
    ":(exclude)trainer/testdata/",
    ":(exclude)trainer/*_test.cc",
    ":(exclude)trainer/*_test.sh",
    "common/nn/",
    "common/gemm/",
    "common/libtorch/",
    "common/collective/",
    ":(exclude)common/collective/*_test.cc",
]

# The PyTorch peer of the training benchmarks.
PYTORCH_PEER = ["trainer/bench/ddp_peer.py"]

FIGURES = [
    {
        "name": "tp_check",
        "title": "tensor and sequence parallelism at 4 ranks against the unsharded layers: "
                 "errors and collective bytes against the closed forms",
        "command": "./bazelw run //tp_check -- --nproc=4 --out={out}/tp_check.json --markdown",
        "markdown": "tp_check.md",
        "json": "tp_check.json",
        "inputs": ["tp_check/", ":(exclude)tp_check/*_test.cc", "common/nn/"],
        "cheap": True,
        "minutes": 0.1,
        "counted": True,
    },
    {
        "name": "trainer_default",
        "title": "the default job (`./bazelw run //trainer`): losses, tokens/s, MFU, memory",
        "command": "./bazelw run //trainer -- --out={out}/trainer_default.json",
        "markdown": "trainer_default.md",
        "json": "trainer_default.json",
        "inputs": TRAINING + ["testdata/gnu_licenses.bin"],
        "minutes": 0.5,
    },
    {
        "name": "trainer_vs_pytorch",
        "title": "DDP and ZeRO-1 against PyTorch 1.13's DDP and ZeroRedundancyOptimizer: "
                 "tokens/s, CPU per step, memory",
        "command": "/usr/bin/python3 trainer/bench/ddp_bench.py --rounds=3 --strategies=ddp,zero1 "
                   "--out={out}/trainer_vs_pytorch.md",
        "markdown": "trainer_vs_pytorch.md",
        "inputs": TRAINING + PYTORCH_PEER + ["trainer/bench/ddp_bench.py"],
        "minutes": 25,
    },
    {
        "name": "step_profile",
        "title": "where a step's CPU goes (perf, ours vs PyTorch, tiny fp32, 2 ranks)",
        "command": "/usr/bin/python3 trainer/bench/step_profile.py --model=tiny --precision=fp32 --world=2",
        "inputs": TRAINING + PYTORCH_PEER + ["trainer/bench/step_profile.py"],
        "minutes": 5,
    },
    {
        "name": "memory_per_strategy",
        "title": "what the largest rank held at its peak, per strategy at 2 and 4 ranks, "
                 "against the closed forms",
        "command": "/usr/bin/python3 trainer/bench/memory_breakdown.py --worlds=2,4 "
                   "--strategies=ddp,zero1,zero2,fsdp",
        "inputs": TRAINING + ["trainer/bench/memory_breakdown.py"],
        "minutes": 3,
        "counted": True,
    },
    {
        "name": "strategy_matrix",
        "title": "ddp, zero1, zero2, fsdp (and tp=2 under ddp and fsdp) at 1, 2 and 4 ranks "
                 "against PyTorch's peers: tokens/s, peak memory, bytes against the closed forms",
        # The four strategies the docs quote, and tp=2 under ddp and fsdp, on
        # the default GEMM (oneDNN):
        # fsdp_no_reshard and the BLAS rows (trainer_vs_pytorch has the
        # same-kernel comparison) would double the hour it takes.
        "command": "./bazelw run --config=bench //trainer/bench:strategy_matrix -- --rounds=3 "
                   "--strategies=ddp,zero1,zero2,fsdp,tp2_ddp,tp2_fsdp --gemms=onednn "
                   "--out={out}/strategy_matrix.json",
        "markdown": "strategy_matrix.md",
        "json": "strategy_matrix.json",
        "inputs": TRAINING + PYTORCH_PEER + ["trainer/bench/strategy_matrix.cc",
                                             "trainer/bench/strategy_matrix_main.cc"],
        "minutes": 25,
    },
    {
        "name": "exact_cost",
        "title": "exact mode's cost against float mode per strategy (tiny fp32, 2 ranks)",
        # The default GEMM only (the BLAS rows would double it; no doc quotes them).
        "command": "./bazelw run --config=bench //trainer/bench:strategy_matrix -- --cells=tiny:fp32 "
                   "--worlds=2 --strategies=ddp,ddp_exact,zero1,zero1_exact,zero2,zero2_exact,"
                   "fsdp,fsdp_exact --nopeers --gemms=onednn --rounds=3 --out={out}/exact_cost.json",
        "markdown": "exact_cost.md",
        "json": "exact_cost.json",
        "inputs": TRAINING + ["trainer/bench/strategy_matrix.cc",
                              "trainer/bench/strategy_matrix_main.cc"],
        "minutes": 5,
    },
    {
        "name": "comm_vs_torch",
        "title": "every collective against torch.distributed on the same Gloo and the "
                 "loopback ceiling, 2 and 3 ranks",
        "command": "./bazelw run --config=bench //comm_bench:compare_with_torch -- --rounds=3 "
                   "--markdown={out}/comm_vs_torch.md",
        "markdown": "comm_vs_torch.md",
        "inputs": ["comm_bench/", ":(exclude)comm_bench/*_test.cc", ":(exclude)comm_bench/nccl_*",
                   "common/collective/", ":(exclude)common/collective/*_test.cc",
                   "common/launch/", ":(exclude)common/launch/*_test.*"],
        "minutes": 30,
    },
    {
        "name": "checkpoint_save_load",
        "title": "checkpoint save and load against the disk's ceiling (O_DIRECT write + fsync, "
                 "SHA-256) and PyTorch's torch.save/torch.load",
        "command": "./bazelw run --config=bench //trainer/checkpoint:checkpoint_benchmark -- --rounds=7",
        "inputs": ["trainer/checkpoint/", ":(exclude)trainer/checkpoint/*_test.cc",
                   "common/results/atomic_file.cc", "common/base/sha256.cc",
                   "common/base/disk_ceiling.cc"],
        "minutes": 10,
    },
    {
        "name": "async_checkpoint",
        "title": "synchronous against asynchronous checkpoints: tokens/s and time blocked per save",
        "command": "./bazelw run --config=bench //trainer/checkpoint:async_checkpoint_benchmark -- --rounds=3",
        "inputs": TRAINING + ["trainer/checkpoint/", ":(exclude)trainer/checkpoint/*_test.cc",
                              "common/results/atomic_file.cc", "common/base/sha256.cc"],
        "minutes": 5,
    },
    {
        "name": "moe_comm",
        "title": "MoE dispatch and combine under skewed routing, 2 ranks: times, busbw, drops",
        "command": "./bazelw run //moe_comm -- --nproc=2 --out={out}/moe_comm.json",
        "markdown": "moe_comm.md",
        "json": "moe_comm.json",
        "inputs": ["moe_comm/", ":(exclude)moe_comm/*_test.cc", "common/nn/",
                   "common/collective/", ":(exclude)common/collective/*_test.cc"],
        "minutes": 1,
    },
    {
        "name": "tracing_cost",
        "title": "what tracing costs: per span site and collective, and per step of a training run",
        "command": "./bazelw run --config=bench //common/collective:trace_overhead_benchmark && "
                   "/usr/bin/python3 trainer/bench/trace_overhead.py --out={out}/tracing_cost.md",
        "inputs": ["common/trace/", ":(exclude)common/trace/*_test.cc",
                   "common/collective/trace_collectives.cc", "common/collective/collective_log.cc",
                   "common/collective/trace_overhead_benchmark.cc",
                   "trainer/bench/trace_overhead.py"],
        "minutes": 8,
    },
    {
        "name": "fault_matrix",
        "title": "every fault kind at every phase, per strategy: detected by what, how fast, "
                 "restarted exactly",
        "command": "./bazelw run --config=bench //trainer/bench:fault_matrix -- "
                   "--out={out}/fault_matrix.json",
        "markdown": "fault_matrix.md",
        "json": "fault_matrix.json",
        "inputs": TRAINING + ["trainer/checkpoint/", ":(exclude)trainer/checkpoint/*_test.cc",
                              "common/faults/", "common/launch/",
                              ":(exclude)common/launch/*_test.*",
                              "trainer/bench/fault_matrix.cc",
                              "trainer/bench/fault_matrix_main.cc"],
        "minutes": 4,
    },
    {
        "name": "grad_accumulation",
        "title": "ddp and fsdp with 4 micro-batches, syncing after the last or after every one: "
                 "bytes per step, memory at the peak (the guide's day 2, Q3)",
        "command": "for run in ddp:last ddp:every fsdp:every fsdp:last; do s=${run%:*}; g=${run#*:}; "
                   "./bazelw run //trainer -- --nproc=2 --strategy=$s --grad_accum=4 --batch_size=2 "
                   "--grad_sync=$g --steps=2 --out={out}/grad_accumulation_${s}_$g.json || exit 1; "
                   "(echo \"## $s --grad_sync=$g\"; echo; cat {out}/grad_accumulation_${s}_$g.md; echo) "
                   ">> {out}/grad_accumulation.md; done",
        "markdown": "grad_accumulation.md",
        "inputs": TRAINING + ["testdata/gnu_licenses.bin"],
        "minutes": 1,
        "counted": True,
    },
    {
        "name": "overlap_and_straggler",
        "title": "DDP's overlap ratio with and without overlap, and a 50 ms straggler found by "
                 "profiler_agg (the guide's day 5, Q9 and Q10)",
        "command": "for run in overlap:--ddp_overlap=true no_overlap:--ddp_overlap=false "
                   "slow:--fault=slow:rank=1,ms=50; do name=${run%%:*}; flag=${run#*:}; "
                   "./bazelw run //trainer -- --nproc=2 --steps=20 --bucket_cap_mb=1 $flag "
                   "--trace_dir={out}/$name --out={out}/train_$name.json || exit 1; "
                   "./bazelw run //profiler_agg -- {out}/$name "
                   "--out={out}/overlap_and_straggler_$name.json || exit 1; "
                   "(echo \"## $flag\"; echo; cat {out}/overlap_and_straggler_$name.md; echo) "
                   ">> {out}/overlap_and_straggler.md; done",
        "markdown": "overlap_and_straggler.md",
        "inputs": TRAINING + ["testdata/gnu_licenses.bin", "common/trace/",
                              ":(exclude)common/trace/*_test.cc", "common/faults/",
                              "profiler_agg/", ":(exclude)profiler_agg/*_test.cc"],
        "minutes": 2,
    },
    {
        "name": "allreduce_sweep",
        "title": "all-reduce on 2 ranks over the default transport, from 1 KiB to 16 MiB: time and "
                 "busbw, where latency gives way to bandwidth (the guide's Q11)",
        "command": "./bazelw run //comm_bench -- --nproc=2 --ops=all_reduce --minbytes=1K "
                   "--maxbytes=16M --stepfactor=4 --iters=20 --warmup_iters=5 "
                   "--out={out}/allreduce_sweep.json --markdown={out}/allreduce_sweep.md",
        "markdown": "allreduce_sweep.md",
        "json": "allreduce_sweep.json",
        "inputs": ["comm_bench/", ":(exclude)comm_bench/*_test.cc", ":(exclude)comm_bench/nccl_*",
                   "common/collective/", ":(exclude)common/collective/*_test.cc",
                   "common/launch/", ":(exclude)common/launch/*_test.*"],
        "minutes": 1,
    },
]


def by_name():
    return {figure["name"]: figure for figure in FIGURES}
