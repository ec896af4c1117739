#!/usr/bin/env bash
# 'ymlopt compare': three 'ymlopt optimize --eval' runs of a tiny GPT-2 side by side
# (table, JSON, SVG plot), checked against the runs' own report.json files; and
# the usage and bad-report errors.
source "$(dirname "$0")/lib.sh"
y=$1
d="$tmp/gpt2"
mkdir -p "$d"
"$y" model init --arch gpt2 --preset tiny "$d/w.safetensors" >/dev/null || { echo "FAIL: model init"; exit 1; }
# token ids as an i32 .npy, written without numpy
python3 - "$d/ids.npy" <<'PY' || { echo "FAIL: ids.npy"; exit 1; }
import struct, sys
n = 64
hdr = "{'descr': '<i4', 'fortran_order': False, 'shape': (%d,), }" % n
hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
    f.write(struct.pack("<%di" % n, *[(i * 37) % 512 for i in range(n)]))
PY
sets=(--set weights="$d/w.safetensors" --set ids="$d/ids.npy" --set batch=2 --set seq=32 --set layers=2 --set width=96
  --set heads=3 --set vocab=512 --set context=64 --set tile_n=32)
run_opt() {  # run_opt NAME PASSES [extra args]
  local name=$1 passes=$2; shift 2
  expect_rc 0 "optimize $passes" -- "$y" optimize workflows/models/gpt2.xml "${sets[@]}" --passes "$passes" \
    --reps 2 -o "$d/$name" "$@"
}
run_opt int8 quant.int8 --eval
run_opt int4 quant.group:bits=4:group=32 --eval
run_opt mag50 prune.magnitude:sparsity=0.5 --eval
run_opt int8-bytes quant.int8

expect_rc 0 "compare three runs" -- "$y" compare "$d/int8" "$d/int4" "$d/mag50" -o "$d/cmp/three"
expect_in "| run | sequence | passes | weight bytes" "table printed"
expect_in "written: $d/cmp/three.md, $d/cmp/three.svg, $d/cmp/three.json" "files named"
python3 - "$d" <<'PY' || fails=$((fails + 1))
import json, sys, xml.dom.minidom
d = sys.argv[1]
runs = {"quant.int8": "int8", "quant.group:bits=4:group=32": "int4", "prune.magnitude:sparsity=0.5": "mag50"}
md = open(d + "/cmp/three.md").read()
js = json.load(open(d + "/cmp/three.json"))
assert js["quality_metric"] == "relative_error"
assert [r["label"] for r in js["runs"]] == list(runs), [r["label"] for r in js["runs"]]
rows = {line.split("|")[1].strip(): line for line in md.splitlines() if line.startswith("| ")}
pts = {"original": (1.0, 0.0)}
for label, name in runs.items():
    rep = json.load(open(f"{d}/{name}/report.json"))
    wb = rep["weight_bytes"]["optimized"] / rep["weight_bytes"]["original"]
    assert 0 < wb <= 1, (label, wb)  # magnitude pruning keeps a dense f32 weight: 1.0
    q = rep["quality"][sorted(rep["quality"])[0]]
    tr = rep["optimized"]["time_median_us"] / rep["original"]["time_median_us"]
    # the table row: the byte ratio, time ratio and relative error from the run's own report
    row = rows[label]
    assert "(%.3fx)" % wb in row, (label, "%.3fx" % wb, row)
    assert "(%.3fx)" % tr in row, (label, tr, row)
    assert "%.4g" % q["relative_error"] in row, (label, q["relative_error"], row)
    peak = (rep["optimized"]["allocated"] + rep["optimized"]["mapped"]) / (rep["original"]["allocated"] + rep["original"]["mapped"])
    assert "(%.3fx)" % peak in row, (label, peak, row)
    j = next(r for r in js["runs"] if r["label"] == label)
    assert abs(j["weight_bytes"]["ratio"] - wb) < 1e-12 and abs(j["time_median_us"]["ratio"] - tr) < 1e-12, j
    assert j["quality"]["relative_error"] == q["relative_error"] and j["quality"]["mean_cosine"] == q["mean_cosine"], j
    assert j["quality"]["nn_agreement"] == q.get("nn_agreement"), j
    pts[label] = (wb, q["relative_error"])
# the Pareto front, recomputed: nothing else has both fewer bytes and a smaller error
for label, (x, e) in pts.items():
    if label == "original":
        continue
    dom = any(px <= x and pe <= e and (px < x or pe < e) for l, (px, pe) in pts.items() if l != label)
    assert next(r for r in js["runs"] if r["label"] == label)["pareto"] == (not dom), label
    assert rows[label].rstrip().endswith("| %s |" % ("no" if dom else "yes")), rows[label]
assert "| original |" in md and "(1.000x)" in rows["original"]
# the plot: valid standalone XML, a point and a text label per run, the original, the front
svg = xml.dom.minidom.parse(d + "/cmp/three.svg")
root = svg.documentElement
assert root.tagName == "svg" and root.getAttribute("version") == "1.1"
assert root.getAttribute("xmlns") == "http://www.w3.org/2000/svg"
texts = [t.firstChild.data for t in root.getElementsByTagName("text") if t.firstChild]
for label in list(runs) + ["original"]:
    assert label in texts, (label, texts)
