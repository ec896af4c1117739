#!/usr/bin/env bash
# components.sh YMLOPT THROWING_PLUGIN
# `ymlopt components --plugin P` lists the plugin's components next to the built-in ones.
set -euo pipefail
source "$(dirname "$0")/common.sh"
[ $# -eq 2 ] || fail "usage: components.sh YMLOPT THROWING_PLUGIN"
ymlopt=$1 plugin=$2

run_capture output rc "$ymlopt" components --plugin "$plugin"
[ "$rc" = 0 ] || fail "ymlopt components --plugin: exit $rc"
printf '%s\n' "$output" | grep -qw 'test\.throw' || fail "test.throw is not listed"
printf '%s\n' "$output" | grep -qw 'tensor\.compare' || fail "built-in components are not listed"

run_capture output rc "$ymlopt" components
[ "$rc" = 0 ] || fail "ymlopt components: exit $rc"
if printf '%s\n' "$output" | grep -qw 'test\.throw'; then fail "test.throw listed without --plugin"; fi
echo "PASS"
