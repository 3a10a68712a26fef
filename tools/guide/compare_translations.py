"""Checks that a guide and its translation stay in step (//docs:guide_translation_test).

Usage: compare_translations.py GUIDE TRANSLATION

Same section structure (the sequence of heading levels), the same runnable
blocks (tools/guide/guide_blocks.py) in the same order with the same day,
quick arguments, expected exit code, mode and command, and the same ```text
and ```sh blocks otherwise (commands and outputs are not translated), and the
same numbers quoted from the same figures in the same order (links into
docs/figures/, tools/docs/check_docs.py), and the same answers marked to be
regenerated from the same figures. Exit 1 naming the first difference.
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs"))
import check_docs  # noqa: E402
import guide_blocks  # noqa: E402

HEADING = re.compile(r"^(#{1,6})\s")
FENCE = re.compile(r"^```(\w*)\s*$")


def structure(text):
    """Heading levels and fenced code blocks (language, body), in order."""
    headings, fences = [], []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line.strip())
        if fence and fence.group(1):
            j = i + 1
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            fences.append((i + 1, fence.group(1), "\n".join(lines[i + 1:j])))
            i = j + 1
            continue
        heading = HEADING.match(line)
        if heading:
            headings.append((i + 1, len(heading.group(1))))
        i += 1
    return headings, fences


def compare(left_name, left, right_name, right):
    """Returns the first difference as a message, or None."""
    left_blocks = guide_blocks.parse(left, left_name)
    right_blocks = guide_blocks.parse(right, right_name)
    for index, (a, b) in enumerate(zip(left_blocks, right_blocks)):
        if a.key() != b.key():
            return ("runnable block %d differs: %s:%d `%s` (day %d) vs %s:%d "
                    "`%s` (day %d)" % (index + 1, left_name, a.line, a.command,
                                       a.day, right_name, b.line, b.command,
                                       b.day))
    if len(left_blocks) != len(right_blocks):
        return "%s has %d runnable blocks, %s has %d" % (
            left_name, len(left_blocks), right_name, len(right_blocks))
    left_quotes = check_docs.figure_quotes(left)
    right_quotes = check_docs.figure_quotes(right)
    for (la, target_a, numbers_a), (lb, target_b, numbers_b) in zip(left_quotes,
                                                                    right_quotes):
        if (target_a, numbers_a) != (target_b, numbers_b):
            return ("quoted figure numbers differ: %s:%d quotes %s from %s, %s:%d quotes "
                    "%s from %s" % (left_name, la, " ".join(numbers_a), target_a,
                                    right_name, lb, " ".join(numbers_b), target_b))
    if len(left_quotes) != len(right_quotes):
        return "%s quotes figures %d times, %s %d times" % (
            left_name, len(left_quotes), right_name, len(right_quotes))
    left_marks = check_docs.answer_marks(left)
    right_marks = check_docs.answer_marks(right)
    if left_marks != right_marks:
        for (qa, names_a), (qb, names_b) in zip(left_marks, right_marks):
            if (qa, names_a) != (qb, names_b):
                return ("Q%d is marked to regenerate %s in %s, Q%d %s in %s" %
                        (qa, ",".join(names_a) or "nothing", left_name, qb,
                         ",".join(names_b) or "nothing", right_name))
        return "%s has %d answers, %s has %d" % (left_name, len(left_marks),
                                                  right_name, len(right_marks))
    left_headings, left_fences = structure(left)
    right_headings, right_fences = structure(right)
    for (la, level_a), (lb, level_b) in zip(left_headings, right_headings):
        if level_a != level_b:
            return "heading at %s:%d is level %d, at %s:%d level %d" % (
                left_name, la, level_a, right_name, lb, level_b)
    if len(left_headings) != len(right_headings):
        return "%s has %d headings, %s has %d" % (
            left_name, len(left_headings), right_name, len(right_headings))
    for (la, lang_a, body_a), (lb, lang_b, body_b) in zip(left_fences,
                                                          right_fences):
        if (lang_a, body_a) != (lang_b, body_b):
            return "code block at %s:%d differs from %s:%d" % (
                left_name, la, right_name, lb)
    if len(left_fences) != len(right_fences):
        return "%s has %d code blocks, %s has %d" % (
            left_name, len(left_fences), right_name, len(right_fences))
    return None


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    texts = []
    for path in argv[1:]:
        with open(path, encoding="utf-8") as f:
            texts.append(f.read())
    try:
        difference = compare(argv[1], texts[0], argv[2], texts[1])
    except ValueError as error:
        print("FAIL %s" % error)
        return 1
    if difference:
        print("FAIL %s" % difference)
        return 1
    print("ok: %s and %s have the same sections and blocks" % tuple(argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
