#!/usr/bin/env bash
# Captures a real Apache Thrift pair (python thrift, Debian's thrift-compiler) in network
# namespaces: a client calling Users (compact protocol, unframed) and Posts (binary
# protocol, framed), one capture per host, into this directory (see README.md). Needs
# root; installs what is missing. Usage: traces/thrift/capture.sh [ROUNDS]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
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

remove_network() {
    for host in "${hosts[@]}"; do
        ip netns del "th-$host" 2>/dev/null || true
        ip link del "th-$host" 2>/dev/null || true
    done
    ip link del th-br 2>/dev/null || true
}
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for host in "${hosts[@]}"; do
        ip netns pids "th-$host" 2>/dev/null | xargs -r kill 2>/dev/null || true
    done
    sleep 1
    remove_network
    rm -rf "$work"
}
remove_network  # leftovers of an interrupted run
trap cleanup EXIT

ip link add th-br type bridge
ip link set th-br up
for host in "${hosts[@]}"; do
    ip netns add "th-$host"
    ip link add "th-$host" type veth peer name eth0 netns "th-$host"
    ip link set "th-$host" master th-br up
    ip -n "th-$host" addr add "${address[$host]}/24" dev eth0
    ip -n "th-$host" link set eth0 up
    ip -n "th-$host" link set lo up
done
on() { local host=$1; shift; ip netns exec "th-$host" "$@"; }
export THRIFT_STUBS="$work"
thrift --gen py -out "$work" "$here/social.thrift"

on users python3 "$here/servers.py" users "${address[users]}" &
pids+=($!)
on posts python3 "$here/servers.py" posts "${address[posts]}" &
pids+=($!)
until on client bash -c "exec 3<>/dev/tcp/${address[users]}/9091" 2>/dev/null; do sleep 0.2; done
until on client bash -c "exec 3<>/dev/tcp/${address[posts]}/9090" 2>/dev/null; do sleep 0.2; done
captures=()
for host in "${hosts[@]}"; do
    on "$host" tcpdump -q -i eth0 -s 0 -w "$here/$host.pcap" tcp 2>/dev/null &
    captures+=($!)
done
sleep 1
on client python3 "$here/client.py" "${address[users]}" "${address[posts]}" "$rounds"
sleep 1
# tcpdump writes its last packets when it is stopped.
for pid in "${captures[@]}"; do kill -INT "$pid"; done
wait "${captures[@]}" 2>/dev/null || true
ls -l "$here"/*.pcap
