#!/bin/bash
# Two rules over the whole checkout (not only this package's files: the
# runfiles' README.md leads back to the workspace it links to):
#   1. no production code outside trainer/strategy/registry.cc compares a
#      strategy name (or a StrategyKind): what depends on the strategy reads
#      its registry entry (tests are exempt);
#   2. nothing refers to a document that is not in the repository (the
#      notes the project was once specified in, its style and toolchain
#      notes, the contributors' guide) or to an issue number: docs/ holds
#      the explanations (docs/design.md).
# Each violation is printed as file:line; the negative cases run the same
# patterns over planted lines, so a pattern that stops matching fails too.
set -u
readme="$(readlink -f "${TEST_SRCDIR}/${TEST_WORKSPACE}/README.md")"
root="$(dirname "$readme")"
cd "$root" || exit 1

strategies='single|ddp|zero1|zero2|fsdp'
name_compare="(==|!=) *\"(${strategies})\"|\"(${strategies})\" *(==|!=)|strategy\(\) *(==|!=)|(==|!=) *StrategyKind::|StrategyKind::k[A-Za-z0-9]+ *(==|!=)"
outside_doc='SPEC(\.md| §)|STYLE\.md|TOOLCHAIN|DEVELOPERS|\bissue [0-9]+|shared/SPEC'

status=0

# Planted lines prove the patterns bite.
for planted in 'if (config.strategy() == "fsdp") {' 'kind != StrategyKind::kDdp' \
               'return name == "zero2";'; do
  echo "$planted" | grep -Eq "$name_compare" || { echo "pattern misses: $planted"; status=1; }
done
# (split with '' so this file does not itself name the documents)
for planted in '// (SP''EC §4)' '// see STY''LE.md' '// TOOL''CHAIN.md says' \
               '// issue 12 item 7' '// DEVEL''OPERS "crash"'; do
  echo "$planted" | grep -Eq "$outside_doc" || { echo "pattern misses: $planted"; status=1; }
done
echo 'if (strategy_name_ok) {' | grep -Eq "$name_compare" && { echo "pattern too wide"; status=1; }

production=$(find . \( -name 'bazel-*' -o -name .git -o -name third_party \
                       -o -name testdata \) -prune -o \
                  \( -name '*.cc' -o -name '*.h' \) -type f -print |
  grep -Ev '_test\.cc$|_test_util\.(cc|h)$|/test_[a-z_]*\.(cc|h)$|_test_lib\.|/rank_runs\.(cc|h)$|/testonly_|trainer/strategy/registry\.cc$')
found=$(grep -nE "$name_compare" $production)
if [[ -n "$found" ]]; then
  echo "strategy-name comparisons outside the registry (read the entry instead):"
  echo "$found"
  status=1
fi

documents=$(find . \( -name 'bazel-*' -o -name .git -o -name gnu_licenses \) -prune -o \
                 -type f \( -name '*.cc' -o -name '*.h' -o -name '*.md' -o -name '*.proto' \
                 -o -name '*.py' -o -name '*.sh' -o -name 'BUILD' -o -name '*.bzl' \
                 -o -name '*.txt' -o -name 'WORKSPACE' -o -name '*.yml' \) -print |
  grep -v '^./trainer/strategy/repo_rules_test\.sh$')
found=$(grep -nE "$outside_doc" $documents | grep -v 'AF_UNSPEC')
if [[ -n "$found" ]]; then
  echo "references to documents outside the repository or to issue numbers:"
  echo "$found"
  status=1
fi
[[ $status -eq 0 ]] && echo "PASS"
exit $status
