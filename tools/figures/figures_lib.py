"""Stamps, the quiet window, rendering and the staleness check of figures.

Vocabulary. A *figure* is a registry entry (tools/figures/registry.py) and the
two files one run of its command writes: docs/figures/NAME.md (for readers)
and NAME.json (for tools). Its *stamp* says what was measured and where: the
commit and which tracked files differed from it (dirty paths; the figures
folder itself does not count), the machine (CPU model, cores, memory, host,
kernel), the libraries (Debian package versions, the BLAS alternative, the
thread and BLAS environment), the 1-minute load average before and after, the
*quiet window* (before the command the harness waits, at most a bound, until
the 1-minute load is below half the cores; a figure whose wait ran out is
*noisy*) and the exact command. A figure is *stale* when its commit is not an
ancestor of HEAD, or when one of its inputs differs between that commit and
HEAD (or was dirty when it ran).
"""

import datetime
import json
import os
import platform
import re
import socket
import subprocess
import time

SCHEMA = "mtb.figure/1"

# The Debian packages whose versions decide what a figure measures.
LIBRARY_PACKAGES = [
    "libtorch-dev", "python3-torch", "libgloo-dev", "libopenblas0-openmp",
    "libdnnl-dev", "libabsl-dev", "libprotobuf-dev", "libgoogle-glog-dev",
    "bazel-bootstrap", "g++",
]
ENVIRONMENT = ["OPENBLAS_CORETYPE", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
               "MKL_NUM_THREADS"]
BLAS_ALTERNATIVE = "/etc/alternatives/libblas.so.3-x86_64-linux-gnu"

STAMP_FIELDS = ["commit", "dirty", "dirty_paths", "machine", "libraries",
                "load_before", "load_after", "quiet_window", "noisy", "command",
                "command_template", "started_utc", "ended_utc", "wall_s",
                "exit_code"]


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def git(root, *args):
    return subprocess.run(["git", "-C", root] + list(args), check=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True).stdout


def commit_and_dirty(root, ignore_prefix):
    """(HEAD's commit, tracked paths that differ from it), paths under
    `ignore_prefix` (the figures folder) left out."""
    commit = git(root, "rev-parse", "HEAD").strip()
    paths = []
    for line in git(root, "status", "--porcelain", "--untracked-files=no").splitlines():
        path = line[3:].split(" -> ")[-1]
        if ignore_prefix and path.startswith(ignore_prefix):
            continue
        paths.append(path)
    return commit, sorted(paths)


def machine():
    model = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    memory = None
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    memory = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    return {"cpu_model": model, "cores": os.cpu_count(), "memory_bytes": memory,
            "host": socket.gethostname(), "kernel": platform.release()}


def libraries():
    packages = {}
    for package in LIBRARY_PACKAGES:
        done = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True)
        packages[package] = done.stdout.strip() if done.returncode == 0 else "not installed"
    blas = os.path.realpath(BLAS_ALTERNATIVE) if os.path.exists(BLAS_ALTERNATIVE) else "unknown"
    environment = {name: os.environ.get(name, "(unset)") for name in ENVIRONMENT}
    return {"packages": packages, "blas": blas, "environment": environment}


def quiet_threshold(cores):
    return cores / 2.0


def wait_for_quiet(cores, bound_s, poll_s, loadavg=os.getloadavg,
                   clock=time.monotonic, sleep=time.sleep):
    """Waits until the 1-minute load average is below half the cores, at most
    bound_s seconds. Returns the window's record; quiet False = noisy."""
    threshold = quiet_threshold(cores)
    started = clock()
    first = loadavg()[0]
    while True:
        load = loadavg()[0]
        waited = clock() - started
        if load < threshold:
            return {"threshold": threshold, "bound_s": bound_s, "waited_s": round(waited, 1),
                    "load_at_start": first, "load_at_end": load, "quiet": True}
        if waited >= bound_s:
            return {"threshold": threshold, "bound_s": bound_s, "waited_s": round(waited, 1),
                    "load_at_start": first, "load_at_end": load, "quiet": False}
        sleep(min(poll_s, max(bound_s - waited, 0)))


def substitute(template, out):
    return template.replace("{out}", out)


def make_stamp(figure, commit, dirty_paths, machine_record, libraries_record,
               load_before, load_after, window, command, started_utc, ended_utc,
               wall_s, exit_code):
    return {
        "commit": commit,
        "dirty": bool(dirty_paths),
        "dirty_paths": list(dirty_paths),
        "machine": machine_record,
        "libraries": libraries_record,
        "load_before": list(load_before),
        "load_after": list(load_after),
        "quiet_window": window,
        "noisy": not window["quiet"],
        "command": command,
        "command_template": figure["command"],
        "started_utc": started_utc,
        "ended_utc": ended_utc,
        "wall_s": round(wall_s, 1),
        "exit_code": exit_code,
    }


