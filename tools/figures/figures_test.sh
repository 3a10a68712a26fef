#!/usr/bin/env bash
exec /usr/bin/python3 tools/figures/figures_test.py
