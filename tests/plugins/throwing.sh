#!/usr/bin/env bash
# throwing.sh YMLOPT THROWING_PLUGIN WORKFLOW WORKDIR
# A plugin kernel that throws fails the run cleanly: exit 1, a diagnostic naming
# the XML position, the task and the component, a report.json with status
# "failed" (and the failing task marked failed), and no hang (ctest TIMEOUT).
set -euo pipefail
source "$(dirname "$0")/common.sh"
[ $# -eq 4 ] || fail "usage: throwing.sh YMLOPT THROWING_PLUGIN WORKFLOW WORKDIR"
ymlopt=$1 plugin=$2 wf=$3 work=$4
rm -rf "$work"
mkdir -p "$work"

line=$(grep -n 'component="test.throw"' "$wf" | head -n 1 | cut -d: -f1)
[ -n "$line" ] || fail "no test.throw task in $wf"

for backend in starpu sequential; do
  out="$work/$backend"
  run_capture output rc "$ymlopt" run "$wf" --plugin "$plugin" --backend "$backend" --ncpu 2 --out "$out" --quiet
  [ "$rc" = 1 ] || fail "$backend: exit $rc, expected 1"
  diag=$(printf '%s\n' "$output" | grep -E ":$line:[0-9]+: error: " | head -n 1) ||
    fail "$backend: no 'FILE:$line:COL: error:' diagnostic for the test.throw task"
  expect_contains "$diag" "$(basename "$wf"):$line:" "$backend"
  expect_contains "$diag" "boom" "$backend (task name)"
  expect_contains "$diag" "(component test.throw)" "$backend"
  expect_contains "$diag" "failed: deliberate failure" "$backend"
  [ -f "$out/report.json" ] || fail "$backend: no $out/report.json"
  python3 - "$out/report.json" "$line" <<'PY' || fail "$backend: report.json check"
import json, sys
r = json.load(open(sys.argv[1]))
line = int(sys.argv[2])
assert r.get("status") == "failed", "status is %r, expected 'failed'" % r.get("status")
assert "deliberate failure" in r.get("error", ""), "report 'error' does not mention the failure"
tasks = r["tasks"]
boom = [t for t in tasks if t["component"] == "test.throw"]
assert len(boom) == 1, "expected one test.throw task in the report"
boom = boom[0]
assert boom["status"] == "failed", "test.throw task status %r" % boom["status"]
assert boom["line"] == line, "test.throw task line %r, expected %d" % (boom["line"], line)
for t in tasks:
    if t["name"] in ("after", "norm_a"):
        assert t["status"] == "cancelled", "task %r depends on the failed one, status %r" % (t["name"], t["status"])
    assert t["status"] in ("done", "failed", "cancelled"), t
n = {s: sum(1 for t in tasks if t["status"] == s) for s in ("done", "failed", "cancelled")}
print("report.json: status failed; tasks %s" % n)
PY
done
echo "PASS"
