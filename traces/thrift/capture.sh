#!/usr/bin/env bash
# Captures a real Apache Thrift pair (python thrift, Debian's thrift-compiler) in network
# namespaces: a client calling Users (compact protocol, unframed) and Posts (binary
# protocol, framed), one capture per host, into this directory (see README.md). Needs
# root; installs what is missing. Usage: traces/thrift/capture.sh [ROUNDS]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${CAPTURE_DIR:-$here}  # where the captures go
rounds=${1:-200}
[ "$(id -u)" = 0 ] || { echo "capture.sh: needs root (network namespaces)" >&2; exit 2; }
if ! command -v thrift >/dev/null || ! command -v tcpdump >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq thrift-compiler tcpdump >/dev/null
fi
python3 -c 'import thrift' 2>/dev/null || pip install -q thrift

declare -A address=([client]=10.80.0.10 [users]=10.80.0.20 [posts]=10.80.0.30)
hosts=(client users posts)
work=$(mktemp -d)
pids=()

prefix=th
source "$here/../netns.sh"
make_network

export THRIFT_STUBS="$work"
thrift --gen py -out "$work" "$here/social.thrift"

on users python3 "$here/servers.py" users "${address[users]}" &
pids+=($!)
on posts python3 "$here/servers.py" posts "${address[posts]}" &
pids+=($!)
wait_for client "${address[users]}" 9091
wait_for client "${address[posts]}" 9090
start_captures "$out"
on client python3 "$here/client.py" "${address[users]}" "${address[posts]}" "$rounds"
stop_captures
ls -l "$out"/*.pcap
