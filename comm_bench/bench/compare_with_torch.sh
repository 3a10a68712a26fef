#!/usr/bin/env bash
# bazel run wrapper: Debian's /usr/bin/python3 has python3-torch (the pyenv
# python on PATH does not); comm_bench and loopback_ceiling come from this
# target's runfiles. Give --markdown and --raw_dir absolute paths (bazel run
# starts in the runfiles tree).
set -euo pipefail
runfiles="${RUNFILES_DIR:-$0.runfiles}/minitrainbench"
[[ -d "$runfiles" ]] || runfiles="$(pwd)"
exec /usr/bin/python3 "$runfiles/comm_bench/bench/compare_with_torch.py" \
  --comm_bench="$runfiles/comm_bench/comm_bench" \
  --loopback_ceiling="$runfiles/comm_bench/loopback_ceiling" "$@"
