"""What the Python benchmark scripts under trainer/bench share: building the
optimised binaries they run, the load average and a provenance line."""

import os
import platform
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(os.path.dirname(HERE))


def build(targets):
    """Builds `targets` (labels like //trainer) under --config=bench and returns
    each one's binary path, in order."""
    bazel = os.path.join(CHECKOUT, "bazelw")
    subprocess.run([bazel, "build", "--config=bench"] + targets, cwd=CHECKOUT,
                   check=True)
    bin_dir = subprocess.run(
        [bazel, "info", "--config=bench", "bazel-bin"], cwd=CHECKOUT,
        check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    paths = []
    for target in targets:
        package, _, name = target.lstrip("/").partition(":")
        paths.append(os.path.join(bin_dir, package, name or os.path.basename(package)))
    return paths


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def _git(*args):
    return subprocess.run(["git"] + list(args), cwd=CHECKOUT, capture_output=True,
                          text=True).stdout.strip()


def _cpu():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def provenance(started):
    """One Markdown line: commit and dirty flag, build, CPU, host, command and
    times (`started` from time.time() before the first run)."""
    dirty = " (dirty)" if _git("status", "--porcelain", "--untracked-files=no") else ""
    return (f"commit {_git('rev-parse', '--short=12', 'HEAD')}{dirty}, build opt "
            f"(--config=bench), {_cpu()} ({os.cpu_count()} cores), host "
            f"{platform.node()}, command `{' '.join(shlex.quote(a) for a in sys.argv)}`, "
            f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(started))} to "
            f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}.")


def emit(lines, out):
    """Prints the result's lines and, with `out`, writes them there too."""
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text)
