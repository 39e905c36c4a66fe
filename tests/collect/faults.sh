#!/usr/bin/env bash
# What `blackbox collect` does when things go wrong, on two or three network namespaces
# of this machine: `faults.sh SCENARIO BLACKBOX` builds them (hosts a and b, an HTTP
# server on b that a calls ten times a second, as traffic to capture), runs collect as
# the scenario says, checks the outcome and that no tcpdump is left in any namespace,
# prints what it checked, and exits 0 only if every check held. Run by tests/collect.rs;
# needs root, ip, tcpdump, python3 and, for ssh-lost, openssh-server. Scenarios:
#   interrupt    SIGINT to collect: every capture stopped and kept, exit 0
#   killed       SIGKILL to collect: every host's script sees its input end and stops
#   ssh-lost     SIGKILL to one host's ssh: that capture stops there and is kept as lost,
#                the other goes on; collect exits 1 naming it
#   drops        a 1 KiB capture buffer under a flood: the kernel's drops are recorded
#                and nest's summary warns of them
#   unreachable  a namespace that does not exist and a host without tcpdump are named,
#                the others captured and kept; exit 1
#   full-disk    the output on a 512 KiB tmpfs: collect stops every host, the captures end
#                on whole packets and the manifest is still written
#   kubernetes   --kubernetes through a stand-in kubectl (tests/collect/kubectl.py) whose
#                pods a and b are the namespaces: pods picked by label, captured through
#                `kubectl exec -i`, named for their workload and Service from the cluster's
#                state at the start, and an address that changed pods by the end warned of
set -euo pipefail

scenario=$1
blackbox=$2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../traces/netns.sh"
source "$here/../../traces/sshd.sh"

case $scenario in
    interrupt) net=11;; killed) net=12;; ssh-lost) net=13;; drops) net=14;;
    unreachable) net=15;; full-disk) net=16;; kubernetes) net=17;;
    *) echo "faults.sh: unknown scenario $scenario" >&2; exit 2;;
esac
prefix=bbt$net
hosts=(a b)
declare -A address=([a]=10.98.$net.10 [b]=10.98.$net.20)
pids=()
work=$(mktemp -d)
out=$work/out
log=$work/collect.log
make_network

failures=0
check() {  # check WHAT COMMAND...: runs COMMAND, says whether WHAT held
    local what=$1; shift
    if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; failures=$((failures + 1)); fi
}

# The tcpdumps running in the scenario's namespaces.
captures_left() {
    local host pid
    for host in "${hosts[@]}"; do
        for pid in $(ip netns pids "$prefix-$host" 2>/dev/null); do
            if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = tcpdump ] \
                && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; then
                echo "$host:$pid"
            fi
        done
    done
}

no_capture_left() {  # within 10 s
    local tries=0
    while [ -n "$(captures_left)" ]; do
        tries=$((tries + 1))
        if [ $tries -ge 100 ]; then
            echo "  still capturing: $(captures_left)"
            return 1
        fi
        sleep 0.1
    done
}

wait_for_line() {  # wait_for_line PATTERN PID: until collect's log has it (30 s)
    local tries=0
    until grep -q "$1" "$log" 2>/dev/null; do
        tries=$((tries + 1))
        if ! kill -0 "$2" 2>/dev/null || [ $tries -ge 300 ]; then
            echo "faults.sh: collect never said '$1'; its log:" >&2
            cat "$log" >&2
            return 1
        fi
        sleep 0.1
    done
}

manifest_field() {  # manifest_field PYTHON-EXPRESSION (of m, the manifest)
    python3 -c "import json, sys; m = json.load(open('$out/manifest.json')); print($1)"
}

# Traffic: a serves nothing, b serves HTTP; a calls b ten times a second.
on b python3 -m http.server --bind "${address[b]}" 8000 >/dev/null 2>&1 &
pids+=($!)
wait_for a "${address[b]}" 8000
on a python3 -c "
import time, urllib.request
while True:
    try: urllib.request.urlopen('http://${address[b]}:8000/', timeout=1).read()
    except Exception: pass
    time.sleep(0.1)
" >/dev/null 2>&1 &
pids+=($!)

netns_via=(--via "ip netns exec $prefix-{host}")
case $scenario in
interrupt)
    "$blackbox" collect --out "$out" --host a --host b "${netns_via[@]}" --duration 600s 2>"$log" &
    collector=$!
    wait_for_line "^collect: all 2 hosts capturing" $collector
    sleep 2
    kill -INT $collector
    status=0; wait $collector || status=$?
    check "collect exits 0 after SIGINT (exit $status)" [ $status = 0 ]
    check "no tcpdump is left" no_capture_left
    check "the manifest says it was interrupted" [ "$(manifest_field 'm["stopped_by"]')" = interrupted ]
    check "both hosts captured" [ "$(manifest_field '",".join(h["status"] for h in m["hosts"])')" = captured,captured ]
    check "each file's SHA-256 is the manifest's" bash -c "cd '$out' && python3 -c '
