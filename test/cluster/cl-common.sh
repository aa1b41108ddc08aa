# Shared helpers for the cluster tests (sourced): a private sim-cluster per test, removed on
# exit; skip (77) where network namespaces cannot be made.
set -u
[ -x "$PWD/nccl-net-bench" ] && : "${NV_TOP_BUILDDIR:=$PWD}"
: "${NV_TOP_BUILDDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${NV_TOP_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
SC="$NV_TOP_SRCDIR/test/cluster/sim-cluster"
BENCH="$NV_TOP_BUILDDIR/nccl-net-bench"
export SIM_CLUSTER="c$(( $$ % 10000000 ))"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/cltest.XXXXXX")
trap '"$SC" down >/dev/null 2>&1; [ -n "${CL_KEEP:-}" ] || rm -rf "$TMP"' EXIT

fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

[ "$(id -u)" = 0 ] || skip "needs root (network namespaces)"
command -v ip >/dev/null && command -v nsenter >/dev/null || skip "needs iproute2 and nsenter"
ip netns add "simc-probe-$$" 2>/dev/null || skip "cannot create network namespaces here"
if ! ip netns exec "simc-probe-$$" unshare --uts --mount true 2>/dev/null; then
	ip netns del "simc-probe-$$"
	skip "cannot enter network, UTS and mount namespaces here"
fi
ip netns del "simc-probe-$$"
[ -x "$BENCH" ] || fail "$BENCH not built"

# cl_up ARGS...: sim-cluster up, host lines in $TMP/hosts
cl_up() {
	"$SC" up --build "$NV_TOP_BUILDDIR" "$@" >"$TMP/hosts" 2>"$TMP/up.err" ||
		{ cat "$TMP/up.err"; fail "sim-cluster up $*"; }
	sed 's/^/    hosts| /' "$TMP/hosts"
}

cl_exec() { "$SC" exec "$@"; }

# cl_addr HOST FIELD: a field of the host's line (2 = management, 3.. = rails)
cl_addr() { awk -v h="$1" -v f="$2" '$1 == h { print $f }' "$TMP/hosts"; }

PORT=$(( 20000 + $$ % 20000 ))

# cl_rank NAME HOST RANK NRANKS DEV ARGS...: one bench rank in the background, output in
# $TMP/NAME.RANK; pids collected in CL_PIDS.
CL_PIDS=()
cl_rank() {
	local name=$1 host=$2 rank=$3 n=$4 dev=$5
	shift 5
	cl_exec "$host" -- timeout -k 5 60 "$BENCH" --rank "$rank" --nranks "$n" \
		--root "$(cl_addr h0 2):$PORT" -d "$dev" -T 50 "$@" >"$TMP/$name.$rank" 2>&1 &
	CL_PIDS+=($!)
}

# cl_wait NAME: waits for the ranks; $rc = number of ranks that failed.
cl_wait() {
	local p
	rc=0
	for p in "${CL_PIDS[@]}"; do wait "$p" || rc=$((rc + 1)); done
	CL_PIDS=()
	PORT=$((PORT + 1))
}

# cl_until SECS CMD...: runs CMD every 50 ms until it succeeds (0) or SECS seconds pass (1); for
# conditions that take a while on a loaded machine, instead of a fixed sleep.
cl_until() {
	local end=$(( $(date +%s) + $1 ))
	shift
	until "$@"; do
		[ "$(date +%s)" -lt "$end" ] || return 1
		sleep 0.05
	done
}

cl_show() { local f; for f in "$TMP/$1".*; do echo "--- ${f##*/}"; tail -n "${2:-25}" "$f"; done; }
