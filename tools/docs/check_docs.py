"""Checks the README and docs/ (//tools/docs:docs_test).

Usage: check_docs.py ROOT [--max_readme_lines=N]

1. README.md has at most N lines (300): the README is what a newcomer reads
   in ten minutes; everything else lives in docs/.
2. Every relative link and image in README.md and docs/**/*.md resolves: the
   file or folder exists, and a #fragment names a heading of the target
   (GitHub's anchors: lower case, punctuation dropped, spaces to hyphens,
   -1, -2 for repeats). Links inside fenced code blocks are not links.
3. Every number quoted from a figure is in the figure: a link to
   docs/figures/NAME.md whose text holds numbers ("[2.17 GB/s at 64
   MiB](figures/comm_vs_torch.md)") is a quote, and each number of its text
   must appear as a number in that stamped file (NAME.md and NAME.json, the
   latter with its stamp), so a regenerated figure that moved fails the
   document that quotes it until the quote is updated.
4. Every measured number of a question's answer comes from a figure: in an
   answer (a paragraph that starts `**Q<N>.`, the learning guide's Q&A), a
   number with a unit of measure (%, ×, ms, s, B, MB, MiB, KiB, GB/s,
   GFLOP/s, tokens/s; "2 × 8" is a product, not a ratio) outside figure
   quotes and inline code needs the
   answer to carry a mark naming the figure that will produce it,
   "(to regenerate: `./bazelw run //tools/figures -- --only=NAME`)"
   ("（待重新生成：`...`）" in the translation). Everywhere, a mark must name
   that exact command with a figure of tools/figures/registry.py that is not
   stamped yet: once docs/figures/NAME.json carries a stamp, the numbers are
   to be quoted from it (rule 3) and the mark goes.
Exit 1 listing every problem as file:line.
"""

import json
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


NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def numbers(text):
    """The numbers written in `text`, as written ("0.51", "6144", "1e-5")."""
    return [n.lstrip("+") for n in NUMBER.findall(text.replace(",", ""))]


def figure_quotes(text):
    """(line, figure target, numbers) for every link into figures/ whose text
    holds numbers; the target is the link's path as written."""
    quotes = []
    for number, line in prose_lines(text):
        for match in LINK.finditer(line):
            target = match.group(1).partition("#")[0]
            if not re.search(r"(^|/)figures/[\w.-]+\.md$", target) or \
                    target.endswith("/README.md"):
                continue
            label = match.group(0)[match.group(0).index("[") + 1:match.group(0).rindex("](")]
            found = numbers(re.sub(r"`([^`]*)`", r"\1", label))
            if found:
                quotes.append((number, target, found))
    return quotes


QUESTION = re.compile(r"^\*\*Q(\d+)\.")
MEASURED = re.compile(
    r"(?<![\w.\-/^])\d+(?:\.\d+)?k?(?:\s*(?:–|-|→)\s*\d+(?:\.\d+)?k?)?\s*"
    r"(?:%|×(?!\s*\d)|(?:ms|s|B|MB|MiB|KiB|GiB|GB/s|GFLOP/s|tokens/s)(?![\w/]))")
MARK_WORDS = re.compile(r"to regenerate|待重新生成")
MARK = re.compile(r"(?:to regenerate: |待重新生成：)"
                  r"`\./bazelw run //tools/figures -- --only=([\w,-]+)`")


def answers(text):
    """(first line, question number, [(line, prose line)]) of every answer:
    a paragraph opening with `**Q<N>.`, up to the next answer or heading."""
    found = []
    for number, line in prose_lines(text):
        question = QUESTION.match(line)
        if question:
            found.append((number, int(question.group(1)), []))
        elif HEADING.match(line):
            if found and found[-1][2] is not None:
                found[-1] = found[-1][:2] + (found[-1][2],)
            found.append((number, None, None))  # closes the previous answer
            continue
        if found and found[-1][2] is not None:
            found[-1][2].append((number, line))
    return [a for a in found if a[1] is not None]


def answer_marks(text):
    """(question, [figure names its marks name]) per answer, in order."""
    return [(question, [name for _, line in lines for names in MARK.findall(line)
                        for name in names.split(",")])
            for _, question, lines in answers(text)]


