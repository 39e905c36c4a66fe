# Sourced by the capture scripts: one network namespace per host, all on one bridge,
# so that real servers talk over real TCP and each host's capture sees only its own
# traffic. The caller sets `prefix` (namespace and link names), `hosts` (an array) and
# `address` (an associative array, host -> IPv4 address in a /24), then calls
# `make_network`; `on HOST COMMAND...` runs a command in a host's namespace. The network
# is removed on exit, and first, in case an interrupted run left it behind.

remove_network() {
    for host in "${hosts[@]}"; do
        ip netns del "$prefix-$host" 2>/dev/null || true
        ip link del "$prefix-$host" 2>/dev/null || true
    done
    ip link del "$prefix-br" 2>/dev/null || true
}

# Stops every process started in the namespaces (and those in `pids`), then removes
# the network and `work`, if set.
stop_everything() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for host in "${hosts[@]}"; do
        ip netns pids "$prefix-$host" 2>/dev/null | xargs -r kill 2>/dev/null || true
    done
    sleep 1
    remove_network
    if [ -n "${work:-}" ]; then rm -rf "$work"; fi
}

make_network() {
    remove_network
    trap stop_everything EXIT
    ip link add "$prefix-br" type bridge
    ip link set "$prefix-br" up
    for host in "${hosts[@]}"; do
        ip netns add "$prefix-$host"
        ip link add "$prefix-$host" type veth peer name eth0 netns "$prefix-$host"
        ip link set "$prefix-$host" master "$prefix-br" up
        ip -n "$prefix-$host" addr add "${address[$host]}/24" dev eth0
        ip -n "$prefix-$host" link set eth0 up
        ip -n "$prefix-$host" link set lo up
    done
}

on() { local host=$1; shift; ip netns exec "$prefix-$host" "$@"; }

# Waits until HOST can open a TCP connection to ADDRESS:PORT.
wait_for() {
    until on "$1" bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null; do sleep 0.2; done
}

# Captures every host's TCP traffic into OUT/<host>.pcap (tcpdump, whole packets);
# `stop_captures` ends them so that tcpdump writes its last packets.
start_captures() {
    local out=$1
    captures=()
    for host in "${hosts[@]}"; do
        # Not through `on`: $! must be tcpdump itself (ip execs it), not a subshell,
        # for the interrupt that makes it write its last packets.
        ip netns exec "$prefix-$host" tcpdump -q -i eth0 -s 0 -w "$out/$host.pcap" tcp \
            2>/dev/null &
        captures+=($!)
    done
    sleep 1
}

stop_captures() {
    sleep 1
    for pid in "${captures[@]}"; do kill -INT "$pid"; done
    wait "${captures[@]}" 2>/dev/null || true
}
