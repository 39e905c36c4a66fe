#!/usr/bin/env bash
# Captures a real memcached (Debian's) serving two clients in other network namespaces,
# one speaking the text protocol and one the binary protocol, one capture per host,
# into this directory (see README.md). Needs root; installs
# memcached and tcpdump if they are missing. Usage: traces/memcached/capture.sh [ROUNDS]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
rounds=${1:-200}
[ "$(id -u)" = 0 ] || { echo "capture.sh: needs root (network namespaces)" >&2; exit 2; }
if ! command -v memcached >/dev/null || ! command -v tcpdump >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq memcached tcpdump >/dev/null
fi

declare -A address=([text]=10.78.0.10 [binary]=10.78.0.20 [cache]=10.78.0.40)
hosts=(text binary cache)
pids=()

remove_network() {
    for host in "${hosts[@]}"; do
        ip netns del "mc-$host" 2>/dev/null || true
        ip link del "mc-$host" 2>/dev/null || true
    done
    ip link del mc-br 2>/dev/null || true
}
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for host in "${hosts[@]}"; do
        ip netns pids "mc-$host" 2>/dev/null | xargs -r kill 2>/dev/null || true
    done
    sleep 1
    remove_network
}
remove_network  # leftovers of an interrupted run
trap cleanup EXIT

ip link add mc-br type bridge
ip link set mc-br up
for host in "${hosts[@]}"; do
    ip netns add "mc-$host"
    ip link add "mc-$host" type veth peer name eth0 netns "mc-$host"
    ip link set "mc-$host" master mc-br up
    ip -n "mc-$host" addr add "${address[$host]}/24" dev eth0
    ip -n "mc-$host" link set eth0 up
    ip -n "mc-$host" link set lo up
done
on() { local host=$1; shift; ip netns exec "mc-$host" "$@"; }

on cache memcached -u nobody -l "${address[cache]}" -p 11211 -U 0 -m 64 &
pids+=($!)
for host in "${hosts[@]}"; do
    on "$host" tcpdump -q -i eth0 -s 0 -w "$here/$host.pcap" tcp port 11211 2>/dev/null &
    pids+=($!)
done
sleep 1
until on text bash -c "exec 3<>/dev/tcp/${address[cache]}/11211" 2>/dev/null; do sleep 0.2; done
on text python3 "$here/load.py" "${address[cache]}" text "$rounds" &
text_load=$!
on binary python3 "$here/load.py" "${address[cache]}" binary "$rounds"
wait "$text_load"
sleep 1
# tcpdump writes its last packets when it is stopped.
for pid in "${pids[@]:1}"; do kill -INT "$pid"; done
wait "${pids[@]:1}" 2>/dev/null || true
ls -l "$here"/*.pcap
