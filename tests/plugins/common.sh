# Helpers sourced by the tests/plugins/*.sh scripts.
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# run_capture OUT_VAR RC_VAR cmd...: runs cmd, stores stdout+stderr and the exit status.
run_capture() {
  local __out=$1 __rc=$2
  shift 2
  local __o __r=0
  __o=$("$@" 2>&1) || __r=$?
  printf -v "$__out" '%s' "$__o"
  printf -v "$__rc" '%s' "$__r"
  echo "+ $* -> exit $__r"
  # long outputs (e.g. `ymlopt components`) are cut to their last 25 lines
  printf '%s\n' "$__o" | tail -n 25
}

expect_contains() {  # haystack needle what
  [[ "$1" == *"$2"* ]] || fail "$3: output does not contain: $2"
}
