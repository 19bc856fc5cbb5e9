#!/usr/bin/env bash
# Compares mdbus with its peers in one run, in one private network lab, with
# the same message size and rates, and prints one table:
#
#   mdbus            mdbus bench (MoldUDP64 packets, many messages each)
#   mdbus spin       the same, subscriber busy-polling (--busy-poll), one way only
#   raw UDP          mdbus bench's plain-socket baseline (one datagram per message)
#   sockperf         raw kernel UDP multicast, sockperf 3.7 (Debian)
#   ZeroMQ PGM       PUB/SUB over OpenPGM, epgm:// (Debian libzmq, zmqbench.c)
#   ZeroMQ NORM      PUB/SUB over NORM, norm:// (same)
#
# Each system gets: throughput one publisher -> one subscriber (--duration),
# a round trip at --rate msgs/s, and one-way latency at --rate. Latency
# stamps are scheduled send times (coordinated omission corrected)
# everywhere except sockperf, which times its own pings with one in flight.
# mdbus runs with its retransmitter, as PGM and NORM run with theirs.
#
# Usage: bench/peers/run.sh [--size 64] [--rate 10000] [--duration 10]
#                           [--zmq-rate 300000] [--mdbus-rate 4M] [--busy-poll 100us]
#                           [--out DIR] [--no-install]
#
# Throughput is measured as fast as each system goes and then, for a
# zero-loss figure, paced: mdbus at --mdbus-rate, ZeroMQ at 90% of what it
# delivered as fast as it went. "zero-loss msgs/s" is the best run in which
# every message arrived.
#
# Missing peers are installed with install.sh (apt-get; root) unless
# --no-install; a peer that cannot be installed, built or run, or that
# stalls, appears as "n/a (reason)". Everything runs inside the lab that
# "mdbus bench" uses (a user + network namespace; nothing reaches a real
# network): the script re-executes itself there through "mdbus bench lab".
set -uo pipefail

SIZE=64 RATE=10000 DURATION=10 ZMQ_RATE=300000 MDBUS_RATE=4M BUSY_POLL=100us OUT="" INSTALL=yes INSIDE=""
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
while (($#)); do
	case $1 in
	--size) SIZE=${2:-}; shift 2 ;;
	--rate) RATE=${2:-}; shift 2 ;;
	--duration) DURATION=${2:-}; shift 2 ;;
	--zmq-rate) ZMQ_RATE=${2:-}; shift 2 ;;
	--mdbus-rate) MDBUS_RATE=${2:-}; shift 2 ;;
	--busy-poll) BUSY_POLL=${2:-}; shift 2 ;;
	--out) OUT=${2:-}; shift 2 ;;
	--no-install) INSTALL=no; shift ;;
	--inside) INSIDE=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "run.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
	esac
done
int() { [[ $1 =~ ^[0-9]+$ ]]; }
int "$SIZE" && ((SIZE >= 16 && SIZE <= 1450)) || { echo "run.sh: --size $SIZE: want 16 to 1450 bytes" >&2; exit 2; }
int "$RATE" && ((RATE >= 1 && RATE <= 1000000)) || { echo "run.sh: --rate $RATE: want 1 to 1000000 msgs/s" >&2; exit 2; }
int "$DURATION" && ((DURATION >= 1 && DURATION <= 600)) || { echo "run.sh: --duration $DURATION: want 1 to 600 seconds" >&2; exit 2; }
int "$ZMQ_RATE" && ((ZMQ_RATE >= 1)) || { echo "run.sh: --zmq-rate $ZMQ_RATE: want kbit/s above 0" >&2; exit 2; }
[[ $BUSY_POLL =~ ^[0-9]+(us|µs|ms)$ ]] || { echo "run.sh: --busy-poll $BUSY_POLL: want a duration like 100us (at most 10ms)" >&2; exit 2; }
[[ $MDBUS_RATE =~ ^[0-9]+(\.[0-9]+)?[kM]?$ ]] || { echo "run.sh: --mdbus-rate $MDBUS_RATE: want a rate like 4M or 500k" >&2; exit 2; }

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-$ROOT/bench-results/peers-$(date +%Y%m%d-%H%M%S)}
ARGS=(--size "$SIZE" --rate "$RATE" --duration "$DURATION" --zmq-rate "$ZMQ_RATE" --mdbus-rate "$MDBUS_RATE" --busy-poll "$BUSY_POLL" --out "$OUT")

