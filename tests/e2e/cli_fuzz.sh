#!/usr/bin/env bash
# Mutated inputs never crash ymlopt: seeded random corruptions of a weights file
# (truncation, header bytes, header length, data bytes, lying dtype/shape/offsets),
# of a token-id .npy and of every shipped workflow's XML, each run through
# `ymlopt run` (files) or `ymlopt check` (XML). Every run must end with exit 0, 1
# or 2 within 60 s and without a sanitizer report, abort or signal. Under the
# ASan+UBSan build this is a small fuzzing campaign (FUZZ_N mutations per kind,
# default 40; FUZZ_SEED, default 1).
source "$(dirname "$0")/lib.sh"
y=$1
expect_rc 0 "tiny GPT-2 weights" -- "$y" model init --arch gpt2 --preset tiny "$tmp/g.safetensors"
write_ids "$tmp/ids.npy" 64
expect_rc 0 "the unmutated run" -- "$y" run workflows/models/gpt2.xml --set weights="$tmp/g.safetensors" \
  --set ids="$tmp/ids.npy" --set batch=2 --set seq=32 --set layers=2 --set width=96 --set heads=3 --set vocab=512 \
  --set context=64 --set tile_n=32 -q -b sequential -o "$tmp/r0"
cp -r workflows "$tmp/wf"
python3 - "$y" "$tmp" "${FUZZ_N:-40}" "${FUZZ_SEED:-1}" <<'PY' || fails=$((fails + 1))
import json, os, random, re, shutil, struct, subprocess, sys
y, tmp, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
random.seed(seed)
S = ['--set', 'batch=2', '--set', 'seq=32', '--set', 'layers=2', '--set', 'width=96', '--set', 'heads=3',
     '--set', 'vocab=512', '--set', 'context=64', '--set', 'tile_n=32']
env = dict(os.environ, ASAN_OPTIONS=os.environ.get('ASAN_OPTIONS', 'detect_leaks=0'), STARPU_SILENT='1')
crash_marks = ('AddressSanitizer', 'runtime error:', 'terminate called', 'Segmentation fault', 'Aborted')
bad, runs, codes, usage = [], 0, {}, []
def run(args, what):
    global runs
    runs += 1
    try:
        p = subprocess.run([y] + args, capture_output=True, text=True, timeout=60, env=env)
    except subprocess.TimeoutExpired:
        bad.append(f'{what}: no exit within 60 s')
        return
    out = p.stdout + p.stderr
    codes[p.returncode] = codes.get(p.returncode, 0) + 1
    if p.returncode == 2:
        usage.append(f'{what}: {out.strip().splitlines()[-1] if out.strip() else ""}')
    if p.returncode not in (0, 1, 2) or any(m in out for m in crash_marks):
        bad.append(f'{what}: exit {p.returncode}\n' + out[-1200:])
    shutil.rmtree(os.path.join(tmp, 'r'), ignore_errors=True)
