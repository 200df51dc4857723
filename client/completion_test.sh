#!/usr/bin/env bash
# `baton completion bash` in a real bash: sources the script and calls its completion
# function as bash's programmable completion would (COMP_WORDS, COMP_CWORD), with a stub
# `baton` first on PATH that answers `jobs -o name` with two job ids; then the zsh script
# the same way in a real zsh.
set -euo pipefail

BATON="${TEST_SRCDIR}/${TEST_WORKSPACE}/client/baton"
TMP="${TEST_TMPDIR:-$(mktemp -d)}"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

"$BATON" completion bash >"$TMP/baton.bash"
"$BATON" completion zsh >"$TMP/_baton"

mkdir -p "$TMP/bin"
cat >"$TMP/bin/baton" <<STUB
#!/usr/bin/env bash
echo "\$*" >>"$TMP/stub.args"
[[ " \$* " == *" jobs -o name "* ]] && printf 'j-000007\nj-000008\n'
exit 0
STUB
chmod +x "$TMP/bin/baton"
export PATH="$TMP/bin:$PATH"

# shellcheck disable=SC1091
source "$TMP/baton.bash"
complete -p baton | grep -q -- "-F _baton" || fail "the script does not register _baton"

# complete_line WORD...: completes the last word of `WORD...`; prints COMPREPLY, one a line.
complete_line() {
  COMP_WORDS=("$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  _baton
  printf '%s\n' "${COMPREPLY[@]}" | sort
}

expect() {  # expect "DESCRIPTION" "EXPECTED (sorted, one a line)" ACTUAL
  [[ $3 == "$2" ]] || fail "$1: expected [$2], got [$3]"
}

has() {  # has "DESCRIPTION" WORD ACTUAL
  grep -qx -- "$2" <<<"$3" || fail "$1: no '$2' in [$3]"
}

out=$(complete_line baton "")
for cmd in submit jobs describe logs cancel workers queues profile wait version completion help; do
  has "baton <TAB>" "$cmd" "$out"
done
expect "baton w<TAB>" "$(printf 'wait\nworkers')" "$(complete_line baton w)"
expect "baton q<TAB>" "queues" "$(complete_line baton q)"
expect "baton queues -o <TAB>" "$(printf 'json\nname\ntable\nwide\nyaml')" \
  "$(complete_line baton queues -o "")"

out=$(complete_line baton jobs --)
for flag in --state --limit --output --color --coordinator --help; do
  has "baton jobs --<TAB>" "$flag" "$out"
done
grep -qx -- "--follow" <<<"$out" && fail "baton jobs --<TAB> offers logs' --follow"

out=$(complete_line baton logs j-1 --t)
expect "baton logs j-1 --t<TAB>" "$(printf -- '--tail\n--timestamps\n--token_file')" "$out"

expect "baton jobs -o <TAB>" "$(printf 'json\nname\ntable\nwide\nyaml')" \
  "$(complete_line baton jobs -o "")"
expect "baton wait j-1 --for r<TAB>" "running" "$(complete_line baton wait j-1 --for r)"
expect "baton jobs --state f<TAB>" "failed" "$(complete_line baton jobs --state f)"
expect "baton completion <TAB>" "$(printf 'bash\nzsh')" "$(complete_line baton completion "")"

rm -f "$TMP/stub.args"
expect "baton describe <TAB>" "$(printf 'j-000007\nj-000008')" \
  "$(complete_line baton describe "")"
expect "baton --coordinator h:1 logs j-0000<TAB>" "$(printf 'j-000007\nj-000008')" \
  "$(complete_line baton --coordinator h:1 logs j-0000)"
# The job ids come from the coordinator the line names.
grep -qx -- "--coordinator h:1 jobs -o name --color never" "$TMP/stub.args" ||
  fail "the job ids were not listed with the line's --coordinator: $(cat "$TMP/stub.args")"
# Through an alias holding flags, as README's `alias baton=...` does.
rm -f "$TMP/stub.args"
# shellcheck disable=SC2139 # expanded now, on purpose
alias batonctx="$TMP/bin/baton --context lab"
expect "batonctx describe <TAB>" "$(printf 'j-000007\nj-000008')" \
  "$(complete_line batonctx describe "")"
grep -qx -- "--context lab jobs -o name --color never" "$TMP/stub.args" ||
  fail "the alias was not expanded: $(cat "$TMP/stub.args")"
# A flag's value is not the command word.
expect "baton -o json describe <TAB>" "$(printf 'j-000007\nj-000008')" \
  "$(complete_line baton -o json describe "")"

# zsh (tools/install_deps.sh installs it): after compinit the script registers the bash
# function through bashcompinit, and the function answers there as it does in bash. zsh
# itself keeps only the replies that match the word being completed, so the replies are
# checked for containing what matches. The function runs as bashcompinit's compgen runs
# it (sh emulation: 0-based arrays).
if command -v zsh >/dev/null; then
  zsh -n "$TMP/_baton" || fail "the zsh script does not parse"
  zsh_out=$(PATH="$PATH" zsh -fc '
    autoload -U compinit && compinit -u -D
    source "$1"
    print -r -- "registered: ${_comps[baton]}"
    reply() {
      emulate -L sh
      setopt kshglob noshglob braceexpand
      COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=()
      _baton
      print -r -- "$* => ${COMPREPLY[*]}"
    }
    reply baton ""
    reply baton describe ""
    reply baton jobs -o ""' zsh "$TMP/_baton" 2>&1) || fail "zsh: $zsh_out"
  grep -qx "registered: _bash_complete -F _baton" <<<"$zsh_out" || fail "zsh: not registered: $zsh_out"
  grep -Eq "^baton  => .*\bdescribe\b" <<<"$zsh_out" || fail "zsh: no commands: $zsh_out"
  grep -Eq "^baton describe  => j-000007 j-000008$" <<<"$zsh_out" || fail "zsh: no job ids: $zsh_out"
  grep -Eq "^baton jobs -o  => .*\bwide\b" <<<"$zsh_out" || fail "zsh: no -o values: $zsh_out"
else
  fail "zsh is not installed (tools/install_deps.sh installs it)"
fi
bash -n "$TMP/baton.bash" || fail "the bash script does not parse"
echo PASS