if [[ -z $INSIDE ]]; then
	mkdir -p "$OUT" && touch "$OUT/.w" && rm -f "$OUT/.w" || { echo "run.sh: --out $OUT is not writable" >&2; exit 2; }
	: >"$OUT/na.txt"
	if [[ $INSTALL == yes ]]; then
		bash "$HERE/install.sh" 2>&1 | tee "$OUT/install.log" || true
	fi
	command -v sockperf >/dev/null 2>&1 || echo "sockperf=not installed (apt-get install sockperf)" >>"$OUT/na.txt"
	command -v jq >/dev/null 2>&1 || { echo "run.sh: jq is needed to read mdbus's JSON (apt-get install jq)" >&2; exit 1; }
	echo "== building mdbus"
	(cd "$ROOT" && go build -o "$OUT/mdbus" ./cmd/mdbus) || { echo "run.sh: cannot build mdbus" >&2; exit 1; }
	if pkg-config --exists libzmq 2>/dev/null; then
		echo "== building zmqbench ($(pkg-config --modversion libzmq))"
		cc -O2 -o "$OUT/zmqbench" "$HERE/zmqbench.c" $(pkg-config --cflags --libs libzmq) -lpthread -lm 2>"$OUT/zmqbench-build.log" ||
			echo "zmq=zmqbench.c did not build (see zmqbench-build.log)" >>"$OUT/na.txt"
	else
		echo "zmq=libzmq not installed (apt-get install libzmq3-dev)" >>"$OUT/na.txt"
	fi
	echo "== entering the lab"
	exec "$OUT/mdbus" bench lab -- bash "$HERE/run.sh" --inside "${ARGS[@]}"
fi

# ---- inside the lab ----
[[ ${MDBUS_NETLAB:-} == 1 ]] || { echo "run.sh: --inside outside the lab" >&2; exit 1; }
MDBUS=$OUT/mdbus ZMQB=$OUT/zmqbench
T=$((DURATION + 30)) # the most any one process may take
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
na() { grep -m1 "^$1=" "$OUT/na.txt" 2>/dev/null | cut -d= -f2-; }
kv() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2" | head -1; }
declare -A R # R[system,field]

echo "== lab: $(ip -br addr show lo | tr -s ' '); load $LOAD; size $SIZE B, latency rate $RATE msgs/s, ${DURATION}s per run"

# -- mdbus and raw UDP, through mdbus bench --
echo "== mdbus bench throughput (mdbus and raw UDP)"
# --recovery: mdbus runs with its retransmitter, as PGM and NORM run with
# their repair machinery.
timeout $((5 * T)) "$MDBUS" bench throughput --recovery --size "$SIZE" --rate "max,$MDBUS_RATE" --duration "${DURATION}s" --out "$OUT" --name mdbus-throughput >"$OUT/mdbus-throughput.txt" 2>&1
cat "$OUT/mdbus-throughput.txt"
echo "== mdbus bench latency (mdbus and raw UDP, round trip and one way)"
timeout $((5 * T)) "$MDBUS" bench latency --recovery --size "$SIZE" --rate "$RATE" --mode both --duration "${DURATION}s" --out "$OUT" --name mdbus-latency >"$OUT/mdbus-latency.txt" 2>&1
cat "$OUT/mdbus-latency.txt"
TJ=$OUT/mdbus-throughput.json LJ=$OUT/mdbus-latency.json
for sys in mdbus raw; do
	if [[ -s $TJ ]]; then
		R[$sys,tput]=$(jq -r --arg s "$sys" '[.throughput[]|select(.system==$s and .offered_rate==0)][0].subs[0] | "\(.msgs_per_s|floor)"' "$TJ")
		R[$sys,loss]=$(jq -r --arg s "$sys" '[.throughput[]|select(.system==$s and .offered_rate==0)][0].subs[0] | "lost \(.lost), kernel drops \(.kernel_drops)"' "$TJ")
		R[$sys,zero]=$(jq -r --arg s "$sys" '[.throughput[]|select(.system==$s and .complete)|.min_msgs_per_s]|max // empty|floor' "$TJ")
		[[ -n ${R[$sys,zero]} ]] || R[$sys,zero]="none complete (tried max, $MDBUS_RATE)"
	fi
	if [[ -s $LJ ]]; then
		for m in round-trip one-way; do
			R[$sys,$m]=$(jq -r --arg s "$sys" --arg m "$m" '[.latency[]|select(.system==$s and .mode==$m)][0].latency | "\(.p50/1000) \(.p99/1000) \(.p99_9/1000)"' "$LJ")
		done
	fi