wf = os.path.join(tmp, 'wf')
model = os.path.join(wf, 'models', 'gpt2.xml')
base = open(os.path.join(tmp, 'g.safetensors'), 'rb').read()
hlen = struct.unpack('<Q', base[:8])[0]
keys = [k for k in json.loads(base[8:8 + hlen]) if k != '__metadata__']
for i in range(n * 5):
    kind = ['trunc', 'header bytes', 'header length', 'data bytes', 'header fields'][i % 5]
    b = bytearray(base)
    if kind == 'trunc':
        b = b[:random.randrange(len(b))]
    elif kind == 'header bytes':
        for _ in range(random.randint(1, 4)):
            b[8 + random.randrange(hlen)] = random.randrange(256)
    elif kind == 'header length':
        b[:8] = struct.pack('<Q', random.choice([0, 1, 7, hlen - 1, hlen + 1, len(b), 2**40, 2**63 + 5,
                                                 random.randrange(2**64)]))
    elif kind == 'data bytes':
        for _ in range(50):
            b[8 + hlen + random.randrange(len(b) - 8 - hlen)] = random.randrange(256)
    else:
        h = json.loads(bytes(b[8:8 + hlen]))
        k = random.choice(keys)
        f = random.choice(['dtype', 'shape', 'data_offsets', 'drop'])
        if f == 'drop':
            del h[k]
        elif f == 'dtype':
            h[k]['dtype'] = random.choice(['F16', 'BF16', 'I8', 'F64', 'U8', 'XX', 7])
        elif f == 'shape':
            h[k]['shape'] = random.choice([[], [0], [-1, 5], [2**40, 2**40], h[k]['shape'][::-1], [1] + h[k]['shape'], 'x'])
        else:
            o = h[k]['data_offsets']
            h[k]['data_offsets'] = random.choice([[o[1], o[0]], [o[0], o[1] + 4], [o[0] - 4, o[1]], [0, 2**62], [o[0]],
                                                  None, [-8, 0]])
        hj = json.dumps(h).encode()
        b = bytearray(struct.pack('<Q', len(hj))) + hj + b[8 + hlen:]
    m = os.path.join(tmp, 'm.safetensors')
    open(m, 'wb').write(b)
    run(['run', model] + S + ['--set', 'weights=' + m, '--set', 'ids=' + os.path.join(tmp, 'ids.npy'), '-q',
         '-b', 'sequential', '-o', os.path.join(tmp, 'r')], f'weights, {kind} #{i}')
ids = open(os.path.join(tmp, 'ids.npy'), 'rb').read()
for i in range(n):
    b = bytearray(ids)
    kind = ['trunc', 'header', 'header length', 'data'][i % 4]
    if kind == 'trunc':
        b = b[:random.randrange(len(b))]
    elif kind == 'header':
        for _ in range(random.randint(1, 3)):
            b[random.randrange(8, 128)] = random.randrange(32, 127)
    elif kind == 'header length':
        b[8:10] = random.randrange(65536).to_bytes(2, 'little')
    else:
        for _ in range(10):
            b[random.randrange(128, len(b))] = random.randrange(256)
    m = os.path.join(tmp, 'm.npy')
    open(m, 'wb').write(b)
    run(['run', model] + S + ['--set', 'weights=' + os.path.join(tmp, 'g.safetensors'), '--set', 'ids=' + m, '-q',
         '-b', 'sequential', '-o', os.path.join(tmp, 'r')], f'ids, {kind} #{i}')
xmls = sorted(os.path.join(d, f) for d, _, fs in os.walk(wf) for f in fs if f.endswith('.xml'))
for i in range(n * 2):
    src = random.choice(xmls)
    t = open(src).read()
    op = ['delete', 'duplicate', 'replace', 'number', 'cut'][i % 5]
    p = random.randrange(len(t))
    if op == 'delete':
        t = t[:p] + t[p + random.randint(1, 8):]
    elif op == 'duplicate':
        q = random.randrange(len(t))
        t = t[:p] + t[q:q + random.randint(1, 40)] + t[p:]
    elif op == 'replace':
        t = t[:p] + random.choice('<>/"=${}[],0-9 \n') + t[p + 1:]
    elif op == 'number':
        ms = list(re.finditer(r'\d+', t))
        if ms:
            mm = random.choice(ms)
            t = t[:mm.start()] + random.choice(['0', '-1', '99999999999', '1e9', '2147483648']) + t[mm.end():]
    else:
        t = t[:p]
    dst = os.path.join(os.path.dirname(src), 'fuzz_' + os.path.basename(src))
    open(dst, 'w').write(t)
    sets = S + ['--set', 'weights=' + os.path.join(tmp, 'g.safetensors')] if src == model else []
    run(['check', dst] + sets, f'xml, {op} of {os.path.relpath(src, wf)} #{i}')
    os.remove(dst)
print(f'{runs} mutated runs, exit codes {dict(sorted(codes.items()))}')
for u in usage[:5]:
    print('  exit 2 (usage):', u)
for b in bad:
    print('FAIL:', b)
sys.exit(1 if bad else 0)
PY
finish
