#!/usr/bin/env bash
# Exit codes and messages of bad command lines (2) and bad workflows (1).
source "$(dirname "$0")/lib.sh"
y=$1
wf=workflows/linalg/tiled_gemm.xml
expect_rc 2 "no command" -- "$y"
expect_in "usage: ymlopt <command>" "usage shown"
expect_rc 2 "unknown command" -- "$y" rnu $wf
expect_in "unknown command 'rnu' (did you mean 'run'?)" "suggestion"
expect_rc 2 "missing workflow" -- "$y" check
expect_in "missing workflow file" "message"
expect_rc 2 "nonexistent workflow" -- "$y" check no/such.xml
expect_in "no/such.xml: no such file" "message"
expect_rc 2 "unknown option" -- "$y" run $wf --bogus
expect_rc 2 "--set of an unknown parameter" -- "$y" check $wf --set nn=4
expect_in "$wf: error: --set nn=4: unknown parameter 'nn' (did you mean 'n'?)" "message"
expect_rc 2 "--set with a bad value" -- "$y" check $wf --set n=four
expect_in "--set n=four: parameter 'n' of type int cannot take value 'four'" "message"
expect_rc 2 "--set without =" -- "$y" check $wf --set n
expect_in "--set expects NAME=VALUE, got 'n'" "message"
expect_rc 2 "unknown scheduler" -- "$y" run $wf --sched dmdaa
expect_in "unknown scheduler 'dmdaa' (did you mean 'dmda'?)" "message"
expect_rc 2 "unknown backend" -- "$y" run $wf --backend gpu
expect_rc 2 "missing plugin" -- "$y" check $wf --plugin /nonexistent/libx.so
expect_in "/nonexistent/libx.so: cannot load plugin" "message"
expect_rc 1 "bad workflow" -- "$y" run tests/malformed/unknown_component.xml --out "$tmp/bad"
expect_in "unknown component 'blas.gem' (did you mean 'blas.gemm'?)" "message"
[ ! -e "$tmp/bad" ] || { echo "FAIL: a bad workflow created a run directory"; fails=$((fails + 1)); }
# --max-tasks: 16^3 = 4096 gemm tasks of the tiled GEMM
expect_rc 1 "more tasks than --max-tasks" -- "$y" check workflows/linalg/tiled_gemm.xml --set n=1024 --set bs=64 --max-tasks 1000
expect_in "tiled_gemm.xml:16:" "at the loop that crosses the limit"
expect_in "runs 16 iterations inside loops of 256 iterations, more than the task limit (1000; --max-tasks)" "message"
expect_rc 0 "within --max-tasks" -- "$y" check workflows/linalg/tiled_gemm.xml --set n=1024 --set bs=64 --max-tasks 4096
expect_rc 2 "--max-tasks not a number" -- "$y" check workflows/linalg/tiled_gemm.xml --max-tasks many
expect_rc 0 "help" -- "$y" run --help
expect_in "--sched" "run options listed"
expect_rc 0 "version" -- "$y" version
finish
