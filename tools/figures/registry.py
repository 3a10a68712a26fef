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
"""

# The code every training figure runs: the trainer (model, data, runtime,
# strategies), the shared layers, GEMM backend, allocator and collective
# layer it calls. Not its checkpoint code (no save in these runs) nor the
# other benchmarks under trainer/bench.
TRAINING = [
    "trainer/",
    ":(exclude)trainer/bench/",
    ":(exclude)trainer/checkpoint/",
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
    },
    {
        "name": "trainer_default",
        "title": "the default job (`./bazelw run //trainer`): losses, tokens/s, MFU, memory",
        "command": "./bazelw run //trainer -- --out={out}/trainer_default.json",
        "markdown": "trainer_default.md",
        "json": "trainer_default.json",
        "inputs": TRAINING + ["testdata/gnu_licenses.bin"],
    },
    {
        "name": "trainer_vs_pytorch",
        "title": "DDP and ZeRO-1 against PyTorch 1.13's DDP and ZeroRedundancyOptimizer: "
                 "tokens/s, CPU per step, memory",
        "command": "/usr/bin/python3 trainer/bench/ddp_bench.py --rounds=3 --strategies=ddp,zero1 "
                   "--out={out}/trainer_vs_pytorch.md",
        "markdown": "trainer_vs_pytorch.md",
        "inputs": TRAINING + PYTORCH_PEER + ["trainer/bench/ddp_bench.py"],
    },
    {
        "name": "step_profile",
        "title": "where a step's CPU goes (perf, ours vs PyTorch, tiny fp32, 2 ranks)",
        "command": "/usr/bin/python3 trainer/bench/step_profile.py --model=tiny --precision=fp32 --world=2",
        "inputs": TRAINING + PYTORCH_PEER + ["trainer/bench/step_profile.py"],
    },
    {
        "name": "memory_per_strategy",
        "title": "what the largest rank held at its peak, per strategy at 2 and 4 ranks, "
                 "against the closed forms",
        "command": "/usr/bin/python3 trainer/bench/memory_breakdown.py --worlds=2,4 "
                   "--strategies=ddp,zero1,zero2,fsdp",
        "inputs": TRAINING + ["trainer/bench/memory_breakdown.py"],
    },
    {
        "name": "strategy_matrix",
        "title": "ddp, zero1, zero2, fsdp at 1, 2 and 4 ranks against PyTorch's peers: "
                 "tokens/s, peak memory, bytes against the closed forms",
        "command": "./bazelw run --config=bench //trainer/bench:strategy_matrix -- --rounds=3 "
                   "--out={out}/strategy_matrix.json",
        "markdown": "strategy_matrix.md",
        "json": "strategy_matrix.json",
        "inputs": TRAINING + PYTORCH_PEER + ["trainer/bench/strategy_matrix.cc",
                                             "trainer/bench/strategy_matrix_main.cc"],
    },
    {
        "name": "exact_cost",
        "title": "exact mode's cost against float mode per strategy (tiny fp32, 2 ranks)",
        "command": "./bazelw run --config=bench //trainer/bench:strategy_matrix -- --cells=tiny:fp32 "
                   "--worlds=2 --strategies=ddp,ddp_exact,zero1,zero1_exact,zero2,zero2_exact,"
                   "fsdp,fsdp_exact --nopeers --rounds=3 --out={out}/exact_cost.json",
        "markdown": "exact_cost.md",
        "json": "exact_cost.json",
        "inputs": TRAINING + ["trainer/bench/strategy_matrix.cc",
                              "trainer/bench/strategy_matrix_main.cc"],
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
    },
    {
        "name": "checkpoint_save_load",
        "title": "checkpoint save and load against the disk's ceiling (O_DIRECT write + fsync, "
                 "SHA-256) and PyTorch's torch.save/torch.load",
        "command": "./bazelw run --config=bench //trainer/checkpoint:checkpoint_benchmark -- --rounds=7",
        "inputs": ["trainer/checkpoint/", ":(exclude)trainer/checkpoint/*_test.cc",
                   "common/results/atomic_file.cc", "common/base/sha256.cc",
                   "common/base/disk_ceiling.cc"],
    },
    {
        "name": "async_checkpoint",
        "title": "synchronous against asynchronous checkpoints: tokens/s and time blocked per save",
        "command": "./bazelw run --config=bench //trainer/checkpoint:async_checkpoint_benchmark -- --rounds=3",
        "inputs": TRAINING + ["trainer/checkpoint/", ":(exclude)trainer/checkpoint/*_test.cc",
                              "common/results/atomic_file.cc", "common/base/sha256.cc"],
    },
    {
        "name": "moe_comm",
        "title": "MoE dispatch and combine under skewed routing, 2 ranks: times, busbw, drops",
        "command": "./bazelw run //moe_comm -- --nproc=2 --out={out}/moe_comm.json",
        "markdown": "moe_comm.md",
        "json": "moe_comm.json",
        "inputs": ["moe_comm/", ":(exclude)moe_comm/*_test.cc", "common/nn/",
                   "common/collective/", ":(exclude)common/collective/*_test.cc"],
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
    },
]


def by_name():
    return {figure["name"]: figure for figure in FIGURES}
