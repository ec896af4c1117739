#!/usr/bin/env bash
# Checkpoint and resume: a checkpointed run killed with SIGKILL midway, then
# `ymlopt run --resume`, gives the same bytes as an uninterrupted run and
# re-executes exactly the tasks the checkpoint lacked; stale tasks (a changed
# parameter) and damaged objects run again; usage errors.
source "$(dirname "$0")/lib.sh"
ymlopt=$1
wf=workflows/linalg/tiled_gemm.xml
# 12 x 12 x 12 gemm tiles + io.save: 1729 tasks, a few seconds on 2 cores
sets=(--set n=3072 --set bs=256 --set save=true)
ntasks=1729

field() {  # field RUN_DIR PYTHON-EXPR over the report r
  python3 -c "import json,sys; r=json.load(open(sys.argv[1] + '/report.json')); print($2)" "$1"
}

expect_rc 0 "uninterrupted run, no checkpoint" -- "$ymlopt" run $wf "${sets[@]}" -q -o "$tmp/full"
[ -d "$tmp/full/checkpoint" ] && { echo "FAIL: a run without --checkpoint wrote a checkpoint"; fails=$((fails + 1)); }

# a checkpointed run, killed once a tenth of its tasks are persisted
"$ymlopt" run $wf "${sets[@]}" -q --checkpoint tasks -o "$tmp/ck" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 3000); do
  n=$(ls "$tmp/ck/checkpoint/tasks" 2>/dev/null | grep -c '\.json$')
  [ "$n" -ge 170 ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.02
done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
persisted=$(ls "$tmp/ck/checkpoint/tasks" | grep -c '\.json$')
if [ -e "$tmp/ck/report.json" ] || [ "$persisted" -ge $((ntasks - 1)) ]; then
  echo "FAIL: the run finished before it could be killed ($persisted tasks persisted)"; fails=$((fails + 1))
else
  echo "ok: killed with $persisted of $((ntasks - 1)) tasks persisted"
fi

expect_rc 0 "resume after kill -9" -- "$ymlopt" run --resume "$tmp/ck"
expect_in "resuming $tmp/ck: $((ntasks - persisted)) of $ntasks tasks to run" "resume plan"
restored=$(field "$tmp/ck" "r['checkpoint']['tasks_restored']")
rerun=$(field "$tmp/ck" "r['totals']['tasks_run']")
[ "$restored" = "$persisted" ] && [ "$rerun" = "$((ntasks - persisted))" ] &&
  echo "ok: $restored tasks restored, $rerun re-executed" ||
  { echo "FAIL: restored $restored (expected $persisted), re-executed $rerun (expected $((ntasks - persisted)))"; fails=$((fails + 1)); }
cmp -s "$tmp/full/C.safetensors" "$tmp/ck/C.safetensors" && echo "ok: resumed output identical to the uninterrupted run" ||
  { echo "FAIL: resumed C.safetensors differs from the uninterrupted run's"; fails=$((fails + 1)); }
ls "$tmp/ck/checkpoint/objects" "$tmp/ck/checkpoint/tasks" | grep -q '\.tmp\.' &&
  { echo "FAIL: temporary files left in the checkpoint"; fails=$((fails + 1)); }
[ "$(field "$tmp/ck" "sum(t['status'] == 'restored' for t in r['tasks'])")" = "$restored" ] ||
  { echo "FAIL: per-task status 'restored' does not match the count"; fails=$((fails + 1)); }

# complete: only io.save (no outputs to keep) runs again
expect_rc 0 "second resume" -- "$ymlopt" run --resume "$tmp/ck" -q
[ "$(field "$tmp/ck" "r['totals']['tasks_run']")" = 1 ] && echo "ok: nothing but io.save re-executed" ||
  { echo "FAIL: second resume re-executed $(field "$tmp/ck" "r['totals']['tasks_run']") tasks"; fails=$((fails + 1)); }

# stale: a new parameter adds the reference product and the comparison; the
# recorded --set values are kept, the tiles are restored
expect_rc 0 "resume with a new --set" -- "$ymlopt" run --resume "$tmp/ck" --set verify=true -q
[ "$(field "$tmp/ck" "r['totals']['tasks_run']")" = 3 ] && echo "ok: only the new tasks and io.save ran" ||
  { echo "FAIL: resume with verify=true ran $(field "$tmp/ck" "r['totals']['tasks_run']") tasks, expected 3"; fails=$((fails + 1)); }
[ "$(field "$tmp/ck" "[t for t in r['tasks'] if t['name'] == 'error'][0]['status']")" = done ] ||
  { echo "FAIL: the comparison task did not run"; fails=$((fails + 1)); }

# a damaged object: the last update of C[0,0] (task 11) runs again
obj=$(python3 -c "
import glob, json, sys
for f in glob.glob(sys.argv[1] + '/*.json'):
    m = json.load(open(f))
    if m['task'] == 11: print(m['outputs'][0]['version'])" "$tmp/ck/checkpoint/tasks")
printf 'XXXX' | dd of="$tmp/ck/checkpoint/objects/$obj.bin" bs=1 seek=64 conv=notrunc 2>/dev/null
expect_rc 0 "resume with a damaged object" -- "$ymlopt" run --resume "$tmp/ck" -q
[ "$(field "$tmp/ck" "r['checkpoint']['tasks_invalid']")" = 1 ] &&
  [ "$(field "$tmp/ck" "[t['status'] for t in r['tasks'] if t['id'] == 11][0]")" = done ] &&
  echo "ok: the damaged object's task ran again" ||
  { echo "FAIL: damaged object not detected"; fails=$((fails + 1)); }
cmp -s "$tmp/full/C.safetensors" "$tmp/ck/C.safetensors" || { echo "FAIL: output differs after repairing"; fails=$((fails + 1)); }

# checkpoint="tasks" in the workflow, --checkpoint none overrides it
cat >"$tmp/wf.xml" <<'EOF'
<workflow name="ck" checkpoint="tasks">
  <data name="x" dtype="f32" shape="8" init="ones"/>
  <task component="tensor.scale"><inout port="x" data="x"/><arg name="alpha" value="2"/></task>
  <save data="x" to="x.npy"/>
</workflow>
EOF
expect_rc 0 "checkpoint= attribute" -- "$ymlopt" run "$tmp/wf.xml" -q -o "$tmp/attr"
[ "$(ls "$tmp/attr/checkpoint/tasks" | wc -l)" = 1 ] || { echo "FAIL: checkpoint=\"tasks\" persisted nothing"; fails=$((fails + 1)); }
expect_rc 0 "--checkpoint none" -- "$ymlopt" run "$tmp/wf.xml" -q -o "$tmp/none" --checkpoint none
[ -d "$tmp/none/checkpoint" ] && { echo "FAIL: --checkpoint none persisted"; fails=$((fails + 1)); }

expect_rc 2 "resume of a directory without checkpoint" -- "$ymlopt" run --resume "$tmp/none"
expect_in "ymlopt: error: --resume: '$tmp/none' holds no checkpoint (no checkpoint/run.json; runs are checkpointed with --checkpoint tasks or <workflow checkpoint=\"tasks\">)" "no checkpoint message"
expect_rc 2 "bad --checkpoint" -- "$ymlopt" run "$tmp/wf.xml" --checkpoint always
expect_in "ymlopt: error: --checkpoint expects tasks or none, not 'always'" "bad --checkpoint message"
expect_rc 2 "--resume with another --out" -- "$ymlopt" run --resume "$tmp/attr" -o "$tmp/other"
expect_in "ymlopt: error: --resume $tmp/attr continues that run directory; --out names another ('$tmp/other')" "--out message"
expect_rc 2 "no workflow and no --resume" -- "$ymlopt" run -q
expect_in "ymlopt: error: missing workflow file" "missing workflow message"
finish
