#!/usr/bin/env bash
# Batch submission: `ymlopt submit` / `ymlopt status`. The option and workflow checks and
# --dry-run need no cluster; then a single-node Slurm cluster is started on localhost (munged,
# slurmctld, slurmd in a temporary directory, set up below), a tiled GEMM
# is submitted, waited for and compared with a local sequential run, and the daemons started
# here are stopped by PID at exit. Without Slurm and munge (slurm-wlm munge) or as non-root,
# the cluster part is skipped (exit 77).
source "$(dirname "$0")/lib.sh"
y=$(realpath "$1")
wf=workflows/linalg/tiled_gemm.xml
abs_wf=$(realpath "$wf")
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $1"; fails=$((fails + 1)); }

# --- no cluster needed ---------------------------------------------------------------------
one=(--nodes 1 --ntasks-per-node 1)  # one rank; the CPUs and time limit come separately
base=("${one[@]}" --cpus-per-task 1 --time 00:05:00)
expect_rc 2 "bad --time" -- "$y" submit $wf "${one[@]}" --cpus-per-task 1 --time 5:61 --dry-run
expect_in "--time '5:61' is not HH:MM:SS or D-HH:MM:SS" "bad time message"
expect_rc 2 "minutes >= 60" -- "$y" submit $wf "${one[@]}" --cpus-per-task 1 --time 00:60:00 --dry-run
expect_in "is not HH:MM:SS" "minutes message"
expect_rc 2 "zero time" -- "$y" submit $wf "${one[@]}" --cpus-per-task 1 --time 00:00:00 --dry-run
expect_in "--time must be longer than 00:00:00" "zero time message"
expect_rc 2 "zero nodes" -- "$y" submit $wf --nodes 0 --ntasks-per-node 1 --cpus-per-task 1 --time 00:05:00 --dry-run
expect_in "--nodes must be >= 1, got 0" "zero nodes message"
expect_rc 2 "missing options" -- "$y" submit $wf --nodes 1 --dry-run
expect_in "submit: missing --ntasks-per-node, --cpus-per-task, --time" "missing options named"
expect_rc 2 "several ranks on a one-process backend" -- "$y" submit $wf --nodes 1 --ntasks-per-node 2 --cpus-per-task 1 \
  --time 00:05:00 --backend starpu --dry-run
expect_in "2 ranks need --backend starpu-mpi" "backend message"
expect_rc 2 "unknown backend" -- "$y" submit $wf "${base[@]}" --backend gpu --dry-run
expect_in "unknown backend 'gpu'" "backend named"
expect_rc 2 "missing workflow" -- "$y" submit "$tmp/none.xml" "${base[@]}" --dry-run
expect_in "none.xml: no such file" "missing file named"
# a bad workflow: exit 1 with the compiler's diagnostics, the same as `ymlopt check`
expect_rc 1 "bad workflow" -- "$y" submit tests/malformed/bad_arg_type.xml "${base[@]}" --dry-run
expect_in "tests/malformed/bad_arg_type.xml:5:23: error: task 'tensor.scale': argument 'alpha' of tensor.scale must be float, got 'twice'" "compiler-format diagnostic"
expect_in "1 error in tests/malformed/bad_arg_type.xml" "error count"
[ "$out" = "$("$y" check tests/malformed/bad_arg_type.xml 2>&1)" ] || fail "submit and check print different diagnostics"
expect_rc 2 "bad --set value (a usage error, as for check)" -- "$y" submit $wf "${base[@]}" --set n=banana --dry-run
expect_in "--set n=banana: parameter 'n' of type int cannot take value 'banana'" "bad parameter named"
expect_rc 2 "no sbatch on PATH" -- env PATH=/nonexistent "$y" submit $wf "${base[@]}" --out "$tmp/nosb"
expect_in "sbatch not found (install slurm-client or use --dry-run)" "no sbatch message"
[ ! -e "$tmp/nosb" ] || fail "a run directory was made although nothing could be submitted"
expect_rc 2 "status of a directory that is no run" -- "$y" status "$tmp"
expect_in "is not a submitted run directory" "status message"

# --dry-run: the whole script, nothing written
expect_rc 0 "dry run, 2 nodes x 2 ranks" -- env PATH=/nonexistent "$y" submit $wf --nodes 2 --ntasks-per-node 2 \
  --cpus-per-task 3 --time 1-02:00:00 --partition debug --gpus-per-node 1 --set n=512 --set 'bs=128' --out "$tmp/dry" \
  --dry-run
