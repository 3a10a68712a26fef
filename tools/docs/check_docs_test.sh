#!/usr/bin/env bash
exec /usr/bin/python3 tools/docs/check_docs_test.py
