#!/usr/bin/env bash
# Fetches the peer engines that tests/bench/peers.sh compares ymlopt with, from
# the npm registry into a git-ignored cache (pinned versions).
#
#   scripts/fetch_peers.sh [DEST]      # DEST defaults to third_party_cache/peers
#
# Prints DEST (its node_modules/ holds the packages) on stdout; everything else
# goes to stderr. Idempotent: a complete, verified install is reused without
# touching the network. Exits non-zero with a message when npm or the registry
# is unavailable or an installed package does not verify.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$here/third_party_cache/peers}"
# One line per peer. --ignore-scripts: onnxruntime-node's install script only
# downloads CUDA parts; its CPU library ships inside the package.
# node-llama-cpp: llama.cpp prebuilt per CPU (haswell ... zen4, sapphirerapids);
# --omit=optional below skips its CUDA/Vulkan/ARM builds (~650 MB), so the
# linux-x64 CPU one is named here.
packages=(
  onnxruntime-node@1.30.0
  node-llama-cpp@3.21.1
  @node-llama-cpp/linux-x64@3.21.1
)

die() { echo "fetch_peers: $*" >&2; exit 1; }

mkdir -p "$dest" || die "cannot create $dest"
dest="$(cd "$dest" && pwd)"

# Checks that every package is installed at its pinned version and that the
# ones with a native library load it; prints the reason if not.
verify() {
  command -v node >/dev/null 2>&1 || { echo "node is not installed (apt-get install nodejs npm)"; return 1; }
  DEST="$dest" PACKAGES="${packages[*]}" node - <<'JS'
const fs = require('fs'), path = require('path');
const modules = path.join(process.env.DEST, 'node_modules');
// package-specific checks: the package loads and can run on this machine
const checks = {
  'onnxruntime-node': (m) => {
    if (!m.listSupportedBackends().some((b) => b.name === 'cpu')) throw new Error('no cpu backend');
  },
};
for (const spec of process.env.PACKAGES.split(' ')) {
  const at = spec.lastIndexOf('@');
  const name = spec.slice(0, at), ver = spec.slice(at + 1);
  const pj = path.join(modules, name, 'package.json');
  if (!fs.existsSync(pj)) { console.log(`${name} is not installed`); process.exit(1); }
  const v = JSON.parse(fs.readFileSync(pj, 'utf8')).version;
  if (v !== ver) { console.log(`${name} is ${v}, expected ${ver}`); process.exit(1); }
  try {
    if (checks[name]) checks[name](require(path.join(modules, name)));
  } catch (e) { console.log(`${name} does not load: ${e.message}`); process.exit(1); }
}
JS
}

if reason="$(verify 2>&1)"; then
  echo "$dest"
  exit 0
fi
echo "fetch_peers: installing into $dest ($reason)" >&2

command -v npm >/dev/null 2>&1 || die "npm is not installed (Debian: apt-get install nodejs npm; Node >= 18 is needed)"
if ! npm install --no-audit --no-fund --no-save --ignore-scripts --omit=optional --prefix "$dest" "${packages[@]}" >&2; then
  die "npm install failed: is the npm registry ($(npm config get registry 2>/dev/null || echo '?')) reachable?"
fi
reason="$(verify 2>&1)" || die "the installed packages do not verify: $reason"
echo "$dest"
