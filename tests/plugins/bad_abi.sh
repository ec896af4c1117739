#!/usr/bin/env bash
# bad_abi.sh YMLOPT BAD_ABI_PLUGIN WORKFLOW
# A plugin exporting another SDK ABI version is refused with exit 2 and an exact message.
set -euo pipefail
source "$(dirname "$0")/common.sh"
[ $# -eq 3 ] || fail "usage: bad_abi.sh YMLOPT BAD_ABI_PLUGIN WORKFLOW"
ymlopt=$1 plugin=$2 wf=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

abi=$("$ymlopt" version | sed -n 's/.*component SDK ABI \([0-9][0-9]*\).*/\1/p')
[ -n "$abi" ] || fail "cannot read the SDK ABI version from '$ymlopt version'"
[ "$abi" = 1 ] || echo "note: this ymlopt provides SDK ABI version $abi"
expected="ymlopt: error: $plugin: plugin built for SDK ABI version 999, this ymlopt provides version $abi; rebuild it against this ymlopt"

for cmd in run components check; do
  case $cmd in
    run) args=(run "$wf" --plugin "$plugin" --out "$out/run" --quiet) ;;
    components) args=(components --plugin "$plugin") ;;
    check) args=(check "$wf" --plugin "$plugin") ;;
  esac
  run_capture output rc "$ymlopt" "${args[@]}"
  [ "$rc" = 2 ] || fail "ymlopt $cmd with a bad-ABI plugin: exit $rc, expected 2"
  # The message is the first line on stderr (nothing but it is expected).
  first=$(printf '%s\n' "$output" | head -n 1)
  [ "$first" = "$expected" ] || fail "ymlopt $cmd: got
  $first
expected
  $expected"
  [ "$(printf '%s\n' "$output" | grep -c .)" = 1 ] || fail "ymlopt $cmd: unexpected extra output"
done
[ ! -e "$out/run/report.json" ] || fail "a refused plugin must not start a run"
echo "PASS"
