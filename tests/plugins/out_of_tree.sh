#!/usr/bin/env bash
# out_of_tree.sh CMAKE BUILD_DIR SOURCE_DIR CXX GENERATOR SANITIZED WORKDIR
# Installs this ymlopt build into a temporary prefix, builds examples/plugin
# against the installed package only (find_package(ymlopt) via
# CMAKE_PREFIX_PATH, no sanitizer or other project flags), then runs
# examples/plugin/clip.xml with the plugin; the workflow verifies the clip and
# rownorm results itself with tensor.compare (a wrong result fails the run).
set -euo pipefail
source "$(dirname "$0")/common.sh"
[ $# -eq 7 ] || fail "usage: out_of_tree.sh CMAKE BUILD_DIR SOURCE_DIR CXX GENERATOR SANITIZED WORKDIR"
cmake=$1 build=$2 src=$3 cxx=$4 generator=$5 sanitized=$6 work=$7

rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix

echo "== install $build -> $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "cmake --install"; }
config=$(find "$prefix" -path '*/cmake/ymlopt/ymloptConfig.cmake' | head -n 1)
[ -n "$config" ] || fail "no ymloptConfig.cmake under $prefix"
[ -f "$prefix/include/ymlopt/sdk.hpp" ] || fail "sdk.hpp not installed"
[ -x "$prefix/bin/ymlopt" ] || fail "bin/ymlopt not installed"
if ! grep -q 'add_library(ymlopt::sdk ' "$(dirname "$config")"/ymloptTargets*.cmake; then
  fail "the installed package does not define ymlopt::sdk (it defines: $(sed -n 's/^add_library(\([^ ]*\) .*/\1/p' \
    "$(dirname "$config")"/ymloptTargets*.cmake | tr '\n' ' ')); give the exported target EXPORT_NAME sdk"
fi

abi=$("$prefix/bin/ymlopt" version | sed -n 's/.*component SDK ABI \([0-9][0-9]*\).*/\1/p')
grep -q "^set(YMLOPT_SDK_ABI_VERSION $abi)$" "$config" ||
  fail "$config does not set YMLOPT_SDK_ABI_VERSION to $abi, the ABI of the installed ymlopt"

# The plugin build uses only the installed package: no sanitizer flags, even
# when this ymlopt is an ASan/UBSan build (an uninstrumented MODULE loads fine
# into an instrumented executable).
unset CXXFLAGS LDFLAGS CPPFLAGS
echo "== configure examples/plugin against $prefix (CXX=$cxx)"
"$cmake" -S "$src/examples/plugin" -B "$work/build" -G "$generator" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF || fail "configure examples/plugin"
found=$(sed -n 's/^ymlopt_DIR:[A-Z]*=//p' "$work/build/CMakeCache.txt")
[ "$found" -ef "$(dirname "$config")" ] ||
  fail "find_package(ymlopt) used '$found', not the installed package in $prefix"
echo "== build"
"$cmake" --build "$work/build" || fail "build examples/plugin"
plugin=$work/build/libymlopt_example_ops.so
[ -f "$plugin" ] || fail "no $plugin"

ymlopt=$build/bin/ymlopt
run_capture output rc "$ymlopt" components --plugin "$plugin"
[ "$rc" = 0 ] || fail "ymlopt components --plugin: exit $rc"
for c in example.clip example.rownorm; do
  printf '%s\n' "$output" | grep -qF "$c" || fail "$c not listed"
done

if [ "$sanitized" = ON ]; then
  echo "note: this ymlopt is built with sanitizers; the plugin is not (that is the point: it needs none)"
fi

echo "== run clip.xml"
run_capture output rc "$ymlopt" run "$src/examples/plugin/clip.xml" --plugin "$plugin" --out "$work/run" --quiet \
  --set n=512 --set bs=128
[ "$rc" = 0 ] || fail "ymlopt run clip.xml: exit $rc"
[ -f "$work/run/report.json" ] || fail "no report.json"
python3 - "$work/run/report.json" <<'PY' || fail "report.json check"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["status"] == "ok", r["status"]
tasks = r["tasks"]
by = {t["name"]: t for t in tasks}
clips = [t for t in tasks if t["component"] == "example.clip"]
assert len(clips) == 16, "expected 4x4 example.clip tasks, got %d" % len(clips)
assert all(t["status"] == "done" for t in tasks)
assert all(t["flops"] > 0 for t in clips), "clip cost hook not used"
before = by["max_before"]["results"]["norm"]
after = by["norm_after"]["results"]["norm"]
assert before > 0.9, before            # random in [-1, 1)
assert after == 0.5, after             # clipped to [-0.5, 0.5]
assert by["check_bound"]["results"]["max_abs"] == 0
assert by["check_rows"]["results"]["max_rel"] < 1e-5
print("max|X| %.4f -> %.4f after example.clip; rownorm ok" % (before, after))
PY

echo "== a wrong bound must fail the workflow's own check"
run_capture output rc "$ymlopt" run "$src/examples/plugin/clip.xml" --plugin "$plugin" --out "$work/run_bad" --quiet \
  --set n=64 --set bs=32 --set hi=2 --set lo=-2
[ "$rc" = 1 ] || fail "clip.xml with hi=2 (nothing clipped, max|X| < 2): exit $rc, expected 1"
expect_contains "$output" "tensors differ" "clip.xml with hi=2"
echo "PASS"