def figure_json(figure, stamp, markdown, result, output_tail):
    return {
        "schema": SCHEMA,
        "name": figure["name"],
        "title": figure["title"],
        "inputs": list(figure["inputs"]),
        "stamp": stamp,
        "markdown": markdown,
        "result": result,
        "output_tail": output_tail,
    }


def _loads(values):
    return " ".join("%.2f" % v for v in values)


def render_markdown(document):
    """NAME.md: the stamp as a table, then the figure (its Markdown, or the
    tail of the command's output)."""
    stamp = document["stamp"]
    m = stamp["machine"]
    window = stamp["quiet_window"]
    packages = ", ".join("%s %s" % (k, v) for k, v in sorted(stamp["libraries"]["packages"].items()))
    environment = ", ".join("%s=%s" % (k, v) for k, v in sorted(stamp["libraries"]["environment"].items()))
    quiet = ("quiet: 1-min load %.2f < %.2f after waiting %.0f s" %
             (window["load_at_end"], window["threshold"], window["waited_s"])
             if window["quiet"] else
             "**noisy**: 1-min load still %.2f >= %.2f after the %.0f s bound" %
             (window["load_at_end"], window["threshold"], window["bound_s"]))
    memory = ("%.1f GiB" % (m["memory_bytes"] / 2**30)) if m.get("memory_bytes") else "unknown"
    lines = [
        "<!-- written by ./bazelw run //tools/figures -- --only=%s; do not edit -->" % document["name"],
        "# %s" % document["name"],
        "",
        document["title"] + ".",
        "",
        "| stamp | |",
        "| --- | --- |",
        "| commit | `%s`%s |" % (stamp["commit"], " (dirty: %s)" % ", ".join(stamp["dirty_paths"]) if stamp["dirty"] else ""),
        "| command | `%s` |" % stamp["command_template"],
        "| machine | %s, %d cores, %s memory (%s, Linux %s) |" % (m["cpu_model"], m["cores"], memory, m["host"], m["kernel"]),
        "| load average (1, 5, 15 min) | %s before, %s after |" % (_loads(stamp["load_before"]), _loads(stamp["load_after"])),
        "| quiet window | %s |" % quiet,
        "| libraries | %s; BLAS %s |" % (packages, stamp["libraries"]["blas"]),
        "| environment | %s |" % environment,
        "| ran | %s to %s (%.1f s), exit %d |" % (stamp["started_utc"], stamp["ended_utc"], stamp["wall_s"], stamp["exit_code"]),
        "| inputs | %s |" % ", ".join("`%s`" % i for i in document["inputs"]),
        "",
        "Absolute times are this machine's; ratios were measured side by side in one run.",
        "",
    ]
    if document.get("markdown"):
        lines += [document["markdown"].rstrip("\n")]
    else:
        lines += ["```text", document["output_tail"].rstrip("\n"), "```"]
    return "\n".join(lines) + "\n"