done
R[mdbus,note]="MoldUDP64, $(jq -r '.settings.payload_size' "$TJ" 2>/dev/null) B packets, with retransmitter"
# One way again with the subscriber busy-polling its socket (a CPU spent
# to skip the poller's wake-up): how a feed handler with a core to spare
# runs it. Round trip is left out: three spinners on two cores starve.
echo "== mdbus bench latency --busy-poll $BUSY_POLL (one way)"
timeout $((3 * T)) "$MDBUS" bench latency --recovery --systems mdbus --busy-poll "$BUSY_POLL" --size "$SIZE" --rate "$RATE" --mode oneway --duration "${DURATION}s" --out "$OUT" --name mdbus-busypoll >"$OUT/mdbus-busypoll.txt" 2>&1
cat "$OUT/mdbus-busypoll.txt"
BJ=$OUT/mdbus-busypoll.json
if [[ -s $BJ ]]; then
	R[mdbus-bp,one-way]=$(jq -r '[.latency[]|select(.system=="mdbus" and .mode=="one-way")][0].latency | "\(.p50/1000) \(.p99/1000) \(.p99_9/1000)"' "$BJ")
fi
R[mdbus-bp,tput]="-" R[mdbus-bp,zero]="-" R[mdbus-bp,round-trip]="-"
R[mdbus-bp,note]="subscriber --busy-poll $BUSY_POLL (one way only)"
R[raw,note]="plain sockets, sendmmsg/recvmmsg"

