#!/usr/bin/env bash
# Fetches Jane Austen's six novels (Debian's r-cran-janeaustenr, public-domain
# text) without installing R, and writes a deterministic sample of N sentences,
# one per line (scripts/austen_sentences.py reads the package's R data).
#
#   scripts/fetch_austen.sh [N] [DEST]   # N defaults to 300, DEST to third_party_cache/austen
#
# Prints the sentence file (DEST/sentences-N.txt) on stdout; everything else
# goes to stderr. Idempotent: the .deb, the extracted package and every
# sentence file are cached and reused without touching the network. Exits
# non-zero with a message when apt-get, dpkg-deb or the package is unavailable.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
n="${1:-300}"
dest="${2:-$here/third_party_cache/austen}"
die() { echo "fetch_austen: $*" >&2; exit 1; }
[[ "$n" =~ ^[1-9][0-9]*$ ]] || die "N must be a positive integer, got '$n'"

mkdir -p "$dest" || die "cannot create $dest"
dest="$(cd "$dest" && pwd)"
data="$dest/pkg/usr/lib/R/site-library/janeaustenr/data"
out="$dest/sentences-$n.txt"

if [ ! -f "$data/Rdata.rdb" ] || [ ! -f "$data/Rdata.rdx" ]; then
  deb=$(ls "$dest"/r-cran-janeaustenr_*_all.deb 2>/dev/null | head -1 || true)
  if [ -z "$deb" ]; then
    command -v apt-get >/dev/null 2>&1 || die "apt-get is not available (a Debian/Ubuntu system is needed)"
    # apt-get download writes into the current directory; as root it warns that
    # the _apt user cannot write there (harmless), so download in a world-writable temp dir
    dl=$(mktemp -d)
    chmod 777 "$dl"
    (cd "$dl" && apt-get download r-cran-janeaustenr >&2) ||
      { rm -rf "$dl"; die "apt-get download r-cran-janeaustenr failed (try apt-get update)"; }
    mv "$dl"/r-cran-janeaustenr_*_all.deb "$dest/"
    rm -rf "$dl"
    deb=$(ls "$dest"/r-cran-janeaustenr_*_all.deb | head -1)
  fi
  command -v dpkg-deb >/dev/null 2>&1 || die "dpkg-deb is not available"
  rm -rf "$dest/pkg.tmp"
  dpkg-deb -x "$deb" "$dest/pkg.tmp" || die "cannot extract $deb"
  [ -f "$dest/pkg.tmp/usr/lib/R/site-library/janeaustenr/data/Rdata.rdb" ] || die "$deb has no janeaustenr/data/Rdata.rdb"
  rm -rf "$dest/pkg"
  mv "$dest/pkg.tmp" "$dest/pkg"
fi

if [ ! -s "$out" ]; then
  /usr/bin/python3 "$here/scripts/austen_sentences.py" "$data" "$out" "$n" >&2 || die "austen_sentences.py failed"
fi
echo "$out"