for want in "#!/bin/bash" "#SBATCH --job-name=tiled-gemm" "#SBATCH --nodes=2" "#SBATCH --ntasks-per-node=2" \
  "#SBATCH --cpus-per-task=3" "#SBATCH --time=1-02:00:00" "#SBATCH --partition=debug" "#SBATCH --gpus-per-node=1" \
  "#SBATCH --chdir=$PWD" "#SBATCH --output=$tmp/dry/slurm-%j.out" "#SBATCH --error=$tmp/dry/slurm-%j.err" \
  "export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1" "export STARPU_NCPU=2" "run_dir=$tmp/dry" \
  "srun --mpi=pmix --ntasks=4 --ntasks-per-node=2 --cpus-per-task=3 --gpus-per-node=1" \
  'STARPU_HOME="$1/starpu.${SLURM_PROCID:-0}"' \
  "$y run $abs_wf --out \"\$run_dir\" --backend starpu-mpi --set n=512 --set bs=128"; do
  expect_in "$want" "dry run: $want"
done
bash -n <<<"$out" || fail "the batch script is not valid bash"
[ ! -e "$tmp/dry" ] || fail "--dry-run created the run directory"
expect_rc 0 "dry run, 1 rank" -- "$y" submit $wf "${one[@]}" --cpus-per-task 2 --time 10:00:00 --set "n=256" \
  --out "$tmp/dry1" --dry-run
expect_in "export STARPU_NCPU=2" "one rank keeps all its CPUs"
expect_in "--backend starpu --set n=256" "one rank runs the starpu backend"
grep -q -- "--mpi=" <<<"$out" && fail "one rank got an srun --mpi plugin"
grep -q -- "--partition" <<<"$out" && fail "a partition line without --partition"
expect_rc 0 "dry run with --checkpoint" -- "$y" submit $wf "${one[@]}" --cpus-per-task 2 --time 00:10:00 --set n=256 \
  --out "$tmp/dryck" --checkpoint --dry-run
for want in "#SBATCH --requeue" "#SBATCH --open-mode=append" 'if [ -f "$run_dir/checkpoint/run.json" ]; then' \
  'set -- --resume "$run_dir"' "set -- $abs_wf --out \"\$run_dir\" --checkpoint tasks --set n=256" \
  "$y run \"\$@\" --backend starpu"; do
  expect_in "$want" "dry run --checkpoint: $want"
done
bash -n <<<"$out" || fail "the --checkpoint batch script is not valid bash"
expect_rc 2 "--checkpoint with several ranks" -- "$y" submit $wf --nodes 1 --ntasks-per-node 2 --cpus-per-task 1 \
  --time 00:05:00 --checkpoint --dry-run
expect_in "submit: --checkpoint needs one rank (the starpu-mpi backend does not checkpoint)" "--checkpoint ranks message"

# --- a real cluster on localhost ---------------------------------------------------------------
missing=""
for p in munged mungekey slurmctld slurmd sbatch srun sinfo squeue scontrol scancel; do
  command -v $p >/dev/null || missing+=" $p"
done
if [ -n "$missing" ]; then
  [ $fails -eq 0 ] || finish
  echo "SKIP: the Slurm cluster part needs slurm-wlm and munge (missing:$missing); YMLOPT_WITH_TEST_DEPS=1 scripts/setup.sh installs them"
  exit 77
fi
if [ "$(id -u)" -ne 0 ]; then
  [ $fails -eq 0 ] || finish
  echo "SKIP: the Slurm cluster part runs the daemons as root (SlurmUser=root)"
  exit 77
fi
c=$tmp/cluster
mkdir -p "$c/munge" "$c/state" "$c/spool" "$c/log"
chmod 755 "$tmp" "$c" "$c/munge"
mungekey --create --keyfile="$c/munge.key" || { fail "mungekey"; finish; }
munged -F --key-file="$c/munge.key" --socket="$c/munge/munge.sock" --pid-file="$c/munge/munged.pid" \
  --seed-file="$c/munge/seed" --log-file="$c/log/munged.log" >"$c/log/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$c/munge/munge.sock" ] && break; sleep 0.1; done
# two free TCP ports, so that a second cluster (another test run) does not collide
read -r ctld_port d_port < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))')
cat >"$c/slurm.conf" <<EOF
ClusterName=ymlopt
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$c/munge/munge.sock
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=$c/state
SlurmdSpoolDir=$c/spool
SlurmctldPidFile=$c/slurmctld.pid
SlurmdPidFile=$c/slurmd.pid
SlurmctldLogFile=$c/log/slurmctld.log
SlurmdLogFile=$c/log/slurmd.log
NodeName=localhost NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=20000
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$c/slurm.conf
slurmctld -D -f "$SLURM_CONF" >"$c/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" -N localhost >"$c/log/slurmd.out" 2>&1 &
pids+=($!)
state=""
for _ in $(seq 60); do
  state=$(sinfo -h -n localhost -o %T 2>/dev/null)
  [ "$state" = idle ] && break
  sleep 0.5
