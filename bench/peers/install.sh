#!/usr/bin/env bash
# Installs the peers that bench/peers/run.sh compares mdbus with, from
# Debian's archive:
#
#   sockperf      raw kernel UDP multicast throughput and ping-pong (3.7)
#   libzmq3-dev   ZeroMQ 4.3 built with OpenPGM (epgm://) and NORM (norm://)
#   gcc, pkg-config, jq   to build zmqbench.c and read mdbus's JSON
#
# It shows apt-cache policy first, runs apt-get update once, and installs
# only what is missing. Needs root (or sudo). Exits non-zero, saying why,
# when something cannot be installed; run.sh then reports that peer as
# "n/a (not installed)".
set -uo pipefail

need=()
command -v sockperf >/dev/null 2>&1 || need+=(sockperf)
pkg-config --exists libzmq 2>/dev/null || need+=(libzmq3-dev)
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v jq >/dev/null 2>&1 || need+=(jq)
if ((${#need[@]} == 0)); then
	echo "peers: everything is installed"
	exit 0
fi
echo "peers: installing ${need[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
	echo "peers: no apt-get here; install ${need[*]} by hand" >&2
	exit 1
fi
sudo=()
if [[ $(id -u) != 0 ]]; then
	if command -v sudo >/dev/null 2>&1; then sudo=(sudo -n); else
		echo "peers: not root and no sudo; install ${need[*]} by hand" >&2
		exit 1
	fi
fi
apt-cache policy "${need[@]}" | sed 's/^/  /'
if ! timeout 300 "${sudo[@]}" apt-get update -qq; then
	echo "peers: apt-get update failed or took over 5 minutes" >&2
	exit 1
fi
if ! DEBIAN_FRONTEND=noninteractive timeout 600 "${sudo[@]}" apt-get install -y -qq "${need[@]}"; then
	echo "peers: apt-get install ${need[*]} failed or took over 10 minutes" >&2
	exit 1
fi
echo "peers: installed ${need[*]}"
