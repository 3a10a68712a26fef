"""Every `--flag` the documentation names exists in the binary it is written for.

Usage: doc_flags.py --binary NAME=PATH ... [--script NAME=PATH ...]
                    [--source NAME=PATH ...] [--usage NAME=PATH ...] DOC.md ...

Each binary's flags are what it prints for --helpfull (Abseil's listing: what
it really parses); a Python script's are its argparse add_argument calls; a
binary this machine cannot build (CUDA) or a benchmark the test does not
build is read from its source's ABSL_FLAG definitions (--source). A
flag is checked against one binary when the text says which: a command line
naming a target (`bazel run //trainer -- --steps=3`, flags after the lone
`--`), a binary path (`bazel-bin/trainer/trainer`, `torchrun ...
trainer/trainer --steps=3`), a command that starts with a binary's name
(`$ ckpt_tool verify DIR`, `trainer --resume=latest`) or a script's path
(`python3 trainer/bench/ddp_bench.py --nproc=2`). Flags a command gives
before its binary belong to the tool that runs it (bazel, torchrun, srun,
mpirun: EXTERNAL_FLAGS). Anywhere else (prose, tables) a flag must exist in
some binary or script of ours, or in EXTERNAL_FLAGS. Abseil's `--noflag`
spelling of a boolean counts as the flag. Link anchors
(`#fsdp---strategyfsdp`) are not flags.

Prints one line per flag that does not exist ("docs/x.md:12: --stpes: not a
flag of trainer (`bazel run //trainer -- --stpes=3`)") and exits 1 if any.
"""

import argparse
import concurrent.futures
import re
import subprocess
import sys

# Flags of the tools that run ours, named in the docs: only these, so that a
# typo in a bazel or torchrun flag is caught too. Add one when a doc needs it.
EXTERNAL_FLAGS = {
    "bazel": {
        "config", "sandbox_debug", "test_env", "test_output", "test_arg", "jobs",
        "compilation_mode", "disk_cache", "nocache_test_results", "runs_per_test",
        "test_filter", "test_timeout", "keep_going", "local_test_jobs", "copt",
        "repo_env", "action_env", "output_base", "host_jvm_args", "build_tests_only",
        "test_tag_filters", "build_tag_filters", "test_sharding_strategy", "color",
        "curses", "show_timestamps", "announce_rc", "experimental_ui_max_stdouterr_bytes",
        "verbose_failures", "subcommands", "check_tests_up_to_date", "version", "help",
        "dynamic_mode",
    },
    "torchrun": {
        "nproc_per_node", "nnodes", "node_rank", "master_addr", "master_port", "standalone",
        "rdzv_backend", "rdzv_endpoint", "rdzv_id", "max_restarts", "tee", "redirects",
        "log_dir", "run_id", "monitor_interval", "no_python", "no-python", "max-restarts",
    },
    "srun": {"ntasks", "nodes", "mpi", "ntasks_per_node", "cpus_per_task", "time", "partition"},
    "mpirun": {"oversubscribe", "allow-run-as-root", "host", "bind-to", "map-by"},
    # Google Benchmark's, in the *_benchmark binaries that link it.
    "benchmark": {
        "benchmark_filter", "benchmark_repetitions", "benchmark_report_aggregates_only",
        "benchmark_min_time", "benchmark_format", "benchmark_out", "benchmark_out_format",
        "benchmark_display_aggregates_only",
    },
}

FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9_-]*[a-z0-9_]|[a-z])")
TARGET = re.compile(r"(?<![\w/])//([a-z0-9_/]+)(?::([a-z0-9_]+))?")
HELP_LINE = re.compile(r"^\s+--([a-z][a-z0-9_]*)\b")


def binary_flags(path):
    """The flags `path --helpfull` lists (Abseil exits 1 after printing)."""
    run = subprocess.run([path, "--helpfull"], capture_output=True, text=True, timeout=60)
    flags = set()
    for line in (run.stdout + run.stderr).splitlines():
        match = HELP_LINE.match(line)
        if match:
            flags.add(match.group(1))
    if not flags:
        sys.exit(f"{path} --helpfull listed no flags (exit {run.returncode})")
    return flags


def script_flags(path):
    with open(path, encoding="utf-8") as script:
        return set(re.findall(r"""add_argument\(\s*["']--([a-z][a-z0-9_-]*)["']""", script.read()))


def source_flags(path):
    with open(path, encoding="utf-8") as source:
        return set(re.findall(r"ABSL_FLAG\(\s*[\w:<>]+\s*,\s*([a-z][a-z0-9_]*)\s*,", source.read()))


