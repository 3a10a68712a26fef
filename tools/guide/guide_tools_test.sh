#!/usr/bin/env bash
# The block parser and the translation check, negative cases included.
exec /usr/bin/python3 tools/guide/guide_tools_test.py
