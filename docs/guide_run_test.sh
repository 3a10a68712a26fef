#!/usr/bin/env bash
# Runs the learning guide's (docs/guide.md) commands with each block's quick
# arguments (tools/guide/run_guide.py): --day=N one day of the seven-day
# route, --qa the commands of the questions and answers.
exec /usr/bin/python3 tools/guide/run_guide.py docs/guide.md "$@"
