"""Tests of the guide's block format and translation check (negative cases
included): //tools/guide:guide_tools_test."""

import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare_translations  # noqa: E402
import guide_blocks  # noqa: E402

GUIDE = """# Guide
## Day 1
Run it:
<!-- guide: day=1 quick="--steps=3 --out=results/a.json" -->
```sh
./bazelw run //trainer -- --nproc=2 \\
  --strategy=zero1
```
```text
step 1/3 | loss 5.5
```
<!-- guide: day=1 mode=check -->
```sh
./bazelw test //trainer:sharded_process_test
```
## Day 2
<!-- guide: day=2 expect=1 -->
```sh
ls results/missing
```
At 4 ranks [`mlp` sends 6144 B in 2 calls](figures/tp_check.md).
**Q1. How fast?**
1.1× [load 9; to regenerate: `./bazelw run //tools/figures -- --only=speed`.]
"""


class ParseTest(unittest.TestCase):

    def test_blocks_carry_day_quick_expect_mode_and_one_command(self):
        blocks = guide_blocks.parse(GUIDE)
        self.assertEqual(len(blocks), 3)
        self.assertEqual(blocks[0].day, 1)
        self.assertEqual(blocks[0].quick, ["--steps=3", "--out=results/a.json"])
        self.assertEqual(blocks[0].command,
                         "./bazelw run //trainer -- --nproc=2 --strategy=zero1")
        self.assertEqual(blocks[1].mode, "check")
        self.assertEqual(blocks[2].expect, 1)
        self.assertEqual(blocks[2].day, 2)

    def test_bazel_commands_map_to_runfiles_binaries(self):
        verb, label, args = guide_blocks.split_bazel(
            "./bazelw run -c opt //comm_bench:loopback_ceiling -- --rounds=3")
        self.assertEqual((verb, label, args),
                         ("run", "//comm_bench:loopback_ceiling", ["--rounds=3"]))
        self.assertEqual(guide_blocks.runfiles_path(label),
                         "comm_bench/loopback_ceiling")
        self.assertEqual(guide_blocks.runfiles_path("//trainer"),
                         "trainer/trainer")
        self.assertEqual(guide_blocks.split_bazel("ls results"),
                         (None, None, None))

    def test_malformed_markers_are_refused_with_their_line(self):
        cases = {
            "<!-- guide: quick=x -->\n```sh\nls\n```\n": "day=1..7",
            "<!-- guide: day=9 -->\n```sh\nls\n```\n": "day=1..7",
            "<!-- guide: qa=0 -->\n```sh\nls\n```\n": "qa=1..99",
            "<!-- guide: day=1 qa=2 -->\n```sh\nls\n```\n": "one of the two",
            "<!-- guide: day=1 colour=red -->\n```sh\nls\n```\n": "colour",
            "<!-- guide: day=1 mode=skip -->\n```sh\nls\n```\n": "mode",
            "<!-- guide: day=1 -->\ntext\n```sh\nls\n```\n": "followed by",
            "<!-- guide: day=1 -->\n```sh\nls\n": "unterminated",
            "<!-- guide: day=1 -->\n```sh\nls\npwd\n```\n": "one command",
        }
        for text, words in cases.items():
            with self.assertRaises(ValueError) as raised:
                guide_blocks.parse(text, "g.md")
            self.assertIn("g.md:1", str(raised.exception))
            self.assertIn(words, str(raised.exception))


QA_GUIDE = """# Guide
## Questions and answers
**Q1. Does it run?**
<!-- guide: qa=1 -->
```sh
echo answered > results.txt
```
**Q2. Does a refused flag exit 2?**
<!-- guide: qa=2 expect=2 -->
```sh
bash -c 'exit 2'
```
**Q3. Does the benchmark exist?**
<!-- guide: qa=3 mode=check -->
```sh
./bazelw run --config=bench //bench:present -- --rounds=3
```
"""