def usage_flags(path):
    """A tool's flags from the usage text it documents itself with: lines of
    the form "  --name..." (a script that parses its own arguments)."""
    with open(path, encoding="utf-8") as source:
        return {m.group(1) for m in map(HELP_LINE.match, source.read().splitlines()) if m}


def known(flag, flags):
    return flag in flags or (flag.startswith("no") and flag[2:] in flags)


class Checker:
    def __init__(self, binaries):
        self.binaries = binaries  # name (a binary's or a script's) -> set of flags
        self.anywhere = set().union(*binaries.values(), *EXTERNAL_FLAGS.values())
        self.external = set().union(*EXTERNAL_FLAGS.values())

    def binary_at(self, command):
        """(name, index after it) of the first binary a command names, or None."""
        best = None
        for match in TARGET.finditer(command):
            package, name = match.group(1), match.group(2)
            target = name or package.rstrip("/").split("/")[-1]
            if target in self.binaries:
                best = (target, match.end())
                break
        for name in self.binaries:
            for match in re.finditer(r"(?:^|[\s/$])%s(?=\s|$)" % re.escape(name), command):
                # A path ending in the binary, or the command's first word.
                word_start = command.rfind(" ", 0, match.end() - len(name)) + 1
                word = command[word_start:match.end()].strip()
                first = command[:word_start].strip() in ("", "$")
                if "/" in word or first:
                    if best is None or match.end() < best[1]:
                        best = (name, match.end())
        return best

    def check_command(self, command):
        """Problems in one command line: (flag, why)."""
        found = self.binary_at(command)
        problems = []
        for match in FLAG.finditer(command):
            flag = match.group(1)
            if found is None:
                if not known(flag, self.anywhere):
                    problems.append((flag, "not a flag of any binary or tool the docs use"))
                continue
            name, after = found
            separator = command.find(" -- ")
            is_bazel = command.lstrip("$ ").startswith(("bazel ", "./bazelw ", "bazelw "))
            if match.start() < after or (is_bazel and separator >= 0 and match.start() < separator):
                # Before the binary: the tool that runs it.
                if not known(flag, self.external):
                    problems.append((flag, "not a flag of the tool that runs " + name))
            elif not known(flag, self.binaries[name] | EXTERNAL_FLAGS["benchmark"]):
                problems.append((flag, "not a flag of " + name))
        return problems

    def check_prose(self, text):
        return [(m.group(1), "not a flag of any binary or tool the docs use")
                for m in FLAG.finditer(text) if not known(m.group(1), self.anywhere)]

    def check_document(self, name, text):
        """Lines "name:line: --flag: why (context)"."""
        out = []
        in_code = False
        lines = text.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            number = i + 1
            if line.lstrip().startswith("```"):
                in_code = not in_code
                i += 1
                continue
            if in_code:
                # A command continued with `\` is one command.
                command = line
                while command.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    command = command[:-1] + " " + lines[i].strip()
                problems = self.check_command(command.strip())
            else:
                problems = []
                # Inline code spans are commands; the rest is prose.
                spans = re.findall(r"`([^`]+)`", line)
                for span in spans:
                    problems += self.check_command(span.strip())
                problems += self.check_prose(re.sub(r"`[^`]+`", " ", line))
                command = line
            for flag, why in problems:
                out.append(f"{name}:{number}: --{flag}: {why} ({command.strip()[:120]})")
            i += 1
        return out


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", action="append", default=[], help="NAME=PATH")
    parser.add_argument("--script", action="append", default=[], help="NAME=PATH")
    parser.add_argument("--source", action="append", default=[], help="NAME=PATH")
    parser.add_argument("--usage", action="append", default=[], help="NAME=PATH")
    parser.add_argument("docs", nargs="+")
    args = parser.parse_args(argv)
    specs = [spec.split("=", 1) for spec in args.binary]
    # Each binary loads LibTorch before it prints: list them side by side.
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        listed = pool.map(binary_flags, [path for _, path in specs])
    binaries = dict(zip([name for name, _ in specs], listed))
    for spec in args.script:
        name, path = spec.split("=", 1)
        binaries[name] = script_flags(path)
    for spec in args.source:
        name, path = spec.split("=", 1)
        binaries[name] = binaries.get(name, set()) | source_flags(path)
    for spec in args.usage:
        name, path = spec.split("=", 1)
        binaries[name] = binaries.get(name, set()) | usage_flags(path)
    checker = Checker(binaries)
    problems = []
    for doc in args.docs:
        with open(doc, encoding="utf-8") as text:
            problems += checker.check_document(doc, text.read())
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
