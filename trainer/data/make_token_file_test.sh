#!/usr/bin/env bash
# make_token_file: usage errors exit 2 with one line, before anything is
# written; an --out naming one of its inputs (however spelled) is refused and
# the input is left as it was; a good run writes a token file.
set -euo pipefail

tool="$(pwd)/trainer/make_token_file"
dir="$TEST_TMPDIR/work"
mkdir -p "$dir/sub"
printf 'hello tokens\n' > "$dir/a.txt"
printf 'more\n' > "$dir/b.txt"
: > "$dir/empty.txt"

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect CODE SUBSTRING ARGS...
expect() {
  local code="$1" substring="$2"
  shift 2
  local actual=0
  "$tool" "$@" > "$dir/stdout" 2> "$dir/stderr" || actual=$?
  [[ "$actual" == "$code" ]] || { cat "$dir/stderr" >&2; fail "exit $actual, want $code: $*"; }
  [[ -z "$substring" ]] || grep -qF -- "$substring" "$dir/stderr" || { cat "$dir/stderr" >&2; fail "stderr lacks '$substring': $*"; }
  [[ "$code" == 0 || "$(wc -l < "$dir/stderr")" == 1 ]] || { cat "$dir/stderr" >&2; fail "not one line: $*"; }
}

expect 2 "needs --out=PATH and at least one input FILE"
expect 2 "needs --out=PATH and at least one input FILE" --out="$dir/x.bin"
expect 2 "needs --out=PATH and at least one input FILE" "$dir/a.txt"
expect 2 "unknown flag --no_such_flag" --no_such_flag=1 --out="$dir/x.bin" "$dir/a.txt"
expect 2 "no_such.txt" --out="$dir/x.bin" "$dir/no_such.txt"
expect 2 "the inputs hold no bytes" --out="$dir/x.bin" "$dir/empty.txt"
expect 2 "--out=/proc/no_such_dir/x.bin: cannot write there" --out=/proc/no_such_dir/x.bin "$dir/a.txt"
[[ ! -e "$dir/x.bin" ]] || fail "a refused run wrote its --out"

# --out is an input, spelled differently: refused, the input is intact.
before=$(sha256sum < "$dir/b.txt")
expect 2 "--out=$dir/sub/../b.txt is the same file as input $dir/b.txt ($dir/b.txt): refusing to overwrite an input" \
  --out="$dir/sub/../b.txt" "$dir/a.txt" "$dir/b.txt"
ln "$dir/b.txt" "$dir/hard.txt"
expect 2 "is the same file as input $dir/b.txt" --out="$dir/hard.txt" "$dir/a.txt" "$dir/b.txt"
[[ "$(sha256sum < "$dir/b.txt")" == "$before" ]] || fail "an input was changed"

expect 0 "" --out="$dir/tokens.bin" "$dir/a.txt" "$dir/b.txt"
grep -qF "wrote 18 tokens from 2 file(s) to $dir/tokens.bin" "$dir/stdout" || { cat "$dir/stdout" >&2; fail "no summary line"; }
# An llm.c token file: 1024-byte header, then 2 bytes per token.
[[ "$(stat -c %s "$dir/tokens.bin")" == $((1024 + 2 * 18)) ]] || fail "wrong token file size"
echo "PASS"
