# Helpers for the CLI end-to-end scripts.
set -u
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
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
finish() {
  if [ $fails -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
  echo "all checks passed"
}
