#!/usr/bin/env bash
# SIGTERM keeps its promise (Note [a save that cannot fit], trainer/run/preemption.h):
# 2 real ranks with --checkpoint_dir, rank 1 1.2 s slow every step (so every
# step takes about 1.2 s), --kill_grace=2s, SIGTERM to the launcher once
# step 3 is done:
#  - heartbeat off: the launcher grants only --kill_grace (2 s), and twice
#    the step (2.4 s and more) does not fit: each rank says "a save cannot
#    fit in 2s ...: not saving", announces no checkpoint, and ends at once by
#    the SIGTERM (the launcher exits 143); nothing is published;
#  - heartbeat on (the default): the launcher grants twice the last step and
#    save (3 s and more), the save fits: the ranks announce it, save the step
#    they finish and exit 4, and it is published.
set -euo pipefail
source trainer/tests/cli_test_lib.sh
run=("${tiny[@]}" --steps=8 --timing_warmup_steps=0 --peak_flops=1e12 --nomarkdown --nproc=2
     --log_every=1 --kill_grace=2s --fault=slow:rank=1,ms=1200)

# term NAME ARGS...: starts the trainer, sends its launcher SIGTERM once step
# 3 is logged, and sets $code.
term() {
  local name="$1"
  shift
  code=0
  "$trainer" "${run[@]}" "$@" --out="$out/$name.json" > "$out/$name.out" 2> "$out/$name.err" &
  local pid=$!
  for _ in $(seq 600); do grep -q "step 3/8" "$out/$name.err" && break; sleep 0.05; done
  kill -TERM "$pid"
  wait "$pid" || code=$?
}

term off --checkpoint_dir="$out/off" --heartbeat_timeout=0
[[ "$code" == 143 ]] || { cat "$out/off.err" >&2; fail "off: exit $code, want 143"; }
for rank in 0 1; do
  grep -qE "^\[rank $rank\] rank $rank: SIGTERM \(a preemption notice, or the launcher's teardown\): a save cannot fit in 2s \(twice this step, [0-9.]+s, and the last save, [0-9.]+s, is [0-9.]+s, more than the grace before SIGKILL: --kill_grace\): not saving; ending now$" \
    "$out/off.err" || { cat "$out/off.err" >&2; fail "off: rank $rank does not say the save cannot fit"; }
done
! grep -q "saving a checkpoint" "$out/off.err" || fail "off: a checkpoint was announced"
[[ -z "$(ls -A "$out/off" 2>/dev/null | grep -v '^\.')" ]] || fail "off: something was published: $(ls -A "$out/off")"
grep -qF "launch: received SIGTERM; forwarded it to ranks 0, 1" "$out/off.err" || fail "off: launcher summary"

term on --checkpoint_dir="$out/on"
[[ "$code" == 4 ]] || { cat "$out/on.err" >&2; fail "on: exit $code, want 4"; }
grep -qE "^launch: received SIGTERM: forwarding it to ranks 0, 1 \(SIGKILL after [3-9]s: room for twice the last step and save" \
  "$out/on.err" || { cat "$out/on.err" >&2; fail "on: the grace is not sized from the step"; }
grep -qF "rank 1: SIGTERM (a preemption notice, or the launcher's teardown): finishing this step, then saving a checkpoint of it and exiting 4" \
  "$out/on.err" || { cat "$out/on.err" >&2; fail "on: no notice"; }
! grep -q "cannot fit" "$out/on.err" || fail "on: declined a save that fits"
stopped="$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["preemption"]["step"])' "$out/on.json")"
name="$(printf 'step_%08d' "$stopped")"
[[ "$(cat "$out/on/latest")" == "$name" && -e "$out/on/$name/READY" ]] || fail "on: $name not published"
echo PASS