import json; m = json.load(open(\"manifest.json\"))
for h in m[\"hosts\"]: print(h[\"sha256\"] + \"  \" + h[\"file\"])' | sha256sum --quiet -c -"
    "$blackbox" records -q "$out" -o "$work/records" 2>"$work/records.err" || true
    check "the captures read whole, with messages between a and b" \
        bash -c "! grep -q 'warning: .*packet' '$work/records.err' && grep -q ' a b ' '$work/records'"
    ;;
killed)
    # A filter no packet passes: a tcpdump that writes nothing never meets a closed
    # pipe, so only the script can stop it.
    "$blackbox" collect --out "$out" --host a --host b "${netns_via[@]}" --duration 600s \
        --filter 'udp port 9' 2>"$log" &
    collector=$!
    wait_for_line "^collect: all 2 hosts capturing" $collector
    check "tcpdump runs on both hosts" [ "$(captures_left | wc -l)" = 2 ]
    kill -KILL $collector
    wait $collector 2>/dev/null || true
    check "no tcpdump is left once collect is killed" no_capture_left
    check "the manifest written at the start names both hosts" \
        [ "$(manifest_field '",".join(h["name"] for h in m["hosts"])')" = a,b ]
    ;;
ssh-lost)
    serve_ssh "$work" "$prefix-br" "10.98.$net.1/24" "$prefix"
    printf '%s\n' a b > "$work/hosts"
    # As in `killed`: nothing captured, so that only the script can stop tcpdump.
    "$blackbox" collect --out "$out" --hosts "$work/hosts" --via "ssh -F $work/ssh_config {host}" \
        --duration 600s --filter 'udp port 9' 2>"$log" &
    collector=$!
    wait_for_line "^collect: all 2 hosts capturing" $collector
    check "tcpdump runs on both hosts" [ "$(captures_left | wc -l)" = 2 ]
    sleep 1
    link=$(pgrep -f "^ssh -F $work/ssh_config a sh -s" || true)
    check "the ssh link to a is found" [ -n "$link" ]
    kill -KILL $link
    wait_for_line "^collect: a: its capture ended before it was stopped" $collector
    # b's capture goes on, a's is gone from a.
    on_b=$(captures_left | grep -c '^b:' || true)
    check "a's tcpdump stops when its link is lost, b's goes on" \
        bash -c "for i in \$(seq 100); do [ -z \"\$(ip netns pids $prefix-a | xargs -r -I{} cat /proc/{}/comm 2>/dev/null | grep -x tcpdump)\" ] && exit 0; sleep 0.1; done; exit 1"
    check "b still captures" [ "$on_b" = 1 ]
    sleep 1
    kill -INT $collector
    status=0; wait $collector || status=$?
    check "collect exits 1, a not captured in full (exit $status)" [ $status = 1 ]
    check "it names a" grep -q "1 of 2 hosts not captured in full (a)" "$log"
    check "no tcpdump is left" no_capture_left
    check "a is lost with its capture kept, b captured" \
        [ "$(manifest_field '",".join(h["status"] + ":" + str(h["file"]) for h in m["hosts"])')" = lost:a.pcap,captured:b.pcap ]
    ;;
drops)
    cat > "$work/flood.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
data = b"x" * 1000
while True:
    s.sendto(data, (sys.argv[1], 9999))
PY
    "$blackbox" collect --out "$out" --host a --host b "${netns_via[@]}" --duration 4s \
        --buffer-size 1 2>"$log" &
    collector=$!
    wait_for_line "^collect: all 2 hosts capturing" $collector
    on a python3 "$work/flood.py" "${address[b]}" &
    flood=$!
    status=0; wait $collector || status=$?
    kill $flood 2>/dev/null || true
    check "collect exits 0 (exit $status)" [ $status = 0 ]
    check "the kernel's drops are in the manifest" \
        [ "$(manifest_field 'min(h["counters"]["dropped_by_kernel"] for h in m["hosts"]) > 0')" = True ]
    "$blackbox" nest "$out" >/dev/null 2>"$work/nest.err" || true
    check "nest's summary warns of a's drops" grep -q "^warning: collected a: [0-9]* packets dropped while capturing ([0-9]* by the kernel" "$work/nest.err"
    check "no tcpdump is left" no_capture_left
    ;;
