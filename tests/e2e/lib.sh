# Helpers for the CLI end-to-end scripts.
set -u
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the scripts' Python checks import tests/e2e/checks.py (check, done, header, metadata)
export PYTHONPATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)${PYTHONPATH:+:$PYTHONPATH}"
# same_file DESCRIPTION A B: the two files are byte for byte the same (outputs of two runs)
same_file() {
  if cmp -s "$2" "$3"; then echo "ok: $1"; else echo "FAIL: $1: $2 and $3 differ"; fails=$((fails + 1)); fi
}
# kept_file WHAT DIR MODEL ARGS...: `ymlopt optimize -o DIR` wrote DIR/MODEL.opt.xml and
# DIR/MODEL.opt.safetensors; the flat workflow runs, and the original workflow (ymlopt run
# ARGS, weights= set to the kept file) gives the same logits ($y is the ymlopt binary)
kept_file() {
  local what=$1 dir=$2 model=$3
  shift 3
  expect_rc 0 "$what: rewritten workflow runs" -- "$y" run "$dir/$model.opt.xml" -q --backend sequential -o "$dir/flat"
  expect_rc 0 "$what: original workflow on the compressed file" -- \
    "$y" run "$@" --set weights="$dir/$model.opt.safetensors" -q -o "$dir/sub"
  same_file "$what: the same logits from the flat and the original workflow" "$dir/flat/logits.npy" "$dir/sub/logits.npy"
}
# expect_rc RC DESCRIPTION -- CMD...: runs CMD, checks its exit code; output in $out
expect_rc() {
  local want=$1 what=$2; shift 3
  out=$("$@" 2>&1); local rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL: $what: exit $rc, expected $want"; echo "$out" | head -20; fails=$((fails + 1))
  else
    echo "ok: $what"
  fi
}
# expect_in TEXT DESCRIPTION: checks that $out contains TEXT
expect_in() {
  if ! grep -qF -- "$1" <<<"$out"; then
    echo "FAIL: $2: output lacks '$1'"; echo "$out" | head -20; fails=$((fails + 1))
  fi
}
source "$(dirname "${BASH_SOURCE[0]}")/../write_ids.sh"
# hf SRC DIR PREFIX SHARDS CONFIG_JSON [DROP]: DIR holds SRC's tensors under PREFIX, in
# SHARDS files (1: model.safetensors), and config.json (none when CONFIG_JSON is
# empty); DROP names a tensor left out. Pure Python, no numpy.
hf() {
  python3 - "$@" <<'PY'
import json, os, struct, sys
src, out, prefix, shards, config = sys.argv[1:6]
drop = sys.argv[6] if len(sys.argv) > 6 else None
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h.pop("__metadata__", None)
data = b[8 + n:]
t = {prefix + k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in h.items() if k != drop}
def write(path, part):
    hd, off = {}, 0
    for k, (dt, sh, raw) in part.items():
        hd[k] = {"dtype": dt, "shape": sh, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    hj = json.dumps(hd).encode()
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + b"".join(raw for _, _, raw in part.values()))
os.makedirs(out, exist_ok=True)
if config:
    open(out + "/config.json", "w").write(config)
shards = int(shards)
if shards == 1:
    write(out + "/model.safetensors", t)
else:
    keys, wm = list(t), {}
    per = -(-len(keys) // shards)
    for i in range(shards):
        name = "model-%05d-of-%05d.safetensors" % (i + 1, shards)
        part = {k: t[k] for k in keys[i * per:(i + 1) * per]}
        write(out + "/" + name, part)
        wm.update({k: name for k in part})
    json.dump({"metadata": {"total_size": sum(len(v[2]) for v in t.values())}, "weight_map": wm},
              open(out + "/model.safetensors.index.json", "w"))
PY
}
# need_numpy: sets py to Debian's python3 (torch and numpy live there, not in a
# PATH python); skips the script (exit 77) when it has no numpy
need_numpy() {
  py=/usr/bin/python3
  if ! "$py" -c "import numpy" 2>/dev/null; then
    echo "skip: $py has no numpy (Debian python3-numpy; scripts/test.sh installs it)"
    exit 77
  fi
}
finish() {
  if [ $fails -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
  echo "all checks passed"
}
# ran_on DIR KIND [COMPONENT]: every task (of COMPONENT) in DIR's report ran on a KIND worker
# (after need_numpy)
ran_on() {
  "$py" - "$@" <<'PY'
import json, sys
r = json.load(open(sys.argv[1] + "/report.json"))
tasks = [t for t in r["tasks"] if len(sys.argv) < 4 or t["component"] == sys.argv[3]]
wrong = [(t["id"], t["component"], t["worker_kind"]) for t in tasks if t["worker_kind"] != sys.argv[2]]
assert tasks and not wrong, wrong[:5]
PY
}