# -- sockperf --
GROUP=239.255.0.1 PORT=11111
if [[ -z $(na sockperf) ]]; then
	echo "== sockperf throughput"
	sp_common=(-i "$GROUP" -p "$PORT" --mc-tx-if 127.0.0.1 --mc-loopback-enable --mc-ttl 0)
	timeout $T sockperf server -i "$GROUP" -p "$PORT" --mc-rx-if 127.0.0.1 --mc-tx-if 127.0.0.1 --mc-loopback-enable --mc-ttl 0 >"$OUT/sockperf-server.txt" 2>&1 &
	SP=$!
	sleep 0.5
	drops0=$(awk '/^Udp:/{n++} /^Udp:/&&n==2{print $6}' /proc/net/snmp)
	timeout $T sockperf throughput "${sp_common[@]}" -m "$SIZE" -t "$DURATION" >"$OUT/sockperf-throughput.txt" 2>&1
	drops1=$(awk '/^Udp:/{n++} /^Udp:/&&n==2{print $6}' /proc/net/snmp)
	kill -INT $SP 2>/dev/null
	wait $SP 2>/dev/null
	sent=$(sed -n 's/.*Total of \([0-9]*\) messages sent in \([0-9.]*\) sec.*/\1 \2/p' "$OUT/sockperf-throughput.txt")
	recv=$(sed -n 's/.*Total \([0-9]*\) messages received.*/\1/p' "$OUT/sockperf-server.txt" | tail -1)
	if [[ -n $sent && -n $recv ]]; then
		read -r n secs <<<"$sent"
		R[sockperf,tput]=$(awk -v r="$recv" -v s="$secs" 'BEGIN{printf "%d", r/s}')
		R[sockperf,loss]="sent $n, kernel drops $((drops1 - drops0))"
		if ((drops1 == drops0)) && ((recv >= n)); then
			R[sockperf,zero]=${R[sockperf,tput]}
		else
			mps=$((${R[sockperf,tput]} * 9 / 10))
			echo "== sockperf throughput paced at $mps msgs/s"
			timeout $T sockperf server -i "$GROUP" -p "$PORT" --mc-rx-if 127.0.0.1 --mc-tx-if 127.0.0.1 --mc-loopback-enable --mc-ttl 0 >"$OUT/sockperf-server-paced.txt" 2>&1 &
			SP=$!
			sleep 0.5
			drops0=$(awk '/^Udp:/{n++} /^Udp:/&&n==2{print $6}' /proc/net/snmp)
			timeout $T sockperf throughput "${sp_common[@]}" -m "$SIZE" -t "$DURATION" --mps "$mps" >"$OUT/sockperf-throughput-paced.txt" 2>&1
			drops1=$(awk '/^Udp:/{n++} /^Udp:/&&n==2{print $6}' /proc/net/snmp)
			kill -INT $SP 2>/dev/null
			wait $SP 2>/dev/null
			sent=$(sed -n 's/.*Total of \([0-9]*\) messages sent in \([0-9.]*\) sec.*/\1 \2/p' "$OUT/sockperf-throughput-paced.txt")
			recv=$(sed -n 's/.*Total \([0-9]*\) messages received.*/\1/p' "$OUT/sockperf-server-paced.txt" | tail -1)
			read -r n secs <<<"${sent:-0 1}"
			if [[ -n $recv ]] && ((drops1 == drops0 && recv >= n && n > 0)); then
				R[sockperf,zero]=$(awk -v r="$recv" -v s="$secs" 'BEGIN{printf "%d", r/s}')
			else
				R[sockperf,zero]="none (paced at $mps: kernel drops $((drops1 - drops0)))"
			fi
		fi
	else
		R[sockperf,tput]="n/a (no summary; see sockperf-throughput.txt)"
	fi
	echo "== sockperf ping-pong at $RATE msgs/s"
	timeout $T sockperf server -i "$GROUP" -p "$PORT" --mc-rx-if 127.0.0.1 --mc-tx-if 127.0.0.1 --mc-loopback-enable --mc-ttl 0 >"$OUT/sockperf-server2.txt" 2>&1 &
	SP=$!
	sleep 0.5
	timeout $T sockperf ping-pong "${sp_common[@]}" -m "$SIZE" -t "$DURATION" --mps "$RATE" --full-rtt >"$OUT/sockperf-pingpong.txt" 2>&1
	kill -INT $SP 2>/dev/null
	wait $SP 2>/dev/null
	pct() { sed -n "s/.*percentile $1 = *\([0-9.]*\).*/\1/p" "$OUT/sockperf-pingpong.txt" | head -1; }
	if [[ -n $(pct 50.000) ]]; then
		R[sockperf,round-trip]="$(pct 50.000) $(pct 99.000) $(pct 99.900)"
	else
		R[sockperf,round-trip]="n/a (no observations; see sockperf-pingpong.txt)"
	fi
	R[sockperf,one-way]="n/a (sockperf times round trips only)"
	R[sockperf,note]="ping multicast, pong unicast; one ping in flight, so a stall counts once (coordinated omission)"
else
	for f in tput round-trip one-way; do R[sockperf,$f]="n/a ($(na sockperf))"; done
fi