class RunGuideTest(unittest.TestCase):
    """run_guide.py --qa on a fixture: every block runs, alone; a broken
    command, exit code or target fails naming its line and question."""

    def run_guide(self, text, *args, env_extra=None):
        root = tempfile.mkdtemp()
        with open(os.path.join(root, "g.md"), "w", encoding="utf-8") as f:
            f.write(text)
        os.makedirs(os.path.join(root, "bench"))
        open(os.path.join(root, "bench", "present"), "w").close()
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("TEST_SHARD") and k != "TEST_TOTAL_SHARDS"}
        env["TEST_TMPDIR"] = tempfile.mkdtemp()
        env.update(env_extra or {})
        done = subprocess.run(
            [sys.executable, os.path.join(HERE, "run_guide.py"), "g.md",
             "--runfiles=" + root] + list(args),
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        return done.returncode, done.stdout.decode(), env["TEST_TMPDIR"]

    def test_every_qa_block_runs_alone_and_passes(self):
        code, output, scratch = self.run_guide(QA_GUIDE, "--qa")
        self.assertEqual(code, 0, output)
        for line, question in ((4, "Q1"), (9, "Q2"), (14, "Q3")):
            self.assertIn("ok g.md:%d %s" % (line, question), output)
        # Q1 ran in its own scratch checkout.
        self.assertTrue(os.path.exists(
            os.path.join(scratch, "checkout_line4", "results.txt")))

    def test_a_broken_command_fails_naming_its_line_and_question(self):
        code, output, _ = self.run_guide(
            QA_GUIDE.replace("echo answered", "no_such_command"), "--qa")
        self.assertEqual(code, 1, output)
        self.assertIn("FAIL g.md:4 (Q1): exit 127, the guide expects 0", output)

    def test_a_changed_exit_code_fails(self):
        code, output, _ = self.run_guide(
            QA_GUIDE.replace("'exit 2'", "'exit 0'"), "--qa")
        self.assertEqual(code, 1, output)
        self.assertIn("FAIL g.md:9 (Q2): exit 0, the guide expects 2", output)

    def test_a_checked_target_that_is_gone_fails(self):
        code, output, _ = self.run_guide(
            QA_GUIDE.replace("//bench:present", "//bench:renamed"), "--qa")
        self.assertEqual(code, 1, output)
        self.assertIn("FAIL g.md:14 (Q3): run names //bench:renamed", output)

    def test_shards_split_the_blocks(self):
        status = os.path.join(tempfile.mkdtemp(), "status")
        code, output, _ = self.run_guide(
            QA_GUIDE, "--qa", env_extra={"TEST_TOTAL_SHARDS": "2",
                                         "TEST_SHARD_INDEX": "1",
                                         "TEST_SHARD_STATUS_FILE": status})
        self.assertEqual(code, 0, output)
        self.assertIn("ok g.md:9 Q2", output)
        self.assertNotIn("Q1", output)
        self.assertNotIn("Q3", output)
        self.assertTrue(os.path.exists(status))

    def test_a_guide_without_qa_blocks_fails(self):
        code, output, _ = self.run_guide(GUIDE, "--qa")
        self.assertEqual(code, 1, output)
        self.assertIn("the Q&A has no runnable blocks", output)


class TranslationTest(unittest.TestCase):

    def translate(self, text):
        return (text.replace("Run it:", "运行：").replace("# Guide", "# 指南")
                .replace("How fast?", "多快？").replace("to regenerate: ", "待重新生成：")
                .replace("Day 1", "第一天").replace("Day 2", "第二天"))

    def test_a_faithful_translation_passes(self):
        self.assertIsNone(compare_translations.compare(
            "en", GUIDE, "zh", self.translate(GUIDE)))

    def test_a_changed_command_or_quick_form_or_section_fails(self):
        zh = self.translate(GUIDE)
        self.assertIn("待重新生成：`./bazelw run //tools/figures -- --only=speed`", zh)
        for broken in (zh.replace("--strategy=zero1", "--strategy=zero2"),
                       zh.replace('--steps=3 ', '--steps=4 '),
                       zh.replace("## 第二天", "### 第二天"),
                       zh.replace("step 1/3", "step 1/4"),
                       zh.replace("<!-- guide: day=2 expect=1 -->\n", ""),
                       zh.replace("6144 B", "6145 B"),
                       zh.replace("[`mlp` sends 6144 B in 2 calls](figures/tp_check.md)",
                                  "`mlp` sends 6144 B in 2 calls"),
                       zh.replace("--only=speed", "--only=other"),
                       zh.replace("; 待重新生成：`./bazelw run //tools/figures -- "
                                  "--only=speed`", "")):
            self.assertIsNotNone(compare_translations.compare(
                "en", GUIDE, "zh", broken), broken)


if __name__ == "__main__":
    unittest.main()
