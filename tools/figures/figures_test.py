"""Unit tests of the figures harness (//tools/figures:figures_test): the
registry's shape, the quiet window, the stamp and its rendering, and the
staleness check on a scratch git repository."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import figures  # noqa: E402
import figures_lib  # noqa: E402
import registry  # noqa: E402


class FakeClock:
    """loadavg() returns the next 1-minute load of `loads` (the last one
    repeats); sleep() advances the clock."""

    def __init__(self, loads):
        self.loads = list(loads)
        self.now = 0.0
        self.sleeps = []

    def loadavg(self):
        load = self.loads.pop(0) if len(self.loads) > 1 else self.loads[0]
        return (load, load, load)

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def window(quiet=True):
    return {"threshold": 1.0, "bound_s": 60, "waited_s": 0.0 if quiet else 60.0,
            "load_at_start": 0.5 if quiet else 3.0, "load_at_end": 0.5 if quiet else 2.5,
            "quiet": quiet}


FIGURE = {"name": "demo", "title": "a demo figure", "command": "./demo --out={out}/d.json",
          "inputs": ["a/"]}


def stamp_for(commit, quiet=True, dirty_paths=(), command_template=None, exit_code=0):
    figure = dict(FIGURE)
    if command_template is not None:
        figure["command"] = command_template
    return figures_lib.make_stamp(
        figure, commit, list(dirty_paths),
        {"cpu_model": "AMD EPYC 9B45", "cores": 2, "memory_bytes": 24 << 30, "host": "vm",
         "kernel": "6.1"},
        {"packages": {"libtorch-dev": "1.13.1"}, "blas": "/usr/lib/openblas/libblas.so.3",
         "environment": {"OPENBLAS_CORETYPE": "Haswell"}},
        (0.4, 0.6, 0.7), (1.9, 0.9, 0.8), window(quiet), "./demo --out=/tmp/x/d.json",
        "2026-12-06T21:00:00Z", "2026-12-06T21:00:05Z", 5.04, exit_code)


class RegistryTest(unittest.TestCase):
    def test_every_figure_is_complete_and_named_once(self):
        names = [f["name"] for f in registry.FIGURES]
        self.assertEqual(len(names), len(set(names)))
        for figure in registry.FIGURES:
            for field in ("name", "title", "command", "inputs", "minutes"):
                self.assertIn(field, figure, figure["name"])
            self.assertGreater(figure["minutes"], 0, figure["name"])
            self.assertTrue(figure["inputs"], figure["name"])
            # A file the harness reads must be written into the scratch folder.
            for output in ("markdown", "json"):
                if figure.get(output):
                    self.assertIn("{out}", figure["command"], figure["name"])

    def test_ci_has_a_cheap_figure(self):
        self.assertTrue([f for f in registry.FIGURES if f.get("cheap")])

    def test_registry_problems_name_a_missing_input_target_and_script(self):
        root = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        os.makedirs(os.path.join(root, "pkg"))
        with open(os.path.join(root, "pkg", "BUILD"), "w") as f:
            f.write('cc_binary(\n    name = "tool",\n)\n')
        good = {"name": "g", "title": "t", "command": "./bazelw run //pkg:tool -- --x",
                "inputs": ["pkg/", ":(exclude)pkg/*_test.cc"]}
        self.assertEqual(figures_lib.registry_problems(root, [good]), [])
        bad = {"name": "b", "title": "t",
               "command": "./bazelw run //pkg:gone && /usr/bin/python3 pkg/missing.py",
               "inputs": ["nowhere/"]}
        problems = figures_lib.registry_problems(root, [good, bad, good])
        self.assertEqual(len(problems), 4, problems)
        self.assertIn("figure g is listed twice", problems[0])
        self.assertIn("input nowhere/ does not exist", problems[1])
        self.assertIn("names //pkg:gone, which pkg/BUILD does not declare", problems[2])
        self.assertIn("runs pkg/missing.py, which does not exist", problems[3])


class QuietWindowTest(unittest.TestCase):
    def test_a_quiet_machine_starts_at_once(self):
        fake = FakeClock([0.3])
        result = figures_lib.wait_for_quiet(2, 60, 10, fake.loadavg, fake.clock, fake.sleep)
        self.assertTrue(result["quiet"])
        self.assertEqual(result["waited_s"], 0.0)
        self.assertEqual(result["threshold"], 1.0)  # half of 2 cores
        self.assertEqual(fake.sleeps, [])

    def test_it_waits_until_the_load_falls_below_half_the_cores(self):
        fake = FakeClock([0.0, 3.0, 2.0, 1.0, 0.9])  # first read is load_at_start
        result = figures_lib.wait_for_quiet(2, 60, 10, fake.loadavg, fake.clock, fake.sleep)
        self.assertTrue(result["quiet"])
        self.assertEqual(result["waited_s"], 30.0)  # 1.0 is not below 1.0
        self.assertEqual(result["load_at_end"], 0.9)

    def test_the_bound_expiring_marks_the_figure_noisy(self):
        fake = FakeClock([5.0])
        result = figures_lib.wait_for_quiet(2, 25, 10, fake.loadavg, fake.clock, fake.sleep)
        self.assertFalse(result["quiet"])
        self.assertEqual(result["waited_s"], 25.0)
        self.assertEqual(fake.sleeps, [10, 10, 5])  # never past the bound

    def test_a_zero_bound_does_not_wait(self):
        fake = FakeClock([5.0])
        result = figures_lib.wait_for_quiet(2, 0, 10, fake.loadavg, fake.clock, fake.sleep)
        self.assertFalse(result["quiet"])
        self.assertEqual(fake.sleeps, [])


class StampTest(unittest.TestCase):
    def test_the_stamp_has_every_field_and_renders_them(self):
        commit = "ab" * 20
        stamp = stamp_for(commit, dirty_paths=["README.md"])
        self.assertEqual(sorted(stamp), sorted(figures_lib.STAMP_FIELDS))
        self.assertTrue(stamp["dirty"])
        self.assertFalse(stamp["noisy"])
        document = figures_lib.figure_json(FIGURE, stamp, "| x | y |\n", None, "tail")
        text = figures_lib.render_markdown(document)
        for expected in [commit, "(dirty: README.md)", "`./demo --out={out}/d.json`",
                         "AMD EPYC 9B45, 2 cores, 24.0 GiB memory", "0.40 0.60 0.70 before",
                         "1.90 0.90 0.80 after", "quiet: 1-min load 0.50 < 1.00",
                         "libtorch-dev 1.13.1", "OPENBLAS_CORETYPE=Haswell", "| x | y |",
                         "(5.0 s), exit 0", "`a/`"]:
            self.assertIn(expected, text)
        self.assertNotIn("```text", text)  # the command's Markdown, not its output
        json.dumps(document)  # serialisable as written

    def test_a_noisy_stamp_says_so_and_shows_the_output(self):
        stamp = stamp_for("cd" * 20, quiet=False)
        self.assertTrue(stamp["noisy"])
        text = figures_lib.render_markdown(
            figures_lib.figure_json(FIGURE, stamp, None, None, "line 1\nline 2"))
        self.assertIn("**noisy**: 1-min load still 2.50 >= 1.00 after the 60 s bound", text)
        self.assertIn("```text\nline 1\nline 2\n```", text)

    def test_the_index_links_only_generated_figures(self):
        other = dict(FIGURE, name="other", title="not yet")
        stamp = stamp_for("ef" * 20)
        index = figures_lib.render_index(
            [FIGURE, other], {"demo": figures_lib.figure_json(FIGURE, stamp, None, None, "")})
        self.assertIn("| [demo](demo.md) | a demo figure | `efefefefefef` |", index)
        self.assertIn("| other | not yet | not generated yet |", index)


class CheckTest(unittest.TestCase):
    """A scratch repository: a/ is the demo figure's input, b/ is not."""

    def git(self, *args):
        return subprocess.run(["git", "-C", self.root] + list(args), check=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True).stdout.strip()

    def commit_file(self, path, text):
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
        self.git("add", path)
        self.git("commit", "-q", "-m", "change " + path)
        return self.git("rev-parse", "HEAD")

    def write_figure(self, stamp, markdown_names_commit=True):
        document = figures_lib.figure_json(FIGURE, stamp, None, None, "")
        with open(os.path.join(self.figures, "demo.json"), "w") as f:
            json.dump(document, f)
        with open(os.path.join(self.figures, "demo.md"), "w") as f:
            f.write(figures_lib.render_markdown(document) if markdown_names_commit else "# demo\n")

    def check(self):
        return figures_lib.check_folder(self.root, self.figures, {"demo": FIGURE})

    def setUp(self):
        self.root = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.git("init", "-q")
        self.git("config", "user.email", "test@example.com")
        self.git("config", "user.name", "test")
        self.commit_file("b/other.cc", "1")
        self.measured = self.commit_file("a/input.cc", "1")
        self.figures = os.path.join(self.root, "docs", "figures")
        os.makedirs(self.figures)
        # Another tool's JSON beside the figures is not a figure.
        with open(os.path.join(self.figures, "planner.json"), "w") as f:
            json.dump({"schema_version": 1}, f)

    def test_a_figure_of_head_is_current(self):
        self.write_figure(stamp_for(self.measured))
        self.assertEqual(self.check(), [])

    def test_changes_outside_its_inputs_keep_it_current(self):
        self.write_figure(stamp_for(self.measured))
        self.commit_file("b/other.cc", "2")
        self.assertEqual(self.check(), [])

    def test_a_changed_input_makes_it_stale(self):
        self.write_figure(stamp_for(self.measured))
        self.commit_file("a/input.cc", "2")
        problems = self.check()
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("its inputs changed since: a/input.cc", problems[0])
        self.assertIn("./bazelw run //tools/figures -- --only=demo", problems[0])

    def test_a_commit_that_is_not_an_ancestor_makes_it_stale(self):
        self.git("checkout", "-q", "-b", "side")
        side = self.commit_file("b/other.cc", "side")
        self.git("checkout", "-q", "-")
        self.write_figure(stamp_for(side))
        problems = self.check()
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("which is not an ancestor of HEAD", problems[0])
        self.write_figure(stamp_for("0" * 40))  # unknown to the repository
        self.assertIn("not an ancestor of HEAD", self.check()[0])

    def test_measuring_with_dirty_inputs_makes_it_stale(self):
        self.write_figure(stamp_for(self.measured, dirty_paths=["b/other.cc"]))
        self.assertEqual(self.check(), [])
        self.write_figure(stamp_for(self.measured, dirty_paths=["a/input.cc"]))
        problems = self.check()
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("uncommitted changes to its inputs: a/input.cc", problems[0])

    def test_a_changed_command_a_failed_run_and_a_bad_file_are_problems(self):
        self.write_figure(stamp_for(self.measured, command_template="./demo --old"))
        self.assertIn("the registry now says", self.check()[0])
        self.write_figure(stamp_for(self.measured, exit_code=3))
        self.assertIn("its command exited 3", self.check()[0])
        self.write_figure(stamp_for(self.measured), markdown_names_commit=False)
        self.assertIn("does not name the commit", self.check()[0])
        document = figures_lib.figure_json(FIGURE, stamp_for(self.measured), None, None, "")
        del document["stamp"]["load_after"]
        with open(os.path.join(self.figures, "demo.json"), "w") as f:
            json.dump(document, f)
        self.assertIn("the stamp lacks load_after", self.check()[0])
        with open(os.path.join(self.figures, "demo.json"), "w") as f:
            f.write("{not json")
        self.assertIn("does not parse", self.check()[0])
        with open(os.path.join(self.figures, "demo.json"), "w") as f:
            json.dump({"schema": figures_lib.SCHEMA, "name": "demo"}, f)
        self.assertIn("no stamp", self.check()[0])

    def test_a_figure_missing_from_the_registry_is_a_problem(self):
        self.write_figure(stamp_for(self.measured))
        os.rename(os.path.join(self.figures, "demo.json"),
                  os.path.join(self.figures, "gone.json"))
        problems = self.check()
        self.assertIn("no figure named gone", problems[0])


