#!/usr/bin/env bash
# What events cost the compiler: `ymlopt check` (GNU time: seconds, peak RSS)
# and the dependencies it infers on workflows of wait/notify patterns, written
# here for each size K. Patterns: pingpong (two branches hand events back and
# forth, no data between their tasks: the right answer is one edge per task),
# producer (a consumer waits for each of a producer's independent tasks: Y[i]
# must follow X[0..i], K(K+1)/2 edges), gauss-jordan (YML's block Gauss-Jordan,
# workflows/yml/gauss_jordan.xml, 16 x 16 and 32 x 32 tiles of 256).
#
#   tests/bench/event_patterns.sh [BUILD_DIR] [K...]
#   tests/bench/event_patterns.sh build 1000 3000
set -euo pipefail
build=${1:-build}
shift || true
sizes=${*:-1000 3000}
y=$build/bin/ymlopt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%-14s %6s %7s %12s %8s %9s\n' pattern K tasks dependencies "s" "peak MB"
measure() {  # pattern K file [--set ...]
  local name=$1 k=$2 f=$3
  shift 3
  local out
  out=$( { /usr/bin/time -f "TIME %e %M" "$y" check "$f" "$@"; } 2>&1)
  local tasks deps s kb
  tasks=$(sed -n 's/.*, \([0-9]*\) tasks, .*/\1/p' <<<"$out")
  deps=$(sed -n 's/.* tasks, \([0-9]*\) dependencies.*/\1/p' <<<"$out")
  read -r s kb < <(sed -n 's/^TIME //p' <<<"$out")
  printf '%-14s %6s %7s %12s %8s %9s\n' "$name" "$k" "$tasks" "$deps" "$s" "$((kb / 1024))"
}
task() { echo "<task component=\"tensor.scale\"><inout port=\"x\" data=\"$1\"/></task>"; }
for k in $sizes; do
  cat >"$work/pingpong.xml" <<XML
<workflow name="pingpong">
  <data name="X" shape="$k" tile="1" init="ones"/><data name="Y" shape="$k" tile="1" init="ones"/>
  <par>
    <seq var="i" from="0" to="$k"><if cond="\${i > 0}"><wait event="e[\${i-1}]"/></if>$(task 'X[${i}]')<notify event="f[\${i}]"/></seq>
    <seq var="i" from="0" to="$k"><wait event="f[\${i}]"/>$(task 'Y[${i}]')<notify event="e[\${i}]"/></seq>
  </par>
</workflow>
XML
  cat >"$work/producer.xml" <<XML
<workflow name="producer">
  <data name="X" shape="$k" tile="1" init="ones"/><data name="Y" shape="$k" tile="1" init="ones"/>
  <par>
    <seq var="i" from="0" to="$k">$(task 'X[${i}]')<notify event="f[\${i}]"/></seq>
    <seq var="i" from="0" to="$k"><wait event="f[\${i}]"/>$(task 'Y[${i}]')</seq>
  </par>
</workflow>
XML
  measure pingpong "$k" "$work/pingpong.xml"
  measure producer "$k" "$work/producer.xml"
done
for tiles in 16 32; do
  measure gauss-jordan "${tiles}x$tiles" workflows/yml/gauss_jordan.xml --set n=$((tiles * 256)) --set bs=256
done