# -- ZeroMQ over PGM and NORM --
zmq_run() { # name, endpoint-for-pub, endpoint-for-sub, A-pub, A-sub, B-pub, B-sub
	local name=$1 pubE=$2 subE=$3 aPub=$4 aSub=$5 bPub=$6 bSub=$7 out
	echo "== ZeroMQ $name throughput"
	timeout $T "$ZMQB" sub --endpoint "$subE" --duration "$DURATION" >"$OUT/zmq-$name-tput-sub.txt" 2>"$OUT/zmq-$name-tput-sub.err" &
	local S=$!
	sleep 0.3
	timeout $T "$ZMQB" pub --endpoint "$pubE" --duration "$DURATION" --rate 0 --size "$SIZE" --zmq-rate "$ZMQ_RATE" >"$OUT/zmq-$name-tput-pub.txt" 2>"$OUT/zmq-$name-tput-pub.err"
	wait $S
	out=$(cat "$OUT/zmq-$name-tput-sub.txt")
	local sent recv miss
	sent=$(kv sent "$(cat "$OUT/zmq-$name-tput-pub.txt")") recv=$(kv received "$out") miss=$(kv missing "$out")
	if [[ -n $recv && $recv -gt 0 ]]; then
		R[$name,tput]=$(kv rate "$out")
		R[$name,loss]="sent $sent, missing $miss$([[ $(kv ended "$out") == 1 ]] || echo ', STALLED')"
		R[$name,zero]="none"
		[[ $miss == 0 && $(kv ended "$out") == 1 ]] && R[$name,zero]=${R[$name,tput]}
		local paced=$((${R[$name,tput]} * 9 / 10))
		if [[ ${R[$name,zero]} == none ]] && ((paced > 0)); then
			echo "== ZeroMQ $name throughput paced at $paced msgs/s"
			timeout $T "$ZMQB" sub --endpoint "$subE" --duration "$DURATION" >"$OUT/zmq-$name-paced-sub.txt" 2>"$OUT/zmq-$name-paced-sub.err" &
			S=$!
			sleep 0.3
			timeout $T "$ZMQB" pub --endpoint "$pubE" --duration "$DURATION" --rate "$paced" --size "$SIZE" --zmq-rate "$ZMQ_RATE" >"$OUT/zmq-$name-paced-pub.txt" 2>"$OUT/zmq-$name-paced-pub.err"
			wait $S
			out=$(cat "$OUT/zmq-$name-paced-sub.txt")
			if [[ $(kv missing "$out") == 0 && $(kv ended "$out") == 1 && $(kv received "$out") -gt 0 ]]; then
				R[$name,zero]=$(kv rate "$out")
			else
				R[$name,zero]="none (paced at $paced: received $(kv received "$out"), missing $(kv missing "$out"))"
			fi
		fi
	else
		R[$name,tput]="n/a (received nothing; stalled)"
	fi
	echo "== ZeroMQ $name round trip at $RATE msgs/s"
	timeout $T "$ZMQB" pong --endpoint "$aSub" --reply "$bPub" --duration "$DURATION" >"$OUT/zmq-$name-pong.txt" 2>"$OUT/zmq-$name-pong.err" &
	S=$!
	sleep 0.3
	timeout $T "$ZMQB" ping --endpoint "$aPub" --reply "$bSub" --duration "$DURATION" --rate "$RATE" --size "$SIZE" --zmq-rate "$ZMQ_RATE" \
		--hgrm "$OUT/zmq-$name-rtt.hgrm" >"$OUT/zmq-$name-ping.txt" 2>"$OUT/zmq-$name-ping.err"
	wait $S
	out=$(grep '^ping zmq' "$OUT/zmq-$name-ping.txt")
	R[$name,round-trip]=$(zmq_lat "$out" "$((RATE * DURATION))")
	echo "== ZeroMQ $name one way at $RATE msgs/s"
	timeout $T "$ZMQB" sub --endpoint "$subE" --duration "$DURATION" --latency --hgrm "$OUT/zmq-$name-oneway.hgrm" >"$OUT/zmq-$name-oneway-sub.txt" 2>"$OUT/zmq-$name-oneway-sub.err" &
	S=$!
	sleep 0.3
	timeout $T "$ZMQB" pub --endpoint "$pubE" --duration "$DURATION" --rate "$RATE" --size "$SIZE" --zmq-rate "$ZMQ_RATE" >/dev/null 2>&1
	wait $S
	R[$name,one-way]=$(zmq_lat "$(cat "$OUT/zmq-$name-oneway-sub.txt")" "$((RATE * DURATION))")
}
zmq_lat() { # result line, messages expected
	local line=$1 want=$2 got
	got=$(kv received "$line")
	if [[ -z $got || $got == 0 ]]; then
		echo "n/a (received nothing; stalled)"
	elif [[ $(kv samples "$line") == 0 ]]; then
		echo "n/a (stalled after $got of $want messages)"
	elif ((got < want * 9 / 10)); then
		echo "$(kv p50_us "$line") $(kv p99_us "$line") $(kv p99_9_us "$line") (stalled: $got of $want)"
	else
		echo "$(kv p50_us "$line") $(kv p99_us "$line") $(kv p99_9_us "$line")"
	fi
}
if [[ -z $(na zmq) && -x $ZMQB ]]; then
	zmq_run pgm "epgm://127.0.0.1;239.192.1.1:5555" "epgm://127.0.0.1;239.192.1.1:5555" \
		"epgm://127.0.0.1;239.192.1.2:5556" "epgm://127.0.0.1;239.192.1.2:5556" \
		"epgm://127.0.0.1;239.192.1.3:5557" "epgm://127.0.0.1;239.192.1.3:5557"
	R[pgm,note]="ZMQ_RATE $ZMQ_RATE kbit/s, recovery 1 s, HWM 100k"
	# NORM needs a distinct node id per endpoint on one host.
	zmq_run norm "norm://1,127.0.0.1;239.192.2.1:5565" "norm://2,127.0.0.1;239.192.2.1:5565" \
		"norm://3,127.0.0.1;239.192.2.2:5566" "norm://4,127.0.0.1;239.192.2.2:5566" \
		"norm://5,127.0.0.1;239.192.2.3:5567" "norm://6,127.0.0.1;239.192.2.3:5567"
	R[norm,note]="libzmq ignores ZMQ_RATE for NORM"
