#!/usr/bin/env bash
# ./bazelw run //tools/figures -- [--only=NAME,...] [--list] ...: see figures.py.
here="$(dirname "$0")"
if [[ -f "$here/figures.py" ]]; then
  exec /usr/bin/python3 "$here/figures.py" "$@"
fi
exec /usr/bin/python3 "${RUNFILES_DIR:-$0.runfiles}/minitrainbench/tools/figures/figures.py" "$@"
