#!/usr/bin/env bash
# Saving and loading data: safetensors and .npy written by a run, read back by another.
source "$(dirname "$0")/lib.sh"
y=$1
expect_rc 0 "save C" -- "$y" run workflows/linalg/tiled_gemm.xml --set n=1024 --set bs=320 --set save=true --out "$tmp/g" --quiet
[ -s "$tmp/g/C.safetensors" ] || { echo "FAIL: C.safetensors missing"; fails=$((fails + 1)); }
cat > "$tmp/reload.xml" <<XML
<workflow name="reload">
  <data name="C" shape="1024,1024" src="$tmp/g/C.safetensors" key="C"/>
  <data name="A" shape="1024,1024" tile="320,320" init="random" seed="1"/>
  <data name="B" shape="1024,1024" tile="320,320" init="random" seed="2"/>
  <data name="R" shape="1024,1024" init="zeros"/>
  <task component="blas.gemm"><in port="a" data="A"/><in port="b" data="B"/><inout port="c" data="R"/></task>
  <task component="tensor.compare" name="reloaded"><in port="a" data="C"/><in port="b" data="R"/><arg name="tol" value="1e-5"/></task>
  <save data="R" to="out/R.npy"/>
</workflow>
XML
expect_rc 0 "reload and compare" -- "$y" run "$tmp/reload.xml" --out "$tmp/r"
expect_in "reloaded (line" "compare result printed"
[ -s "$tmp/r/out/R.npy" ] || { echo "FAIL: R.npy missing"; fails=$((fails + 1)); }
python3 - "$tmp/r/out/R.npy" <<'PY' || fails=$((fails + 1))
import ast, struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:6] == b"\x93NUMPY"
n = struct.unpack("<H", b[8:10])[0]
h = ast.literal_eval(b[10:10 + n].decode())
assert h["descr"] == "<f4" and h["shape"] == (1024, 1024) and not h["fortran_order"], h
assert len(b) == 10 + n + 1024 * 1024 * 4
PY
# a file that does not match its declaration is refused before running
cat > "$tmp/mismatch.xml" <<XML
<workflow name="m"><data name="C" shape="32,1024" src="$tmp/g/C.safetensors" key="C"/>
<task component="tensor.norm"><in port="x" data="C"/></task></workflow>
XML
expect_rc 1 "shape mismatch with the file" -- "$y" run "$tmp/mismatch.xml" --out "$tmp/m"
expect_in "mismatch.xml:1:51: error: 'C' in $tmp/g/C.safetensors is f32[1024,1024] but data 'C' is declared f32[32,1024]" "message"
[ ! -e "$tmp/m" ] || { echo "FAIL: refused at check time, yet a run directory was made"; fails=$((fails + 1)); }
sed 's/key="C"/key="c"/' "$tmp/mismatch.xml" > "$tmp/badkey.xml"
expect_rc 1 "unknown key" -- "$y" check "$tmp/badkey.xml"
expect_in "has no tensor 'c' (did you mean 'C'?)" "message"
# a truncated file gets a clear error, not a crash
head -c 100 "$tmp/g/C.safetensors" > "$tmp/trunc.safetensors"
sed "s#$tmp/g/C.safetensors#$tmp/trunc.safetensors#" "$tmp/mismatch.xml" | sed 's/32,1024/1024,1024/' > "$tmp/trunc.xml"
expect_rc 1 "truncated file" -- "$y" run "$tmp/trunc.xml" --out "$tmp/t"
expect_in "trunc.safetensors: tensor 'C': data_offsets [0, 4194304] run past the data section (20 bytes)" "names the file and the fault"
# three data read the broken file: its header error is reported once, naming the file once
cat > "$tmp/trunc3.xml" <<XML
<workflow name="t3">
  <data name="C" shape="1024,1024" src="$tmp/trunc.safetensors" key="C"/>
  <data name="D" shape="1024,1024" src="$tmp/trunc.safetensors" key="C"/>
  <data name="E" shape="1024,1024" src="$tmp/trunc.safetensors" key="C"/>
  <data name="F" shape="1024,1024"/>
  <task component="tensor.add"><in port="a" data="C"/><in port="b" data="D"/><out port="c" data="F"/></task>
  <task component="tensor.add"><in port="a" data="F"/><in port="b" data="E"/><out port="c" data="F"/></task>
</workflow>
XML
expect_rc 1 "one broken file read three times" -- "$y" check "$tmp/trunc3.xml"
expect_in "trunc3.xml:2:" "the error is at the first data reading the file"
expect_in "1 error in" "reported once"
! grep -q "trunc.safetensors: $tmp/trunc.safetensors" <<<"$out" || { echo "FAIL: the file is named twice"; echo "$out"; fails=$((fails + 1)); }
finish