else
	for s in pgm norm; do for f in tput round-trip one-way; do R[$s,$f]="n/a ($(na zmq))"; done; done
fi

# -- one table --
lat() { # "p50 p99 p99.9 [note]" -> formatted
	local v=$1
	[[ $v == n/a* || $v == - || -z $v ]] && { echo "${v:-n/a}"; return; }
	awk '{printf "%.1f / %.1f / %.1f", $1, $2, $3; for (i = 4; i <= NF; i++) printf " %s", $i}' <<<"$v"
}
num() { [[ $1 =~ ^[0-9]+$ ]] && sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"$1" || echo "${1:-n/a}"; }
{
	echo
	echo "Peers, one lab, one run: $(date -u +%FT%TZ); $(nproc) cores, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), Linux $(uname -r); load at start $LOAD, at end $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "Messages of $SIZE B. Throughput: 1 publisher -> 1 subscriber, ${DURATION}s, delivered msgs/s, as fast as it goes and (zero-loss) the best run with every message delivered. Latency at $RATE msgs/s offered, µs p50 / p99 / p99.9."
	echo
	printf "%-12s | %12s | %-36s | %-14s | %-26s | %-26s | %s\n" system "max msgs/s" "loss at max" "zero-loss m/s" "round trip µs" "one way µs" "notes"
	printf "%-12s-+-%12s-+-%-36s-+-%-14s-+-%-26s-+-%-26s-+-%s\n" ------------ ------------ ------------------------------------ -------------- -------------------------- -------------------------- -----
	for s in mdbus mdbus-bp raw sockperf pgm norm; do
		case $s in mdbus-bp) label="mdbus spin" ;; raw) label="raw UDP" ;; pgm) label="ZeroMQ PGM" ;; norm) label="ZeroMQ NORM" ;; *) label=$s ;; esac
		printf "%-12s | %12s | %-36s | %-14s | %-26s | %-26s | %s\n" "$label" "$(num "${R[$s,tput]:-n/a}")" "${R[$s,loss]:-}" "$(num "${R[$s,zero]:-n/a}")" \
			"$(lat "${R[$s,round-trip]:-n/a}")" "$(lat "${R[$s,one-way]:-n/a}")" "${R[$s,note]:-}"
	done
} | tee "$OUT/peers-table.txt"
# One chart of every latency spectrum measured.
charts=("$OUT"/mdbus-latency.json)
for f in "$OUT"/zmq-*-rtt.hgrm "$OUT"/zmq-*-oneway.hgrm; do [[ -s $f ]] && charts+=("$f"); done
"$MDBUS" bench chart -o "$OUT/peers.svg" "${charts[@]}" >/dev/null 2>&1 && echo "chart: $OUT/peers.svg"
echo "files: $OUT"
