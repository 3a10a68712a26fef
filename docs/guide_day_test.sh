#!/usr/bin/env bash
# Runs day $1 of the learning guide's seven-day route (docs/guide.md) with
# each block's quick arguments: tools/guide/run_guide.py.
exec /usr/bin/python3 tools/guide/run_guide.py docs/guide.md --day="$1"
