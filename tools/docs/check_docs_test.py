"""Unit test of check_docs.py on planted trees (//tools/docs:check_docs_test)."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_docs  # noqa: E402


def write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", encoding="utf-8") as f:
        f.write(text)


class CheckDocsTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        write(self.root, "README.md",
              "# T\n\nSee [a](docs/a.md#the-b-section) and [dir](docs/).\n")
        write(self.root, "docs/a.md",
              "# A\n\n## The `b` section\n\n## Dup\n\n## Dup\n\n[back](../README.md) "
              "[self](#dup-1) ![img](figures/x.svg) [web](https://example.com/x)\n"
              "```text\n[not a link](nowhere.md)\n```\n")
        write(self.root, "docs/figures/x.svg", "<svg/>")

    def test_a_clean_tree_passes(self):
        self.assertEqual(check_docs.check(self.root, 300), [])

    def test_a_long_readme_fails(self):
        write(self.root, "README.md", "x\n" * 301)
        problems = check_docs.check(self.root, 300)
        self.assertEqual(len(problems), 1)
        self.assertIn("README.md: 301 lines, more than 300", problems[0])

    def test_a_missing_file_fails_naming_the_line(self):
        write(self.root, "docs/b.md", "# B\n\ntext\nsee [gone](gone.md)\n")
        problems = check_docs.check(self.root, 300)
        self.assertEqual(problems, ["docs/b.md:4: gone.md does not exist"])

    def test_a_missing_anchor_fails(self):
        write(self.root, "docs/b.md", "# B\n[x](a.md#the-c-section)\n")
        problems = check_docs.check(self.root, 300)
        self.assertEqual(len(problems), 1)
        self.assertIn("no heading with anchor #the-c-section in docs/a.md",
                      problems[0])

    def test_a_link_out_of_the_repository_fails(self):
        write(self.root, "docs/b.md", "# B\n[x](../../elsewhere.md)\n")
        problems = check_docs.check(self.root, 300)
        self.assertEqual(len(problems), 1)
        self.assertIn("leaves the repository", problems[0])

    def add_figure(self, stamped=True):
        write(self.root, "docs/figures/demo.md",
              "# demo\n\n| op | bytes | GB/s |\n| --- | --- | --- |\n"
              "| mlp | 6144/6144 B | 0.51 |\n| all | 1,048,576 | 2.17 |\n")
        write(self.root, "docs/figures/demo.json",
              '{"stamp": {"commit": "%s"}}' % ("ab" * 20) if stamped else '{"name": "demo"}')

    def test_quoted_numbers_found_in_the_figure_pass(self):
        self.add_figure()
        write(self.root, "docs/b.md",
              "# B\n[`mlp` sends 6144 B at 0.51 GB/s](figures/demo.md), "
              "[1048576 bytes](figures/demo.md#demo) and [the table](figures/demo.md)\n")
        self.assertEqual(check_docs.check(self.root, 300), [])

    def test_a_quoted_number_the_figure_lacks_fails(self):
        self.add_figure()
        # 2.1 is not 2.17, and 51 is not 0.51: numbers match whole.
        write(self.root, "docs/b.md", "# B\n\n[2.1 GB/s, 51](figures/demo.md)\n")
        problems = check_docs.check(self.root, 300)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("docs/b.md:3: quotes 2.1 51 from figures/demo.md, which does not "
                      "contain 2.1, 51", problems[0])

    def test_quoting_an_unstamped_figure_fails(self):
        self.add_figure(stamped=False)
        write(self.root, "docs/b.md", "# B\n[0.51 GB/s](figures/demo.md)\n")
        problems = check_docs.check(self.root, 300)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("not a stamped figure", problems[0])

    def test_figure_quotes_are_listed_in_order(self):
        text = "[a 1.5x](figures/f.md) x [no numbers](figures/f.md) [3 B](../docs/figures/g.md)\n"
        self.assertEqual(check_docs.figure_quotes(text),
                         [(1, "figures/f.md", ["1.5"]), (1, "../docs/figures/g.md", ["3"])])

    def add_registry(self):
        write(self.root, "tools/figures/registry.py",
              'FIGURES = [{"name": "demo"}, {"name": "later"}, {"name": "other"}]\n')

    QA = ("# Guide\n\n## Questions\n\n**Q1. How fast?**\nTokens/s rose 1.08–1.15× and "
          "the step took 5 ms at 4 ranks\n[load 9; %s]\n\n**Q2. How?**\nBy design, "
          "`--steps=2`, 4 ranks, 2 × 8 samples.\n\n## Notes\n\n3.5 ms outside any answer.\n")
    MARK = "to regenerate: `./bazelw run //tools/figures -- --only=%s`"

    def test_marked_and_quoted_answers_pass(self):
        self.add_registry()
        self.add_figure()
        write(self.root, "docs/g.md", self.QA % (self.MARK % "later,other"))
        write(self.root, "docs/h.md", (self.QA % "[0.51 GB/s](figures/demo.md)")
              .replace("1.08–1.15×", "[2.17](figures/demo.md)")
              .replace("5 ms", "[6144 B](figures/demo.md)"))
        self.assertEqual(check_docs.check(self.root, 300), [])
        self.assertEqual(check_docs.answer_marks(self.QA % (self.MARK % "later,other")),
                         [(1, ["later", "other"]), (2, [])])

    def test_an_unmarked_measured_number_fails_naming_the_answer(self):
        self.add_registry()
        write(self.root, "docs/g.md", self.QA % "measured by hand")
        problems = check_docs.check(self.root, 300)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("docs/g.md:5: Q1 quotes 1.08–1.15×, 5 ms from no figure", problems[0])

    def test_a_mark_without_its_command_or_registered_figure_fails(self):
        self.add_registry()
        for mark, words in (("to regenerate", "must name its command"),
                            (self.MARK % "gone", "figure gone, which tools/figures/registry.py"),
                            (self.MARK % "demo", "figure demo is stamped now")):
            self.add_figure()
            write(self.root, "docs/g.md", self.QA % mark)
            problems = check_docs.check(self.root, 300)
            self.assertTrue(any(words in p for p in problems), (mark, problems))

    def test_a_readme_row_marked_without_its_command_fails(self):
        self.add_registry()
        write(self.root, "README.md", "# T\n\n| x | `later` (to regenerate) |\n")
        problems = check_docs.check(self.root, 300)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("README.md:3: a (to regenerate) mark must name its command", problems[0])

    def test_slugs_follow_github(self):
        self.assertEqual(check_docs.slug("DDP (`--strategy=ddp`, the default)"),
                         "ddp---strategyddp-the-default")
        self.assertEqual(check_docs.slug("Exact mode: the same bits on any layout"),
                         "exact-mode-the-same-bits-on-any-layout")
        self.assertEqual(check_docs.slug("comm_bench: every op against torch.distributed"),
                         "comm_bench-every-op-against-torchdistributed")


if __name__ == "__main__":
    unittest.main()
