#!/bin/sh
# nccl-net-verbs-info --watch over simverbs while nccl-net-bench streams 1 MiB
# messages over simroce0: with packet loss 1e-3 on the link it prints the
# loss diagnosis for simroce0:1 (NAKs, ACK timeouts, "RoCE needs PFC");
# with loss 0 the same traffic shows packet rates and no diagnosis.
INFO="${NV_TOP_BUILDDIR:-.}/nccl-net-verbs-info"
BENCH="${NV_TOP_BUILDDIR:-.}/nccl-net-bench"
[ -x "$INFO" ] && [ -x "$BENCH" ] && [ -n "${NV_TEST_PLUGIN:-}" ] || { echo "not built: skipped"; exit 77; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/watch.XXXXXX")
bpid= wpid=
cleanup() {
	[ -n "$wpid" ] && kill "$wpid" 2>/dev/null
	[ -n "$bpid" ] && kill "$bpid" 2>/dev/null
	wait 2>/dev/null
}
trap 'cleanup; rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; sed 's/^/    | /' "$TMP/watch.out" | tail -n 20; tail -n 5 "$TMP/bench.out"; exit 1; }

# watch LOSS: bench and watcher running; returns once the watcher printed
# what the test waits for (up to 120 s on a loaded machine)
watch() {
	SIMVERBS_CONTROL="loss $1" NCCL_IB_HCA=simroce0 "$BENCH" -p "$NV_TEST_PLUGIN" -t sendrecv \
		-b 1M -e 1M -n 1000000 -w 0 >"$TMP/bench.out" 2>&1 &
	bpid=$!
	"$INFO" --watch 1 >"$TMP/watch.out" 2>&1 &
	wpid=$!
	end=$(($(date +%s) + 120))
	while [ "$(date +%s)" -lt "$end" ] && kill -0 "$bpid" 2>/dev/null; do
		# intervals in which simroce0:1 carried packets
		busy=$(awk '$1 == "simroce0:1" && $4 != "0.0" { n++ } END { print n + 0 }' "$TMP/watch.out")
		[ "$busy" -ge "$2" ] && break
		grep -q "DIAGNOSIS" "$TMP/watch.out" && [ "$1" != 0 ] && break
		sleep 1
	done
	kill "$wpid" "$bpid" 2>/dev/null
	wait 2>/dev/null
	bpid= wpid=
}

watch 0.001 1000
grep -q "DIAGNOSIS: simroce0:1 is losing packets: [0-9]* out-of-sequence NAKs and [0-9]* ACK timeouts" \
	"$TMP/watch.out" || fail "no loss diagnosis for simroce0:1 at loss 1e-3"
grep -q "RoCE needs PFC on the traffic class in use" "$TMP/watch.out" || fail "no PFC/ECN advice"
grep -q "DIAGNOSIS: simib0" "$TMP/watch.out" && fail "diagnosis for simib0, which carried nothing"
grep "DIAGNOSIS" "$TMP/watch.out" | head -n 1

watch 0 3
busy=$(awk '$1 == "simroce0:1" && $4 != "0.0" { n++ } END { print n + 0 }' "$TMP/watch.out")
[ "$busy" -ge 3 ] || fail "the watcher saw no traffic on simroce0:1 at loss 0"
grep -q "DIAGNOSIS" "$TMP/watch.out" && fail "a diagnosis at loss 0"
grep "simroce0:1" "$TMP/watch.out" | tail -n 1
echo "test-info-watch: ok"
