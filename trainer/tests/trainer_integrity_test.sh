#!/usr/bin/env bash
# Nothing silently wrong, with real processes (docs/checkpoint.md, "Data
# identity", "Ranks agree"; docs/errors.md): an output onto an input is
# refused and the input is intact; a resume on another data file is refused
# naming what differs, and continues with --allow_data_change, recorded in the
# result; ranks started by hand with different --lr refuse before step 1,
# naming the flag and the ranks; a refused run creates nothing.
set -euo pipefail
source trainer/tests/cli_test_lib.sh
data="$out/tokens.bin"
cp testdata/gnu_licenses.bin "$data"
chmod u+w "$data"
run=("${tiny[@]}" --vocab_size=256 --data="$data" --nproc=1 --nomarkdown)

# An output that is the input, by another spelling or a hard link: refused.
before=$(sha256sum < "$data")
expect 2 "--out=$out/./tokens.bin is the same file as --data" "${run[@]}" --out="$out/./tokens.bin"
ln "$data" "$out/hard.bin"
expect 2 "is the same file as --data" "${run[@]}" --out="$out/hard.bin"
[[ "$(sha256sum < "$data")" == "$before" ]] || fail "the data file was changed"

# A checkpointed run, then `latest` as an output: refused.
ck="$out/ck"
expect 0 "" "${run[@]}" --checkpoint_dir="$ck" --save_every=3 --out="$out/first.json"
expect 2 "--checkpoint_dir's \`latest\`" "${run[@]}" --steps=5 --checkpoint_dir="$ck" \
  --save_every=1 --resume=latest --out="$ck/latest"
[[ "$(cat "$ck/latest")" == "step_00000003" ]] || fail "latest was overwritten"

# Another corpus behind the same path: refused before any rank starts, and
# nothing is created for the refused run.
printf 'A' | dd of="$data" bs=1 seek=2000 conv=notrunc 2>/dev/null
expect 2 "was trained on other data: token file sha256: checkpoint " "${run[@]}" --steps=5 \
  --checkpoint_dir="$ck" --save_every=1 --resume=latest --out="$out/new/second.json"
grep -qF -- "give --allow_data_change" "$out/stderr" || fail "no way forward named"
[[ ! -e "$out/new" ]] || fail "a refused run created its output directory"
expect 0 "--allow_data_change: continuing on other data (token file sha256" "${run[@]}" \
  --steps=5 --checkpoint_dir="$ck" --save_every=1 --resume=latest --allow_data_change \
  --out="$out/second.json"
grep -q '"data_changes": \[' "$out/second.json" || fail "the data change is not in the result"

# Ranks started by hand with different --lr: every rank refuses before step 1.
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
  "$trainer" "${tiny[@]}" --lr=0.002 --out="$out/hand.json" > "$out/rank1.log" 2>&1 &
rank1=$!
code0=0
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
  "$trainer" "${tiny[@]}" --lr=0.001 --out="$out/hand.json" > "$out/rank0.log" 2>&1 || code0=$?
code1=0
wait "$rank1" || code1=$?
[[ "$code0" != 0 && "$code1" != 0 ]] || { cat "$out/rank0.log" "$out/rank1.log" >&2; fail "ranks with different --lr exited $code0 and $code1"; }
for r in 0 1; do
  grep -qF "ranks disagree before step 1" "$out/rank$r.log" || { cat "$out/rank$r.log" >&2; fail "rank $r did not name the disagreement"; }
  grep -qF -- "--lr: rank 0 0.001, rank 1 0.002" "$out/rank$r.log" || { cat "$out/rank$r.log" >&2; fail "rank $r did not name --lr and the ranks"; }
done
! grep -q "step 1/" "$out/rank0.log" || fail "a step ran"
[[ ! -e "$out/hand.json" ]] || fail "a refused run wrote a result"
echo PASS
