"""The runnable blocks of docs/guide.md (and its translation).

A runnable block is a fenced ```sh block directly preceded by a marker line

    <!-- guide: day=2 quick="--steps=3" expect=0 mode=run -->
    <!-- guide: qa=11 quick="--maxbytes=64K" -->

day    the day of the seven-day route it belongs to (1..7), or
qa     the question of the Q&A it answers (1..99); a block names exactly one
       of the two;
quick  arguments appended to the command when the test runs it (the quick form:
       fewer steps, smaller sizes; the reader runs the block as written);
expect the exit code the command must return (default 0: an injected fault
       returns 1, a refused flag 2);
mode   run (default): the test runs it; check: the test only checks that what
       it names exists (a target, a file) — for `bazel test` and benchmarks
       that take longer than a test may.

A block holds one command (continuation lines end in a backslash). Blocks
without a marker are not commands (outputs are ```text blocks).
"""

import re
import shlex

MARKER = re.compile(r"^<!--\s*guide:(?P<attrs>.*?)-->\s*$")
ATTR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


class GuideBlock:
    def __init__(self, line, day, quick, expect, mode, command, qa=None):
        self.line = line        # 1-based line of the marker
        self.day = day          # None for a Q&A block
        self.qa = qa            # the question's number; None for a day's block
        self.quick = quick      # list of arguments
        self.expect = expect
        self.mode = mode
        self.command = command  # the command as written (one line)

    def key(self):
        """What must be identical between the guide and its translation."""
        return (self.day, self.qa, tuple(self.quick), self.expect, self.mode,
                self.command)

    def where(self):
        """"day 3" or "Q11": the part of the guide the block belongs to."""
        return "day %d" % self.day if self.qa is None else "Q%d" % self.qa


def parse(text, path="guide"):
    """Returns the runnable blocks of `text`; raises ValueError naming the
    line of a malformed marker or block."""
    lines = text.split("\n")
    blocks = []
    i = 0
    while i < len(lines):
        match = MARKER.match(lines[i].strip())
        if not match:
            i += 1
            continue
        marker_line = i + 1
        attrs = {}
        for name, value in ATTR.findall(match.group("attrs")):
            if value.startswith('"'):
                value = value[1:-1].replace('\\"', '"')
            attrs[name] = value
        unknown = set(attrs) - {"day", "qa", "quick", "expect", "mode"}
        if unknown:
            raise ValueError("%s:%d: unknown marker attribute(s) %s" %
                             (path, marker_line, ", ".join(sorted(unknown))))
        day = attrs.get("day", "")
        qa = attrs.get("qa", "")
        if ("day" in attrs) == ("qa" in attrs) or \
                ("day" in attrs and not (day.isdigit() and 1 <= int(day) <= 7)) or \
                ("qa" in attrs and not (qa.isdigit() and 1 <= int(qa) <= 99)):
            raise ValueError("%s:%d: the marker needs day=1..7 or qa=1..99 "
                             "(one of the two)" % (path, marker_line))
        mode = attrs.get("mode", "run")
        if mode not in ("run", "check"):
            raise ValueError("%s:%d: mode must be run or check, not %s" %
                             (path, marker_line, mode))
        if i + 1 >= len(lines) or lines[i + 1].strip() != "```sh":
            raise ValueError("%s:%d: a guide marker must be followed by a "
                             "```sh block" % (path, marker_line))
        j = i + 2
        body = []
        while j < len(lines) and lines[j].strip() != "```":
            body.append(lines[j])
            j += 1
        if j == len(lines):
            raise ValueError("%s:%d: unterminated ```sh block" %
                             (path, marker_line))
        command = " ".join(part.rstrip("\\").strip() for part in body
                           if part.strip())
        if not command:
            raise ValueError("%s:%d: empty command block" %
                             (path, marker_line))
        if any(part.strip() and not part.rstrip().endswith("\\")
               for part in body[:-1] if part.strip()):
            raise ValueError("%s:%d: a block holds one command (end "
                             "continued lines with a backslash)" %
                             (path, marker_line))
        blocks.append(GuideBlock(marker_line, int(day) if day else None,
                                 shlex.split(attrs.get("quick", "")),
                                 int(attrs.get("expect", "0")), mode,
                                 command, qa=int(qa) if qa else None))
        i = j + 1
    return blocks


BAZEL_RUN = re.compile(
    r"^(?:\./bazelw|bazel)\s+(?P<verb>run|test|build)\s+(?P<rest>.*)$")


def split_bazel(command):
    """For `./bazelw run [options] //pkg:name [-- ARGS]` returns
    (verb, label, args); (None, None, None) for any other command."""
    match = BAZEL_RUN.match(command)
    if not match:
        return None, None, None
    words = shlex.split(match.group("rest"))
    args = []
    if "--" in words:
        cut = words.index("--")
        words, args = words[:cut], words[cut + 1:]
    labels = [w for w in words if w.startswith("//")]
    if len(labels) != 1:
        raise ValueError("`%s` names %d targets, want one" %
                         (command, len(labels)))
    return match.group("verb"), labels[0], args


def runfiles_path(label):
    """//trainer -> trainer/trainer; //comm_bench:ceiling -> comm_bench/ceiling."""
    body = label[2:]
    if ":" in body:
        package, name = body.split(":", 1)
    else:
        package, name = body, body.rsplit("/", 1)[-1]
    return "%s/%s" % (package, name) if package else name
