#!/usr/bin/env bash
# A tour of operating mdbus: a publisher, a rewinder and two subscribers
# (one losing 2% of datagrams) run as separate processes in a private
# network namespace; `mdbus stat` shows them live, like top. Ctrl-C ends
# the view, then every process gets SIGTERM and prints its summary.
#
#   scripts/ops-tour.sh            # live view in this terminal
#   scripts/ops-tour.sh --json     # one JSON view instead, for scripts
#
# Needs unshare (util-linux) and ip (iproute2); sends nothing outside the
# namespace. Counters files go to a temporary directory, not /dev/shm.
set -euo pipefail
if [[ "${MDBUS_TOUR_INSIDE:-}" != 1 ]]; then
	cd "$(dirname "$0")/.."
	bin=$(mktemp -d)/mdbus
	go build -o "$bin" ./cmd/mdbus
	exec env MDBUS_TOUR_INSIDE=1 MDBUS_BIN="$bin" unshare -rn bash "$0" "$@"
fi
ip link set lo up
ip link set lo multicast on
ip route add 224.0.0.0/4 dev lo src 127.0.0.1
bin=$MDBUS_BIN
export MDBUS_COUNTERS_DIR
MDBUS_COUNTERS_DIR=$(mktemp -d)
logs=$(mktemp -d)
g=239.192.90.1:31901
"$bin" rewind --group $g --listen 127.0.0.1:31909 --stats 0 2>"$logs/rewind.log" &
"$bin" sub --group $g --retransmit 127.0.0.1:31909 --stats 1s >"$logs/subA.out" 2>"$logs/subA.log" &
"$bin" sub --group $g --retransmit 127.0.0.1:31909 --stats 1s --loss 0.02 >"$logs/subB.out" 2>"$logs/subB.log" &
sleep 0.5
"$bin" pub --group $g --synthetic --rate 20000 --duration 10m 2>"$logs/pub.log" &
sleep 2
if [[ "${1:-}" == --json ]]; then
	"$bin" stat --once --json
else
	"$bin" stat --interval 1s || true # Ctrl-C ends the view
fi
kill -TERM $(jobs -p)
wait
echo "--- summaries (logs in $logs)"
grep -h 'msg=summary' "$logs"/*.log
