"""Runs the seven-day route of docs/guide.md, as //docs:guide_day<N>_test does,
and the commands of its Q&A, as //docs:guide_qa_test does.

Usage: run_guide.py GUIDE (--day=N | --qa) [--runfiles=DIR]

--day=N: each runnable block of day N (tools/guide/guide_blocks.py) runs in
order in one scratch checkout ($TEST_TMPDIR/checkout, with testdata/ linked
in), as a reader would run them one after another: later commands may read
what earlier ones wrote (results/..., checkpoints).
--qa: each Q&A block (qa=N) runs alone in a fresh scratch checkout of its own
(an answer's command stands by itself); under Bazel's test sharding
(TEST_TOTAL_SHARDS, TEST_SHARD_INDEX) shard i runs blocks i, i + total, ... `./bazelw run //pkg:name -- ARGS`
becomes the built binary from the runfiles (Bazel cannot run inside a test)
with BUILD_WORKSPACE_DIRECTORY set to the scratch checkout, ARGS followed by
the block's quick arguments (absl flags: the last value wins). Other commands
run under bash in the scratch checkout. mode=check blocks only check that the
targets and files they name exist. Exit 1 naming the line of the first block
that fails.
"""

import os
import re
import shlex
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import guide_blocks  # noqa: E402

PATH_WORD = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_./-]*/[A-Za-z0-9_.-]+$")
TIMEOUT_S = 180


def fail(block, guide, message):
    print("FAIL %s:%d (%s): %s\n  command: %s" %
          (guide, block.line, block.where(), message, block.command))
    sys.exit(1)


def check_block(block, guide, runfiles):
    verb, label, _ = guide_blocks.split_bazel(block.command)
    if label is not None and label.endswith("..."):
        return  # a target pattern (`bazel test //...`), not one target
    if label is not None:
        path = os.path.join(runfiles, guide_blocks.runfiles_path(label))
        if not os.path.exists(path):
            fail(block, guide, "%s names %s, which is not built for this test "
                 "(it no longer exists, or docs/BUILD lacks it in data)" %
                 (verb, label))
        return
    for word in shlex.split(block.command):
        if "=" in word:
            word = word.split("=", 1)[1]
        if PATH_WORD.match(word) and not word.startswith("results/") and \
                not os.path.exists(os.path.join(runfiles, word)):
            fail(block, guide, "names %s, which does not exist (or docs/BUILD "
                 "lacks it in data)" % word)


def run_block(block, guide, runfiles, checkout, env):
    verb, label, args = guide_blocks.split_bazel(block.command)
    if verb is not None and verb != "run":
        fail(block, guide, "`bazel %s` cannot run inside a test: mark the "
             "block mode=check" % verb)
    if label is not None:
        binary = os.path.join(runfiles, guide_blocks.runfiles_path(label))
        if not os.path.exists(binary):
            fail(block, guide, "%s is not built for this test (it no longer "
                 "exists, or docs/BUILD lacks it in data)" % label)
        argv = [binary] + args + block.quick
        cwd = runfiles
    else:
        argv = ["bash", "-c", " ".join([block.command] +
                                       [shlex.quote(q) for q in block.quick])]
        cwd = checkout
    started = time.time()
    try:
        done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        fail(block, guide, "still running after %d s" % TIMEOUT_S)
    output = done.stdout.decode("utf-8", "replace")
    if done.returncode != block.expect:
        print(output[-4000:])
        fail(block, guide, "exit %d, the guide expects %d" %
             (done.returncode, block.expect))
    print("ok %s:%d %s (%.1f s): %s" %
          (guide, block.line, block.where(), time.time() - started,
           " ".join(argv[1:] if label else [block.command])[:200]))


def scratch_checkout(runfiles, name):
    """$TEST_TMPDIR/NAME with testdata/ linked in, as a reader's checkout."""
    checkout = os.path.join(os.environ.get("TEST_TMPDIR", "/tmp"), name)
    os.makedirs(checkout, exist_ok=True)
    link = os.path.join(checkout, "testdata")
    if not os.path.lexists(link):
        os.symlink(os.path.join(runfiles, "testdata"), link)
    return checkout


def shard(blocks):
    """This test shard's share of `blocks` (all of them when unsharded)."""
    total = int(os.environ.get("TEST_TOTAL_SHARDS", "1"))
    index = int(os.environ.get("TEST_SHARD_INDEX", "0"))
    status = os.environ.get("TEST_SHARD_STATUS_FILE")
    if status:
        open(status, "a").close()  # tells Bazel this test knows sharding
    return blocks[index::total]


def main(argv):
    guide = None
    day = None
    qa = False
    runfiles = os.getcwd()
    for arg in argv[1:]:
        if arg.startswith("--day="):
            day = int(arg.split("=", 1)[1])
        elif arg == "--qa":
            qa = True
        elif arg.startswith("--runfiles="):
            runfiles = os.path.abspath(arg.split("=", 1)[1])
        else:
            guide = arg
    if guide is None or (day is None) == (not qa):
        print(__doc__)
        return 2
    with open(os.path.join(runfiles, guide), encoding="utf-8") as f:
        blocks = guide_blocks.parse(f.read(), guide)
    if qa:
        blocks = [b for b in blocks if b.qa is not None]
        if not blocks:
            print("FAIL %s: the Q&A has no runnable blocks" % guide)
            return 1
        blocks = shard(blocks)
    else:
        blocks = [b for b in blocks if b.day == day]
        if not blocks:
            print("FAIL %s: day %d has no runnable blocks" % (guide, day))
            return 1
        checkout = scratch_checkout(runfiles, "checkout")
    env = dict(os.environ)
    for variable in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR",
                     "MASTER_PORT"):
        env.pop(variable, None)
    for block in blocks:
        if qa:
            checkout = scratch_checkout(runfiles, "checkout_line%d" % block.line)
        env["BUILD_WORKSPACE_DIRECTORY"] = checkout
        if block.mode == "check":
            check_block(block, guide, runfiles)
            print("ok %s:%d %s (checked): %s" %
                  (guide, block.line, block.where(), block.command[:200]))
        else:
            run_block(block, guide, runfiles, checkout, env)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
