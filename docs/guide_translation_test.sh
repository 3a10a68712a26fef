#!/usr/bin/env bash
# The Chinese guide has the English guide's sections and commands.
exec /usr/bin/python3 tools/guide/compare_translations.py docs/guide.md docs/guide.zh.md