unreachable)
    mkdir "$work/bare"
    for tool in sh date; do ln -s "$(command -v $tool)" "$work/bare/$tool"; done
    cat > "$work/hosts" <<HOSTS
a
ghost
b
bare ip netns exec $prefix-b env PATH=$work/bare
HOSTS
    status=0
    "$blackbox" collect --out "$out" --hosts "$work/hosts" "${netns_via[@]}" --duration 2s 2>"$log" \
        || status=$?
    check "collect exits 1 (exit $status)" [ $status = 1 ]
    check "it names ghost, which cannot be reached" grep -q "^collect: ghost: no capture: .*$prefix-ghost" "$log"
    check "it names bare, which has no tcpdump" grep -q "^collect: bare: neither tcpdump nor dumpcap is installed" "$log"
    check "a and b captured, ghost and bare failed" \
        [ "$(manifest_field '",".join(h["status"] for h in m["hosts"])')" = captured,failed,captured,failed ]
    check "only a's and b's captures are written" [ "$(cd "$out" && ls -- *.pcap | tr '\n' ' ')" = "a.pcap b.pcap " ]
    check "no tcpdump is left" no_capture_left
    ;;
full-disk)
    mkdir -p "$out"
    mount -t tmpfs -o size=512k blackbox-full "$out"
    pids+=()
    trap 'umount "$out" 2>/dev/null || true; stop_everything' EXIT
    on a bash -c "while :; do curl -s -o /dev/null http://${address[b]}:8000/ 2>/dev/null || python3 -c 'import urllib.request as u; u.urlopen(\"http://${address[b]}:8000/\").read()'; done" >/dev/null 2>&1 &
    pids+=($!)
    status=0
    timeout 60 "$blackbox" collect --out "$out" --host a --host b "${netns_via[@]}" --duration 50s 2>"$log" \
        || status=$?
    check "collect stops on the full disk, exit 1 (exit $status)" [ $status = 1 ]
    check "it says the disk is full" grep -q "^collect: stopping every host (disk full)" "$log"
    check "no tcpdump is left" no_capture_left
    check "the manifest is written, stopped by the full disk" [ "$(manifest_field 'm["stopped_by"]')" = "disk full" ]
    "$blackbox" records -q "$out" -o /dev/null 2>"$work/records.err" || true
    check "the captures end on whole packets" bash -c "! grep -q 'cut\|damaged\|packet [0-9]* at byte' '$work/records.err'"
    check "what was captured before the disk filled is kept" \
        [ "$(manifest_field 'max(h["packets_written"] for h in m["hosts"]) > 100')" = True ]
    "$blackbox" records -q "$out" -o "$work/records" 2>/dev/null || true
    check "and read, with messages between a and b" grep -q ' a b ' "$work/records"
    ;;
kubernetes)
    cat > "$work/kubectl" <<KUBECTL
#!/bin/sh
exec python3 "$here/kubectl.py" "$prefix" "${address[a]}" "${address[b]}" "$work/kubectl-calls" "\$@"
KUBECTL
    chmod +x "$work/kubectl"
    status=0
    "$blackbox" collect --out "$out" --kubernetes --namespace demo --selector tier=demo \
        --container debug --kubectl "$work/kubectl" --duration 2s 2>"$log" || status=$?
    check "collect exits 0 (exit $status)" [ $status = 0 ]
    check "the selector's running pods are the hosts, each captured" \
        [ "$(manifest_field '",".join(h["name"] + ":" + h["status"] for h in m["hosts"])')" = a:captured,b:captured ]
    check "each pod is reached by kubectl exec -i into its container" \
        grep -qx "exec -i --namespace demo a --container debug -- sh -s" "$work/kubectl-calls"
    check "the cluster's state is kept at the start and at the end" \
        [ -s "$out/kubernetes-start.json" -a -s "$out/kubernetes-end.json" ]
    check "the address that changed pods is in the manifest" \
        [ "$(manifest_field 'm["kubernetes"]["reused"]')" = "[{'address': '${address[b]}', 'at_start': 'b', 'at_end': 'b-2'}]" ]
    "$blackbox" records "$out" -o "$work/records" 2>"$work/records.err" || true
    check "pods are named for their workload and Service" grep -q " front back " "$work/records"
    check "each pod's own address is the one it listed, not a guess from its traffic" \
        grep -q "(host b, own address ${address[b]}): " "$work/records.err"
    check "the reused address is warned of" \
        grep -q "^warning: collected address ${address[b]} was b at the start and b-2 at the end" "$work/records.err"
    check "no tcpdump is left" no_capture_left
    ;;
esac
if [ $failures -gt 0 ]; then
    echo "collect's log:"; cat "$log"
    exit 1
fi
