#!/usr/bin/env bash
# README.md within 300 lines, every relative link in it and in docs/ resolves
# (tools/docs/check_docs.py). Reads the workspace the runfiles' README.md
# links to, so it sees every document without listing them.
set -u
readme="$(readlink -f "${TEST_SRCDIR}/${TEST_WORKSPACE}/README.md")"
exec /usr/bin/python3 tools/docs/check_docs.py "$(dirname "$readme")"
