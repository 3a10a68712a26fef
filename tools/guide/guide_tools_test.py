"""Tests of the guide's block format and translation check (negative cases
included): //tools/guide:guide_tools_test."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
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


class TranslationTest(unittest.TestCase):

    def translate(self, text):
        return (text.replace("Run it:", "运行：").replace("# Guide", "# 指南")
                .replace("Day 1", "第一天").replace("Day 2", "第二天"))

    def test_a_faithful_translation_passes(self):
        self.assertIsNone(compare_translations.compare(
            "en", GUIDE, "zh", self.translate(GUIDE)))

    def test_a_changed_command_or_quick_form_or_section_fails(self):
        zh = self.translate(GUIDE)
        for broken in (zh.replace("--strategy=zero1", "--strategy=zero2"),
                       zh.replace('--steps=3 ', '--steps=4 '),
                       zh.replace("## 第二天", "### 第二天"),
                       zh.replace("step 1/3", "step 1/4"),
                       zh.replace("<!-- guide: day=2 expect=1 -->\n", ""),
                       zh.replace("6144 B", "6145 B"),
                       zh.replace("[`mlp` sends 6144 B in 2 calls](figures/tp_check.md)",
                                  "`mlp` sends 6144 B in 2 calls")):
            self.assertIsNotNone(compare_translations.compare(
                "en", GUIDE, "zh", broken), broken)


if __name__ == "__main__":
    unittest.main()
