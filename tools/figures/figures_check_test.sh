#!/usr/bin/env bash
# Every stamped figure in docs/figures is current: its commit is an ancestor of
# HEAD and none of its inputs changed since (tools/figures/check_figures.py).
# Reads the workspace (and its git history) the runfiles' README.md links to.
set -u
readme="$(readlink -f "${TEST_SRCDIR}/${TEST_WORKSPACE}/README.md")"
exec /usr/bin/python3 tools/figures/check_figures.py "$(dirname "$readme")"