assert len(root.getElementsByTagName("circle")) >= len(runs) + 4  # points + legend swatches
assert any("log axis" in t for t in texts) and any("weight bytes / original" in t for t in texts), texts
assert len(root.getElementsByTagName("polyline")) == 1
print("compare ok:", {l: ("%.3f" % x, "%.3g" % e) for l, (x, e) in pts.items()})
PY
python3 -c "import xml.dom.minidom,sys; xml.dom.minidom.parse(sys.argv[1])" "$d/cmp/three.svg" ||
  { echo "FAIL: SVG does not parse"; fails=$((fails + 1)); }
ls "$d/cmp" | grep -q '\.tmp\.' && { echo "FAIL: temporary files left"; fails=$((fails + 1)); }

# a run without --eval: bytes only, not plotted; equal labels made unique by directory
expect_rc 0 "compare with a bytes-only run" -- "$y" compare "$d/int8" "$d/int8-bytes/report.json" -o "$d/cmp/two"
expect_in "| quant.int8 (int8) |" "first label made unique"
expect_in "| quant.int8 (int8-bytes) |" "second label made unique"
expect_in "no --eval |" "bytes-only row"
python3 - "$d" <<'PY' || fails=$((fails + 1))
import json, sys, xml.dom.minidom
d = sys.argv[1]
js = json.load(open(d + "/cmp/two.json"))
b = js["runs"][1]
rep = json.load(open(d + "/int8-bytes/report.json"))
assert b["eval"] is False and b["quality"] is None and "time_median_us" not in b, b
assert b["weight_bytes"]["ratio"] == rep["weight_bytes"]["optimized"] / rep["weight_bytes"]["original"]
texts = [t.firstChild.data for t in xml.dom.minidom.parse(d + "/cmp/two.svg").getElementsByTagName("text") if t.firstChild]
assert any(t.startswith("quant.int8 (int8-bytes) (") for t in texts), texts  # listed as not plotted
PY

# labels with markup characters are escaped in the SVG
mkdir -p "$d/odd"
sed 's/"sequence": "passes"/"sequence": "a<b \& \\"c\\""/' "$d/int4/report.json" >"$d/odd/report.json"
expect_rc 0 "compare a sequence name with markup" -- "$y" compare "$d/odd" -o "$d/cmp/odd"
python3 -c "import xml.dom.minidom,sys; t=[x.firstChild.data for x in xml.dom.minidom.parse(sys.argv[1]).getElementsByTagName('text') if x.firstChild]; assert 'a<b & \"c\"' in t, t" \
  "$d/cmp/odd.svg" || { echo "FAIL: label not escaped"; fails=$((fails + 1)); }

# an exact run with fewer bytes takes the original's place on the Pareto front
mkdir -p "$d/exact"
python3 - "$d/int8/report.json" "$d/exact/report.json" <<'PY' || fails=$((fails + 1))
import json, sys
r = json.load(open(sys.argv[1]))
r["sequence"] = "exact"
for q in r["quality"].values():
    q["relative_error"] = 0.0
json.dump(r, open(sys.argv[2], "w"))
PY
expect_rc 0 "compare with an exact run" -- "$y" compare "$d/int4" "$d/exact" -o "$d/cmp/exact"
expect_in "(1.000x) | 0 | 1 | 1 | 1 | no |" "original dominated by the exact run"
python3 - "$d/cmp/exact.json" <<'PY' || fails=$((fails + 1))
import json, sys
j = json.load(open(sys.argv[1]))
assert j["original"]["pareto"] is False, j["original"]
assert [r["pareto"] for r in j["runs"]] == [True, True], [r["pareto"] for r in j["runs"]]  # int4 has fewer bytes
PY

# usage errors: exit 2
expect_rc 2 "no arguments" -- "$y" compare
expect_in "expected at least one run directory" "no-argument message"
expect_rc 2 "unknown option" -- "$y" compare "$d/int8" --bogus
expect_rc 0 "help" -- "$y" compare --help
expect_in "OUT_PREFIX" "help text"
# bad reports: exit 1, naming the file
mkdir -p "$d/empty" "$d/garbled" "$d/other"
expect_rc 1 "directory without report.json" -- "$y" compare "$d/int8" "$d/empty" -o "$d/cmp/bad"
expect_in "$d/empty/report.json" "missing report named"
expect_rc 1 "no such directory" -- "$y" compare "$d/nowhere" -o "$d/cmp/bad"
expect_in "$d/nowhere" "missing directory named"
head -c 200 "$d/int8/report.json" >"$d/garbled/report.json"
expect_rc 1 "garbled report.json" -- "$y" compare "$d/garbled" -o "$d/cmp/bad"
expect_in "$d/garbled/report.json: not valid JSON" "garbled report named"
mkdir -p "$d/huge" && echo '{"sequence": "x", "weight_bytes": 1e99999}' >"$d/huge/report.json"
expect_rc 1 "a number JSON cannot hold" -- "$y" compare "$d/huge" -o "$d/cmp/bad"
expect_in "$d/huge/report.json: not valid JSON" "out-of-range number named"
echo '{"status": "ok", "tasks": []}' >"$d/other/report.json"
expect_rc 1 "a run report, not an optimize report" -- "$y" compare "$d/other" -o "$d/cmp/bad"
expect_in "$d/other/report.json: missing 'sequence'" "missing key named"
[ ! -e "$d/cmp/bad.md" ] || { echo "FAIL: output written despite an error"; fails=$((fails + 1)); }
finish
