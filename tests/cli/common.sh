# Shared by the CLI test scripts (sourced): a temporary directory removed on exit,
# and the failure bookkeeping. The script ends with `exit $fail`.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# expect_rc WANT CMD... : run and compare the exit code (stdout in $tmp/out, stderr in $tmp/err)
expect_rc() {
  local want=$1; shift
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  [ "$rc" -eq "$want" ] || bad "exit $rc (want $want): $* :: $(head -c 400 "$tmp/err")"
}