done
if [ "$state" != idle ]; then
  fail "the node did not become idle (state '$state')"
  tail -5 "$c"/log/*.out "$c"/log/*.log 2>/dev/null
  finish
fi
echo "ok: single-node cluster up (slurmctld :$ctld_port, slurmd :$d_port)"

# status --json until the state is final; prints the last state
wait_done() {
  local s=""
  for _ in $(seq 180); do
    s=$("$y" status "$1" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
    case $s in COMPLETED | FAILED | CANCELLED | TIMEOUT | OUT_OF_MEMORY | NODE_FAIL) break ;; esac
    sleep 0.5
  done
  echo "$s"
}

# 2 ranks through StarPU-MPI when this build has the backend, else 1 rank with both CPUs
# (YMLOPT_TEST_SLURM_RANKS=1 or 2 chooses)
if [ -n "${YMLOPT_TEST_SLURM_RANKS:-}" ]; then
  ntasks=$YMLOPT_TEST_SLURM_RANKS cpus=$((YMLOPT_TEST_SLURM_RANKS == 1 ? 2 : 1))
elif "$y" run $wf --set n=64 --set bs=32 --backend starpu-mpi --dry-run >/dev/null 2>&1; then
  ntasks=2 cpus=1
else
  ntasks=1 cpus=2
fi
echo "note: submitting $ntasks rank(s) x $cpus CPU(s)"
sets=(--set n=384 --set bs=128 --set save=true)
expect_rc 0 "submit" -- "$y" submit $wf --nodes 1 --ntasks-per-node $ntasks --cpus-per-task $cpus --time 00:05:00 \
  --partition debug "${sets[@]}" --out "$tmp/job"
expect_in "submitted job " "job id printed"
expect_in "run directory: $tmp/job" "run directory printed"
job_id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$tmp/job/submit.json")
python3 - "$tmp/job" "$ntasks" <<'PY' || fail "submit.json"
import json, os, sys
d, n = sys.argv[1], int(sys.argv[2])
r = json.load(open(d + "/submit.json"))
assert r["job_id"].isdigit(), r
assert r["script"] == d + "/job.sbatch" and os.path.isfile(r["script"]), r
assert r["submitted_at"].endswith("Z") and r["run_dir"] == d, r
assert r["ntasks_per_node"] == n and r["backend"] == ("starpu-mpi" if n > 1 else "starpu"), r
assert r["output"] == d + "/slurm-" + r["job_id"] + ".out", r
PY
grep -q "^#SBATCH --job-name=tiled-gemm" "$tmp/job/job.sbatch" || fail "job.sbatch lacks the job name"
expect_rc 0 "status right after submitting" -- "$y" status "$tmp/job"
expect_in "job $job_id: " "status names the job"
expect_in "output: $tmp/job/slurm-$job_id.out" "status names the output file"
# a second, large job that waits behind the first one: cancelled, then reported CANCELLED
expect_rc 0 "submit a job to cancel" -- "$y" submit $wf "${one[@]}" --cpus-per-task 2 --time 00:05:00 --set n=4096 \
  --out "$tmp/cancel"
cancel_id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$tmp/cancel/submit.json")
scancel "$cancel_id"
final=$(wait_done "$tmp/job")
[ "$final" = COMPLETED ] || { fail "job ended $final"; cat "$tmp/job"/slurm-*.out "$tmp/job"/slurm-*.err; }
expect_rc 0 "status of the finished job" -- "$y" status "$tmp/job"
expect_in "job $job_id: COMPLETED" "completed"
expect_in "makespan: " "makespan reported"
grep -q "ymlopt submit: job $job_id on" "$tmp/job/slurm-$job_id.out" || fail "the Slurm output file lacks the job's banner"
for ((r = 0; r < ntasks; r++)); do
  [ -d "$tmp/job/starpu.$r" ] || fail "no STARPU_HOME for rank $r"
done
[ -d "$tmp/job/starpu" ] && fail "the job used the shared RUN_DIR/starpu instead of one per rank"
expect_rc 0 "status --json" -- "$y" status "$tmp/job" --json
printf '%s' "$out" >"$tmp/status.json"
python3 - "$job_id" "$tmp/status.json" <<'PY' || fail "status --json"
import json, sys
j = json.load(open(sys.argv[2]))
assert j["job_id"] == sys.argv[1] and j["state"] == "COMPLETED" and j["makespan_us"] > 0, j
assert j["source"] in ("squeue", "sacct", "scontrol"), j
PY
# a checkpointed job, requeued after it completed: the second start resumes
expect_rc 0 "submit --checkpoint" -- "$y" submit $wf "${one[@]}" --cpus-per-task 2 --time 00:05:00 "${sets[@]}" \
  --checkpoint --out "$tmp/ckjob"
ck_id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$tmp/ckjob/submit.json")
final=$(wait_done "$tmp/ckjob")
[ "$final" = COMPLETED ] || { fail "checkpointed job ended $final"; cat "$tmp/ckjob"/slurm-*; }
python3 -c 'import json,sys; c = json.load(open(sys.argv[1]))["checkpoint"]; assert not c["resumed"] and c["tasks_persisted"] == 27, c' \
  "$tmp/ckjob/report.json" || fail "first start of the checkpointed job"
scontrol requeue "$ck_id" || fail "scontrol requeue"
# Slurm holds a requeued job back (BeginTime) for a while: make it eligible now
for _ in $(seq 20); do scontrol update JobId="$ck_id" StartTime=now >/dev/null 2>&1 && break; sleep 0.5; done
final=$(wait_done "$tmp/ckjob")
[ "$final" = COMPLETED ] || { fail "requeued job ended $final"; cat "$tmp/ckjob"/slurm-*; }
python3 -c '
import json, sys
r = json.load(open(sys.argv[1])); c = r["checkpoint"]
assert c["resumed"] and c["tasks_restored"] == 27 and r["totals"]["tasks_run"] == 1, c' "$tmp/ckjob/report.json" &&
  echo "ok: the requeued job resumed (27 tasks restored, io.save ran)" || fail "the requeued job did not resume"
grep -q "resuming $tmp/ckjob" "$tmp/ckjob/slurm-$ck_id.out" || fail "the Slurm output lacks the resume line"

# the same numbers as a local sequential run
expect_rc 0 "local sequential reference" -- "$y" run $wf "${sets[@]}" --backend sequential --out "$tmp/ref" --quiet
cmp -s "$tmp/ckjob/C.safetensors" "$tmp/ref/C.safetensors" || fail "the requeued job's output differs from a local run's"
python3 - "$tmp/job/C.safetensors" "$tmp/ref/C.safetensors" <<'PY' || fail "outputs differ"
import json, struct, sys
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    t = h["C"]
    lo, hi = t["data_offsets"]
    assert t["dtype"] == "F32" and t["shape"] == [384, 384], t
    return struct.unpack("<%df" % ((hi - lo) // 4), b[8 + n + lo:8 + n + hi])
a, r = load(sys.argv[1]), load(sys.argv[2])
err = max(abs(x - y) / (1 + abs(y)) for x, y in zip(a, r))
assert err <= 1e-5, err
print("outputs match the sequential run:", "bit-identical" if a == r else "max rel err %.2e" % err)
PY
final=$(wait_done "$tmp/cancel")
[ "$final" = CANCELLED ] || fail "the cancelled job ended $final"
expect_rc 0 "status of a cancelled job" -- "$y" status "$tmp/cancel"
expect_in "job $cancel_id: CANCELLED" "cancelled"

# a workflow that compiles but fails when it runs (Cholesky of a singular matrix): FAILED, exit 1
cat >"$tmp/singular.xml" <<'XML'
<workflow name="singular">
  <data name="A" shape="8,8" init="ones"/>
  <task component="blas.potrf"><inout port="a" data="A"/></task>
</workflow>
XML
expect_rc 0 "submit a failing workflow" -- "$y" submit "$tmp/singular.xml" "${base[@]}" --out "$tmp/fail"
final=$(wait_done "$tmp/fail")
[ "$final" = FAILED ] || fail "the failing job ended $final"
expect_rc 1 "status of a failed job" -- "$y" status "$tmp/fail"
expect_in "FAILED (exit code 1)" "failed with the exit code"
grep -q "not positive definite" "$tmp"/fail/slurm-*.err || fail "the kernel's message is not in the job's error file"

# once Slurm has forgotten a job, the run's report.json tells its outcome
mkdir "$tmp/old"
cp "$tmp/job/report.json" "$tmp/old/"
python3 - "$tmp/job/submit.json" "$tmp/old/submit.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); r["job_id"] = "999999"; json.dump(r, open(sys.argv[2], "w"))
PY
expect_rc 0 "status from report.json" -- "$y" status "$tmp/old"
expect_in "job 999999: COMPLETED (from report.json" "report.json fallback"
rm "$tmp/old/report.json"
expect_rc 1 "status of an unknown job" -- "$y" status "$tmp/old"
expect_in "job 999999: UNKNOWN" "unknown state"
finish
