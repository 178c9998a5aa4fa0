#!/usr/bin/env bash
# Usage: test_completion.sh SOURCE_DIR SPROFIL_TOOL BUILD_DIR
# Sources the bash completion in bash and calls its function with COMP_WORDS set, as bash does
# on <TAB>; checks that it knows every option the tool's --help lists, and that
# `cmake --install --component completion` installs both files.
set -u
src=$1
tool=$2
build=$3
fail=0
# shellcheck source=/dev/null
source "$src/sprofil.bash"

spec=$(complete -p sprofil 2>&1)
if [[ $spec != *"-F _sprofil"* ]]; then
  echo "FAIL: complete -p sprofil: $spec"
  fail=1
fi

# expect "words..." -- expected completions (sorted, space separated)
expect() {
  local want=$1
  shift
  COMP_WORDS=("$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  _sprofil
  local got
  got=$(printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ')
  got=${got% }
  if [[ $got != "$want" ]]; then
    echo "FAIL: '${COMP_WORDS[*]}<TAB>': got '$got', want '$want'"
    fail=1
  fi
}

expect "record report" sprofil re
expect "merge" sprofil m
expect "--format" sprofil report --for
expect "--full-names" sprofil report --fu
expect "--user-only" sprofil report --us
expect "address" sprofil report --by add
expect "csv" sprofil report --format cs
expect "json" sprofil report prof.sprof --format j
expect "--clock" sprofil record --cl
expect "wall" sprofil record --clock wa
expect "--output" sprofil merge --o
expect "serve" sprofil se
expect "html" sprofil diff a.sprof b.sprof --format h
expect "diff" sprofil di
expect "--token-file" sprofil serve --to

# Every long option of `sprofil COMMAND --help` is completed after `--`.
for cmd in record report merge diff serve; do
  # "--" alone on record means "the program follows"; ask for options with "--" plus a letter.
  COMP_CWORD=2
  all=""
  for letter in a b c d e f g h i j k l m n o p q r s t u v w x y z; do
    COMP_WORDS=(sprofil "$cmd" "--$letter")
    COMPREPLY=()
    _sprofil
    all+=" ${COMPREPLY[*]}"
  done
  for opt in $("$tool" "$cmd" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
    if [[ " $all " != *" $opt "* ]]; then
      echo "FAIL: sprofil $cmd --help lists $opt; the completion does not"
      fail=1
    fi
  done
done

# The clocks after `record --clock` are the choices `sprofil record --help` lists (auto and
# the rows of SPROF_CLOCKS).
clocks=$("$tool" record --help | sed -n 's/.*--clock TEXT:{\([a-z,]*\)}.*/\1/p' | tr ',' '\n' | sort |
  tr '\n' ' ')
clocks=${clocks% }
if [[ -z $clocks ]]; then
  echo "FAIL: sprofil record --help lists no --clock choices"
  fail=1
else
  expect "$clocks" sprofil record --clock ""
fi

# After `record --`, program names; after the program, files.
COMP_WORDS=(sprofil record -- ech)
COMP_CWORD=3
_sprofil
if [[ " ${COMPREPLY[*]} " != *" echo "* ]]; then
  echo "FAIL: sprofil record -- ech<TAB>: ${COMPREPLY[*]}"
  fail=1
fi

prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" --component completion >/dev/null || fail=1
for f in share/bash-completion/completions/sprofil share/zsh/vendor-completions/_sprofil; do
  if [ ! -f "$prefix/$f" ]; then
    echo "FAIL: not installed: $f"
    fail=1
  fi
done
if command -v zsh >/dev/null && ! zsh -n "$src/_sprofil"; then
  echo "FAIL: zsh -n _sprofil"
  fail=1
fi
[ $fail = 0 ] && echo "bash completion completes commands, options and values"
exit $fail