class HarnessTest(unittest.TestCase):
    """figures.main end to end on a scratch repository with a fake registry:
    a figure that works, one whose command fails and one that does not write
    the file the registry names."""

    FAKE = [
        {"name": "good", "title": "works", "inputs": ["a/"],
         "command": "printf '| op | GB/s |\\n| --- | --- |\\n| x | 1.5 |\\n' > {out}/good.md && "
                    "echo '{\"v\": 2}' > {out}/good.json && echo '<svg/>' > {out}/good_plot.svg",
         "markdown": "good.md", "json": "good.json", "minutes": 1, "counted": True},
        {"name": "fails", "title": "exits 3", "inputs": ["a/"], "command": "echo oops; exit 3",
         "minutes": 2},
        {"name": "silent", "title": "writes nothing", "inputs": ["a/"], "command": "true",
         "markdown": "silent.md", "minutes": 0.5},
    ]

    def setUp(self):
        self.root = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        for args in (["init", "-q"], ["config", "user.email", "t@example.com"],
                     ["config", "user.name", "t"]):
            subprocess.run(["git", "-C", self.root] + args, check=True)
        os.makedirs(os.path.join(self.root, "a"))
        with open(os.path.join(self.root, "a", "x.cc"), "w") as f:
            f.write("1")
        subprocess.run(["git", "-C", self.root, "add", "."], check=True)
        subprocess.run(["git", "-C", self.root, "commit", "-q", "-m", "x"], check=True)
        self.saved = (registry.FIGURES, os.environ.get("BUILD_WORKSPACE_DIRECTORY"),
                      tempfile.tempdir)
        # Scratch folders (kept for a failed command) under the test's own.
        tempfile.tempdir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        registry.FIGURES = self.FAKE
        os.environ["BUILD_WORKSPACE_DIRECTORY"] = self.root

    def tearDown(self):
        registry.FIGURES = self.saved[0]
        tempfile.tempdir = self.saved[2]
        if self.saved[1] is None:
            del os.environ["BUILD_WORKSPACE_DIRECTORY"]
        else:
            os.environ["BUILD_WORKSPACE_DIRECTORY"] = self.saved[1]

    def test_it_writes_the_working_figure_and_reports_the_others(self):
        self.assertEqual(figures.main(["figures", "--quiet_wait_s=0"]), 1)
        out = os.path.join(self.root, "docs", "figures")
        self.assertEqual(sorted(os.listdir(out)),
                         ["README.md", "good.json", "good.md", "good_plot.svg"])
        with open(os.path.join(out, "good.json")) as f:
            document = json.load(f)
        head = subprocess.run(["git", "-C", self.root, "rev-parse", "HEAD"], check=True,
                              stdout=subprocess.PIPE, text=True).stdout.strip()
        self.assertEqual(document["stamp"]["commit"], head)
        self.assertEqual(document["result"], {"v": 2})
        self.assertFalse(document["stamp"]["dirty"])
        self.assertNotIn("{out}", document["stamp"]["command"])
        with open(os.path.join(out, "good.md")) as f:
            self.assertIn("| x | 1.5 |", f.read())
        with open(os.path.join(out, "README.md")) as f:
            index = f.read()
        self.assertIn("| [good](good.md) | works |", index)
        self.assertIn("| fails | exits 3 | not generated yet |", index)
        # What it wrote passes the staleness check.
        self.assertEqual(figures_lib.check_folder(
            self.root, out, {f["name"]: f for f in self.FAKE}), [])

    def test_a_counted_figure_does_not_wait_for_a_quiet_window(self):
        bounds = {}
        real = figures_lib.wait_for_quiet

        def record(cores, bound_s, poll_s):
            bounds[len(bounds)] = bound_s
            return real(cores, 0, poll_s)
        figures_lib.wait_for_quiet = record
        try:
            figures.main(["figures", "--only=good,fails", "--quiet_wait_s=900"])
        finally:
            figures_lib.wait_for_quiet = real
        # good is counted: no wait; fails is timed: the full bound.
        self.assertEqual(bounds, {0: 0, 1: 900.0})

    def test_list_shows_minutes_the_last_run_and_the_totals(self):
        text = figures.list_text(self.FAKE, {"good": {"stamp": {"wall_s": 90.0}}})
        self.assertIn("good (~1 min, last run 1.5 min; counted: no quiet window)", text)
        self.assertIn("fails (~2 min)", text)
        self.assertIn("total: ~3.5 min on a quiet 2-core machine, ~2.5 min of it in quiet "
                      "windows", text)

    def test_only_runs_the_named_figures_and_refuses_unknown_names(self):
        self.assertEqual(figures.main(["figures", "--only=good", "--quiet_wait_s=0"]), 0)
        with self.assertRaises(SystemExit) as refused:
            figures.main(["figures", "--only=good,nope"])
        self.assertEqual(refused.exception.code, 2)
        with self.assertRaises(SystemExit) as refused:
            figures.main(["figures", "--quiet_wait_s=soon"])
        self.assertEqual(refused.exception.code, 2)


if __name__ == "__main__":
    unittest.main()