def unquoted_measurements(line):
    """The measured numbers of a prose line outside figure quotes, link
    targets and inline code ("1.08–1.15×", "3.21 MiB")."""
    def drop(match):
        target = match.group(1).partition("#")[0]
        if re.search(r"(^|/)figures/[\w.-]+\.md$", target):
            return ""  # a figure quote: checked by rule 3
        label = match.group(0)
        return label[label.index("[") + 1:label.rindex("](")]
    text = LINK.sub(drop, line)
    text = INLINE_CODE.sub("", text)
    return [m.group(0) for m in MEASURED.finditer(text)]


def load_registry(root):
    """The figure names of ROOT's tools/figures/registry.py (None: no registry)."""
    path = os.path.join(root, "tools", "figures", "registry.py")
    if not os.path.exists(path):
        return None
    namespace = {}
    with open(path, encoding="utf-8") as f:
        exec(compile(f.read(), path, "exec"), namespace)  # noqa: S102 (our own file)
    return set(figure["name"] for figure in namespace["FIGURES"])


def stamped(root, name):
    try:
        with open(os.path.join(root, "docs", "figures", name + ".json"), encoding="utf-8") as f:
            document = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(document.get("stamp"), dict) and bool(document["stamp"].get("commit"))


def check_marks(root, relative_path, registry):
    """Rule 4: answers' measured numbers are quoted or marked; every mark
    names a registered figure not stamped yet."""
    problems = []
    with open(os.path.join(root, relative_path), encoding="utf-8") as f:
        text = f.read()
    for number, line in prose_lines(text):
        where = "%s:%d" % (relative_path, number)
        words = len(MARK_WORDS.findall(line))
        marks = MARK.findall(line)
        names = [name for mark in marks for name in mark.split(",")]
        if words > len(marks):
            problems.append("%s: a (to regenerate) mark must name its command: (to regenerate: "
                            "`./bazelw run //tools/figures -- --only=NAME`)" % where)
        for name in names:
            if registry is None or name not in registry:
                problems.append("%s: the mark names figure %s, which tools/figures/registry.py "
                                "does not list" % (where, name))
            elif stamped(root, name):
                problems.append("%s: figure %s is stamped now (docs/figures/%s.md): quote its "
                                "numbers as links into it and drop the mark" %
                                (where, name, name))
    for first, question, lines in answers(text):
        measured = [m for _, line in lines for m in unquoted_measurements(line)]
        marked = [n for _, line in lines for n in MARK.findall(line)]
        if measured and not marked:
            problems.append("%s:%d: Q%d quotes %s from no figure: link each number to its "
                            "stamped figure (docs/figures/NAME.md) or mark the answer (to "
                            "regenerate: `./bazelw run //tools/figures -- --only=NAME`)" %
                            (relative_path, first, question, ", ".join(measured)))
    return problems


def check_quotes(root, relative_path, cache):
    problems = []
    path = os.path.join(root, relative_path)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for number, target, quoted in figure_quotes(text):
        figure_md = os.path.normpath(os.path.join(os.path.dirname(path), target))
        figure_json = figure_md[:-len(".md")] + ".json"
        where = "%s:%d" % (relative_path, number)
        if figure_md not in cache:
            try:
                with open(figure_md, encoding="utf-8") as f:
                    figure_text = f.read()
                with open(figure_json, encoding="utf-8") as f:
                    document = json.load(f)
                stamped = isinstance(document.get("stamp"), dict) and \
                    document["stamp"].get("commit")
                cache[figure_md] = set(numbers(figure_text)) if stamped else None
            except (OSError, ValueError):
                cache[figure_md] = None
        if cache[figure_md] is None:
            problems.append("%s: quotes %s, which is not a stamped figure (no %s with a stamp)" %
                            (where, target, os.path.relpath(figure_json, root)))
            continue
        missing = [n for n in quoted if n not in cache[figure_md]]
        if missing:
            problems.append("%s: quotes %s from %s, which does not contain %s: update the "
                            "quote to the figure" % (where, " ".join(quoted), target,
                                                     ", ".join(missing)))
    return problems


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
    cache, figures = {}, {}
    registry = load_registry(root)
    for relative_path in markdown_files(root):
        problems += check_links(root, relative_path, cache)
        problems += check_quotes(root, relative_path, figures)
        problems += check_marks(root, relative_path, registry)
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
    print("ok: README.md within %d lines; every relative link resolves; every "
          "quoted figure number is in its figure; every answer's measured number is "
          "quoted or marked to regenerate" % max_readme_lines)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
