"""Fails when a stamped figure is stale (//tools/figures:figures_check_test).

Usage: check_figures.py ROOT [--figures_dir=DIR]

Every input path, target and script the registry names exists. For every
NAME.json with a figure stamp in DIR (default ROOT/docs/figures):
it parses, its stamp has every field, NAME is in tools/figures/registry.py
with the command that made it, NAME.md exists and names the commit, the
commit is an ancestor of HEAD, and none of the figure's inputs changed
between that commit and HEAD (nor was dirty when it ran). Exit 1 listing
every problem with the command that regenerates the figure.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import figures_lib  # noqa: E402
import registry  # noqa: E402


def main(argv):
    root = None
    figures_dir = None
    for arg in argv[1:]:
        if arg.startswith("--figures_dir="):
            figures_dir = arg.split("=", 1)[1]
        elif root is None:
            root = arg
        else:
            print(__doc__)
            return 2
    if root is None:
        print(__doc__)
        return 2
    figures_dir = figures_dir or os.path.join(root, "docs", "figures")
    problems = figures_lib.registry_problems(root, registry.FIGURES)
    problems += figures_lib.check_folder(root, figures_dir, registry.by_name())
    for problem in problems:
        print(problem)
    if problems:
        print("FAIL: %d problem(s)" % len(problems))
        return 1
    stamped = [e for e in os.listdir(figures_dir) if e.endswith(".json")]
    print("ok: every stamped figure in %s is current (%d JSON files looked at)" %
          (figures_dir, len(stamped)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
