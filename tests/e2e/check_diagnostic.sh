#!/usr/bin/env bash
# check_diagnostic.sh YMLOPT WORKFLOW EXPECTED: `ymlopt check` must exit 1 and
# print exactly EXPECTED on stderr.
set -u
ymlopt=$1 wf=$2 expected=$3
actual=$("$ymlopt" check "$wf" 2>&1 >/dev/null)
rc=$?
if [ $rc -ne 1 ]; then
  echo "expected exit 1, got $rc"; echo "$actual"; exit 1
fi
if ! diff -u "$expected" <(printf '%s\n' "$actual"); then
  echo "diagnostics differ from $expected"; exit 1
fi
