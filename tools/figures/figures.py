"""Regenerates the figures the docs quote: ./bazelw run //tools/figures -- [FLAGS]

  --only=NAME,...     these figures (default: every one in tools/figures/registry.py)
  --list              print each figure's name, expected minutes (and the last run's, where
                      stamped), command and inputs, and the total; run nothing
  --out_dir=DIR       where NAME.md / NAME.json go (default: docs/figures in the checkout)
  --quiet_wait_s=S    the quiet window's bound before each figure (default 900; 0: no wait)
  --quiet_poll_s=S    how often the load is read while waiting (default 10)

For each figure, in registry order: wait until the 1-minute load average is
below half the cores (at most --quiet_wait_s; past it the figure is marked
noisy; a figure the registry marks counted does not wait), record the load, run the command from the checkout's root with {out}
a fresh scratch folder, record the load again, then write NAME.md and
NAME.json stamped with the commit, the machine, the libraries and the command
(tools/figures/figures_lib.py), and the folder's README.md index. A command
that fails leaves its figure files untouched and makes this exit 1 after the
others ran; a bad flag or name exits 2 before anything runs.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import figures_lib  # noqa: E402
import registry  # noqa: E402

OUTPUT_TAIL_LINES = 120


def fail_usage(message):
    print("figures: %s" % message, file=sys.stderr)
    sys.exit(2)


def parse(argv):
    options = {"only": None, "list": False, "out_dir": None, "quiet_wait_s": 900.0,
               "quiet_poll_s": 10.0}
    for arg in argv:
        name, _, value = arg.partition("=")
        if arg == "--list":
            options["list"] = True
        elif name == "--only" and value:
            options["only"] = value.split(",")
        elif name == "--out_dir" and value:
            options["out_dir"] = value
        elif name in ("--quiet_wait_s", "--quiet_poll_s"):
            try:
                options[name[2:]] = float(value)
            except ValueError:
                fail_usage("%s=%s is not a number of seconds" % (name, value))
            if options[name[2:]] < 0:
                fail_usage("%s=%s must be >= 0" % (name, value))
        elif arg in ("--help", "-h"):
            print(__doc__)
            sys.exit(0)
        else:
            fail_usage("unknown argument %s (--help lists the flags)" % arg)
    return options


def checkout_root():
    root = os.environ.get("BUILD_WORKSPACE_DIRECTORY")
    if root:
        return root
    return os.path.dirname(os.path.dirname(HERE))


def run_figure(figure, root, out_dir, options):
    cores = os.cpu_count() or 1
    # A counted figure's numbers do not move with the load: no quiet window.
    bound_s = 0 if figure.get("counted") else options["quiet_wait_s"]
    window = figures_lib.wait_for_quiet(cores, bound_s, options["quiet_poll_s"])
    print("figures: %s: %s (1-min load %.2f, threshold %.2f%s)" % (
        figure["name"], "quiet window" if window["quiet"] else
        "counted, so no quiet window" if figure.get("counted") else
        "NOISY: the wait's bound ran out",
        window["load_at_end"], window["threshold"],
        ", waited %.0f s" % window["waited_s"] if window["waited_s"] else ""), flush=True)
    prefix = os.path.relpath(out_dir, root) + "/" if out_dir.startswith(root + os.sep) else None
    commit, dirty_paths = figures_lib.commit_and_dirty(root, prefix)
    machine = figures_lib.machine()
    libraries = figures_lib.libraries()
    scratch = tempfile.mkdtemp(prefix="figure_%s_" % figure["name"])
    command = figures_lib.substitute(figure["command"], scratch)
    log_path = os.path.join(scratch, "output.log")
    print("figures: %s: running %s (output: %s)" % (figure["name"], command, log_path), flush=True)
    load_before = os.getloadavg()
    started_utc = figures_lib.utc_now()
    started = time.monotonic()
    with open(log_path, "wb") as log:
        exit_code = subprocess.run(["bash", "-c", command], cwd=root, stdout=log,
                                   stderr=subprocess.STDOUT).returncode
    wall_s = time.monotonic() - started
    load_after = os.getloadavg()
    with open(log_path, encoding="utf-8", errors="replace") as f:
        output = f.read()
    tail = "\n".join(output.rstrip("\n").split("\n")[-OUTPUT_TAIL_LINES:])
    if exit_code != 0:
        print(tail)
        print("figures: %s: the command exited %d; %s.md/.json left as they were (output: %s)" %
              (figure["name"], exit_code, figure["name"], log_path), flush=True)
        return False
    markdown = None
    result = None
    try:
        if figure.get("markdown"):
            with open(os.path.join(scratch, figure["markdown"]), encoding="utf-8") as f:
                markdown = f.read()
        if figure.get("json"):
            with open(os.path.join(scratch, figure["json"]), encoding="utf-8") as f:
                result = json.load(f)
    except (OSError, ValueError) as error:
        # The registry names a file the command did not write: this figure
        # fails, the others still run.
        print("figures: %s: the command exited 0 but its output is unusable: %s; %s.md/.json "
              "left as they were (scratch: %s)" % (figure["name"], error, figure["name"], scratch),
              flush=True)
        return False
    stamp = figures_lib.make_stamp(figure, commit, dirty_paths, machine, libraries, load_before,
                                   load_after, window, command, started_utc,
                                   figures_lib.utc_now(), wall_s, exit_code)
    document = figures_lib.figure_json(figure, stamp, markdown, result, tail)
    base = os.path.join(out_dir, figure["name"])
    # Plots the Markdown links to (beside it in the scratch folder) go beside it here.
    for entry in sorted(os.listdir(scratch)):
        if entry.endswith(".svg"):
            shutil.copyfile(os.path.join(scratch, entry), os.path.join(out_dir, entry))
    write_atomically(base + ".json", json.dumps(document, indent=1, sort_keys=True) + "\n")
    write_atomically(base + ".md", figures_lib.render_markdown(document))
    shutil.rmtree(scratch, ignore_errors=True)  # kept only when the command failed
    print("figures: %s: wrote %s.md and .json (%.1f s, load %.2f -> %.2f%s)" % (
        figure["name"], base, wall_s, load_before[0], load_after[0],
        ", noisy" if stamp["noisy"] else ""), flush=True)
    return True


def write_atomically(path, text):
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


def load_documents(out_dir):
    documents = {}
    for figure in registry.FIGURES:
        path = os.path.join(out_dir, figure["name"] + ".json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                documents[figure["name"]] = json.load(f)
    return documents


def list_text(figures, documents):
    """--list: each figure with its expected minutes (the last stamped run's
    wall time beside it), then the total and the part that needs quiet."""
    lines = []
    for figure in figures:
        stamp = documents.get(figure["name"], {}).get("stamp") or {}
        last = (", last run %.1f min" % (stamp["wall_s"] / 60.0)) if "wall_s" in stamp else ""
        tags = [t for t in ("cheap", "counted: no quiet window") if figure.get(t.split(":")[0])]
        lines.append("%s (~%g min%s%s)\n  %s\n  command: %s\n  inputs: %s" % (
            figure["name"], figure["minutes"], last, "".join("; " + t for t in tags),
            figure["title"], figure["command"], " ".join(figure["inputs"])))
    total = sum(f["minutes"] for f in figures)
    quiet = sum(f["minutes"] for f in figures if not f.get("counted"))
    lines.append("total: ~%g min on a quiet 2-core machine, ~%g min of it in quiet windows" %
                 (total, quiet))
    return "\n".join(lines) + "\n"


def main(argv):
    options = parse(argv[1:])
    figures = registry.FIGURES
    if options["only"] is not None:
        names = registry.by_name()
        unknown = [n for n in options["only"] if n not in names]
        if unknown:
            fail_usage("--only names no figure %s (known: %s)" %
                       (", ".join(unknown), ", ".join(sorted(names))))
        figures = [f for f in registry.FIGURES if f["name"] in options["only"]]
    root = checkout_root()
    out_dir = os.path.abspath(os.path.join(root, options["out_dir"] or "docs/figures"))
    if options["list"]:
        print(list_text(figures, load_documents(out_dir)), end="")
        return 0
    os.makedirs(out_dir, exist_ok=True)
    failed = []
    for figure in figures:
        if not run_figure(figure, root, out_dir, options):
            failed.append(figure["name"])
    write_atomically(os.path.join(out_dir, "README.md"),
                     figures_lib.render_index(registry.FIGURES, load_documents(out_dir)))
    if failed:
        print("figures: failed: %s" % ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
