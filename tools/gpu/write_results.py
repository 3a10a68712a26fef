#!/usr/bin/env python3
"""The GPU check's results file: reads a tools/gpu/check.sh OUT_DIR (checks.txt,
commit.txt, gpu.csv / nvidia-smi.txt, perf.json, a run's result JSON for the
CUDA versions; after_check.sh's lines too when it has run) and writes
OUT_DIR/gpu_train.json and OUT_DIR/gpu_train.md, which the GPU session copies
into docs/figures/ as they are.

Per check: its state (PASS, FAIL, SKIP; GOAL lines are the performance goals,
met or missed, never a failure), the observed error and its bound where the
line has them ("max|...|=X ... bound Y"), and the line itself. `passed` is
true when no check failed; a missed goal leaves it true and is reported with
its ratio. Standard library only.

  write_results.py OUT_DIR
"""

import json
import os
import re
import sys

from perf_summary import load  # a JSON file, or None when absent or unreadable

OBSERVED = re.compile(r"max\|[^|]*\|=([-+0-9.eE]+|nan|inf)")
BOUND = re.compile(r"\bbound ([-+0-9.eE]+)")


def read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def parse_checks(text):
    checks = []
    for line in text.splitlines():
        words = line.split(maxsplit=2)
        if len(words) < 2 or words[0] not in ("PASS", "FAIL", "SKIP", "GOAL"):
            continue
        check = {"state": words[0], "name": words[1].rstrip(":"),
                 "detail": words[2] if len(words) > 2 else ""}
        if words[0] == "GOAL":
            check["met"] = check["detail"].startswith("met")
        observed, bound = OBSERVED.search(line), BOUND.search(line)
        if observed:
            check["observed"] = float(observed.group(1))
        if bound:
            check["bound"] = float(bound.group(1))
        checks.append(check)
    return checks


def machine(out):
    gpu, driver = "", ""
    csv = read(os.path.join(out, "gpu.csv")).strip().splitlines()
    if csv and "," in csv[0]:
        gpu, driver = (x.strip() for x in csv[0].split(",", 1))
    smi = read(os.path.join(out, "nvidia-smi.txt"))
    cuda = ""
    m = re.search(r"CUDA Version:\s*([0-9.]+)", smi)
    if m:
        cuda = m.group(1)
    if not driver:
        m = re.search(r"Driver Version:\s*([0-9.]+)", smi)
        driver = m.group(1) if m else ""
    if not gpu:
        m = re.search(r"^GPU 0: (.*?)(?: \(UUID|$)", smi, re.M)
        gpu = m.group(1) if m else ""
    runtime = ""
    for name in ("perf_ours_1.json", "small.json", "gpt2.json"):
        result = load(os.path.join(out, name))
        if result:
            context = result.get("run_context", {})
            runtime = context.get("cuda_runtime_version", "")
            gpu = gpu or (context.get("gpu_names") or [""])[0]
            break
    return {"gpu": gpu, "driver": driver, "cuda_driver_api": cuda, "cuda_runtime": runtime}


def markdown(r):
    m = r["machine"]
    lines = [
        "# The trainer on a GPU: tools/gpu/check.sh",
        "",
        f"Commit `{r['commit']}`; {m['gpu'] or 'GPU unknown'}, driver {m['driver'] or '?'} "
        f"(CUDA {m['cuda_driver_api'] or '?'}), CUDA runtime {m['cuda_runtime'] or '?'}. "
        f"Correctness: **{'every check passed' if r['passed'] else 'a check FAILED'}** "
        f"({r['counts']['PASS']} passed, {r['counts']['FAIL']} failed, "
        f"{r['counts']['SKIP']} skipped).",
        "",
        "| check | state | observed | bound | detail |",
        "|---|---|---|---|---|",
    ]
    fmt = lambda x: "" if x is None else f"{x:.3g}"
    for c in r["checks"]:
        if c["state"] == "GOAL":
            continue
        detail = c["detail"].replace("|", "\\|")
        lines.append(f"| {c['name']} | {c['state']} | {fmt(c.get('observed'))} | "
                     f"{fmt(c.get('bound'))} | {detail} |")
    perf = r.get("perf") or {}
    lines += ["", "## Performance (GPT-2 124M shapes, bf16, B 16, T 1024)", ""]
    if perf:
        tps = lambda k: f"{perf[k]:.0f}" if perf.get(k) else "not measured"
        lines += [
            f"Medians of {perf.get('rounds')} alternating rounds (each run: the median over "
            "its timed steps).",
            "",
            "| run | tokens/s | ours / it |",
            "|---|---|---|",
            f"| trainer_cuda | {tps('ours_tokens_per_second')} | |",
            f"| PyTorch eager | {tps('eager_tokens_per_second')} | "
            f"{fmt(perf.get('eager_ratio'))} |",
            f"| PyTorch torch.compile | {tps('compile_tokens_per_second')} | "
            f"{fmt(perf.get('compile_ratio'))} |",
            "",
        ]
        if perf.get("mfu") is not None:
            lines.append(f"MFU {100 * perf['mfu']:.1f}% of the cuBLASLt bf16 peak measured in "
                         f"the same runs ({perf['peak_flops'] / 1e12:.0f} TFLOP/s).")
        where = perf.get("where_the_time_goes_ms")
        if where:
            lines.append("Our step (median ms): " + ", ".join(
                f"{k[:-3]} {v:.1f}" for k, v in where.items()) + ".")
        lines.append("")
    goals = [c for c in r["checks"] if c["state"] == "GOAL"]
    if goals:
        lines += ["| goal | result |", "|---|---|"]
        for g in goals:
            lines.append(f"| {g['name']} | {g['detail'].replace('|', chr(92) + '|')} |")
    else:
        lines.append("No performance goal was measured.")
    return "\n".join(lines) + "\n"


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print("usage: write_results.py OUT_DIR", file=sys.stderr)
        return 2
    out = argv[1]
    checks = parse_checks(read(os.path.join(out, "checks.txt")))
    counts = {s: sum(c["state"] == s for c in checks) for s in ("PASS", "FAIL", "SKIP", "GOAL")}
    result = {
        "commit": read(os.path.join(out, "commit.txt"), "unknown").strip() or "unknown",
        "machine": machine(out),
        "passed": counts["FAIL"] == 0 and counts["PASS"] > 0,
        "counts": counts,
        "checks": checks,
        "perf": load(os.path.join(out, "perf.json")),
    }
    with open(os.path.join(out, "gpu_train.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(out, "gpu_train.md"), "w") as f:
        f.write(markdown(result))
    print(f"results: {out}/gpu_train.json, {out}/gpu_train.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