def render_index(registry, documents):
    """docs/figures/README.md: every registered figure, linked where it exists."""
    lines = [
        "<!-- written by ./bazelw run //tools/figures; do not edit -->",
        "# Figures",
        "",
        "Every figure the README, docs/ and the learning guide quote, written by one",
        "command on a committed tree and stamped with the commit, the machine, the",
        "libraries and the load it ran under (`./bazelw run //tools/figures -- --list`",
        "shows each one's command and inputs). `//tools/figures:figures_check_test`",
        "fails when a figure's commit is not an ancestor of HEAD or one of its inputs",
        "changed since. Figures not generated yet have their last hand-measured",
        "tables in [benchmarks.md](../benchmarks.md).",
        "",
        "```sh",
        "./bazelw run //tools/figures                      # all of them, each after a quiet window",
        "./bazelw run //tools/figures -- --only=NAME,...   # some",
        "```",
        "",
        "| figure | what it shows | commit | measured (UTC) | load before / after | window |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for figure in registry:
        name = figure["name"]
        document = documents.get(name)
        if document is None:
            lines.append("| %s | %s | not generated yet | | | |" % (name, figure["title"]))
            continue
        stamp = document["stamp"]
        lines.append("| [%s](%s.md) | %s | `%s`%s | %s | %.2f / %.2f | %s |" % (
            name, name, figure["title"], stamp["commit"][:12],
            " (dirty)" if stamp["dirty"] else "", stamp["started_utc"],
            stamp["load_before"][0], stamp["load_after"][0],
            "noisy" if stamp["noisy"] else "quiet"))
    return "\n".join(lines) + "\n"


# --- The staleness check ---------------------------------------------------


def _is_ancestor(root, commit):
    done = subprocess.run(["git", "-C", root, "merge-base", "--is-ancestor", commit, "HEAD"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return done.returncode == 0


def _changed_inputs(root, commit, inputs):
    return git(root, "diff", "--name-only", commit, "HEAD", "--", *inputs).split()


def check_figure(root, registry_by_name, json_path):
    """Problems with one stamped figure file, as messages (empty: current)."""
    name = os.path.basename(json_path)[:-len(".json")]
    try:
        with open(json_path, encoding="utf-8") as f:
            document = json.load(f)
    except (OSError, ValueError) as error:
        return ["%s: does not parse: %s" % (json_path, error)]
    if document.get("schema") != SCHEMA:
        return []  # another tool's JSON beside the figures (planner files)
    problems = []
    stamp = document.get("stamp")
    if not isinstance(stamp, dict):
        return ["%s: no stamp" % json_path]
    missing = [field for field in STAMP_FIELDS if field not in stamp]
    if missing:
        return ["%s: the stamp lacks %s" % (json_path, ", ".join(missing))]
    figure = registry_by_name.get(name)
    if figure is None or document.get("name") != name:
        return ["%s: no figure named %s in tools/figures/registry.py" % (json_path, name)]
    if stamp["command_template"] != figure["command"]:
        problems.append("%s: made by `%s`, the registry now says `%s`: regenerate it" %
                        (json_path, stamp["command_template"], figure["command"]))
    if stamp["exit_code"] != 0:
        problems.append("%s: its command exited %d" % (json_path, stamp["exit_code"]))
    md_path = json_path[:-len(".json")] + ".md"
    if not os.path.exists(md_path):
        problems.append("%s: missing (its JSON exists)" % md_path)
    else:
        with open(md_path, encoding="utf-8") as f:
            if stamp["commit"] not in f.read():
                problems.append("%s: does not name the commit of %s" % (md_path, json_path))
    commit = stamp["commit"]
    if not re.match(r"^[0-9a-f]{40}$", commit) or not _is_ancestor(root, commit):
        problems.append("%s: measured at %s, which is not an ancestor of HEAD: regenerate "
                        "it (./bazelw run //tools/figures -- --only=%s)" % (json_path, commit, name))
        return problems
    inputs = figure["inputs"]
    changed = _changed_inputs(root, commit, inputs)
    if changed:
        problems.append("%s: measured at %s; its inputs changed since: %s: regenerate it "
                        "(./bazelw run //tools/figures -- --only=%s)" %
                        (json_path, commit[:12], ", ".join(changed), name))
    if stamp["dirty_paths"]:
        dirty_inputs = git(root, "ls-files", "--", *inputs).split()
        overlap = sorted(set(dirty_inputs) & set(stamp["dirty_paths"]))
        if overlap:
            problems.append("%s: measured with uncommitted changes to its inputs: %s" %
                            (json_path, ", ".join(overlap)))
    return problems


def check_folder(root, figures_dir, registry_by_name):
    problems = []
    for entry in sorted(os.listdir(figures_dir)):
        if entry.endswith(".json"):
            problems += check_figure(root, registry_by_name, os.path.join(figures_dir, entry))
    return problems


LABEL = re.compile(r"(?<![\w/])//([\w/.-]*)(?::([\w.-]+))?")
SCRIPT = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)+[\w.-]+\.(?:py|sh))\b")


def registry_problems(root, figures):
    """Problems with the registry against the checkout: every input path and
    every target and script a command names exists; names are unique."""
    problems = []
    names = [figure["name"] for figure in figures]
    for name in sorted(set(n for n in names if names.count(n) > 1)):
        problems.append("registry: figure %s is listed twice" % name)
    for figure in figures:
        where = "registry: %s" % figure["name"]
        for spec in figure["inputs"]:
            if spec.startswith(":("):
                continue
            if not os.path.exists(os.path.join(root, spec)):
                problems.append("%s: input %s does not exist" % (where, spec))
        for package, target in LABEL.findall(figure["command"]):
            if package == "..." or package.endswith("/..."):
                continue
            target = target or package.rsplit("/", 1)[-1]
            build = os.path.join(root, package, "BUILD")
            try:
                with open(build, encoding="utf-8") as f:
                    declared = re.search(r'name\s*=\s*"%s"' % re.escape(target), f.read())
            except OSError:
                declared = None
            if not declared:
                problems.append("%s: the command names //%s:%s, which %s does not declare" %
                                (where, package, target, os.path.relpath(build, root)))
        for script in SCRIPT.findall(figure["command"]):
            if not os.path.exists(os.path.join(root, script)):
                problems.append("%s: the command runs %s, which does not exist" % (where, script))
    return problems
