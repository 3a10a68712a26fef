"""Checks the README and docs/ (//tools/docs:docs_test).

Usage: check_docs.py ROOT [--max_readme_lines=N]

1. README.md has at most N lines (300): the README is what a newcomer reads
   in ten minutes; everything else lives in docs/.
2. Every relative link and image in README.md and docs/**/*.md resolves: the
   file or folder exists, and a #fragment names a heading of the target
   (GitHub's anchors: lower case, punctuation dropped, spaces to hyphens,
   -1, -2 for repeats). Links inside fenced code blocks are not links.
Exit 1 listing every problem as file:line.
"""

import os
import re
import sys

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`[^`]*`")


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in "-_ " or
                   (ord(c) > 127 and c.isalpha()))
    return text.replace(" ", "-")


def prose_lines(text):
    """(line number, line) outside fenced code blocks."""
    inside = False
    for number, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            yield number, line


def anchors(text):
    seen = {}
    result = set()
    for _, line in prose_lines(text):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else "%s-%d" % (base, count))
    return result


def links(text):
    """(line number, target) of every Markdown link and image in prose."""
    for number, line in prose_lines(text):
        # `[x](y)` inside inline code is text, not a link.
        for match in LINK.finditer(INLINE_CODE.sub("", line)):
            yield number, match.group(1)


def check_links(root, relative_path, cache):
    problems = []
    path = os.path.join(root, relative_path)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for number, target in links(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, mailto:, ...
            continue
        file_part, _, fragment = target.partition("#")
        if file_part:
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
        else:
            resolved = path
        where = "%s:%d" % (relative_path, number)
        if not os.path.realpath(resolved).startswith(os.path.realpath(root)):
            problems.append("%s: %s leaves the repository" % (where, target))
            continue
        if not os.path.exists(resolved):
            problems.append("%s: %s does not exist" % (where, target))
            continue
        if fragment and resolved.endswith(".md"):
            if resolved not in cache:
                with open(resolved, encoding="utf-8") as f:
                    cache[resolved] = anchors(f.read())
            if fragment not in cache[resolved]:
                problems.append("%s: %s: no heading with anchor #%s in %s" %
                                (where, target, fragment,
                                 os.path.relpath(resolved, root)))
    return problems


def markdown_files(root):
    yield "README.md"
    for directory, folders, files in os.walk(os.path.join(root, "docs")):
        folders.sort()
        for name in sorted(files):
            if name.endswith(".md"):
                yield os.path.relpath(os.path.join(directory, name), root)


def check(root, max_readme_lines):
    problems = []
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        lines = f.read().rstrip("\n").count("\n") + 1
    if lines > max_readme_lines:
        problems.append("README.md: %d lines, more than %d: move the detail to "
                        "docs/ and link it" % (lines, max_readme_lines))
    cache = {}
    for relative_path in markdown_files(root):
        problems += check_links(root, relative_path, cache)
    return problems


def main(argv):
    root = None
    max_readme_lines = 300
    for arg in argv[1:]:
        if arg.startswith("--max_readme_lines="):
            max_readme_lines = int(arg.split("=", 1)[1])
        elif root is None:
            root = arg
        else:
            print(__doc__)
            return 2
    if root is None:
        print(__doc__)
        return 2
    problems = check(root, max_readme_lines)
    for problem in problems:
        print(problem)
    if problems:
        print("FAIL: %d problem(s)" % len(problems))
        return 1
    print("ok: README.md within %d lines; every relative link resolves" %
          max_readme_lines)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
