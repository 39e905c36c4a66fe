#!/usr/bin/env bash
# The shop (../shop: nginx -> app.py -> Redis + PostgreSQL) on a Kubernetes-shaped
# network built from network namespaces and iptables, with no Kubernetes: two nodes
# that route each other's pod CIDR, one namespace per pod, and the Services written
# into both nodes' nat tables as kube-proxy writes them in iptables mode (ClusterIPs
# DNAT'd to their endpoints, a 50/50 `statistic` split over two app replicas, a
# NodePort with MASQUERADE). See README.md for the picture. Needs root. Usage:
#   traces/k8s/capture.sh [SECONDS] [CLIENTS] [DIR] [APP_WORKERS] [OFFLOADS]
# SECONDS of load (15), CLIENTS load.py threads (8), DIR for the captures
# (/tmp/k8s-shop), APP_WORKERS as in ../shop/capture.sh (0, N, Nq, Nq:MS), OFFLOADS
# `matched` (default: every veth keeps the kernel's defaults) or `mismatched`: senders
# keep TSO/GSO, while the last link towards each receiver (the node-side veth of each
# pod, the bridge port of the client) has TSO and GSO off and the receivers GRO off, so
# a sender's capture shows segments larger than the MTU and the receiver's the same
# bytes in MSS-sized pieces. Since no message of the shop exceeds one MSS, `mismatched`
# also stores 4 KB item names (ITEM_BYTES, below) so that item responses, the Redis
# values and the SELECT results span several segments.
#
# Always traced (as ../shop/capture.sh with `traced`): the client sends a W3C
# traceparent, load.py and both app replicas log every call, and truth.py writes
# DIR/truth.tsv. The logs stay in DIR (*-calls.log), with DIR/services.tsv, so that
# truth.py can be run again later (e.g. by a blackbox that names calls differently).
#
# Writes DIR/{client,web,app-0,app-1,cache,db}.pcap (tcpdump on each pod's eth0, and
# the client's), DIR/node/node-a.pcap (tcpdump -i any in node-a: every forwarded
# packet before and after NAT) and, to show what the NAT did, DIR/node/conntrack-*.txt
# DIR/node/iptables-*.txt (rules with their counters) and DIR/node/links-*.txt (the
# interface indexes of node-a.pcap's cooked headers), taken after the load.
# Environment: ITEM_BYTES (length of the item names in the database; default 32, the
# shop's md5, or 4096 with `mismatched`), BLACKBOX (for truth.py).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
shop=$(cd "$here/../shop" && pwd)
load_seconds=${1:-15}
threads=${2:-8}
out=${3:-/tmp/k8s-shop}
workers=${4:-0}
offloads=${5:-matched}
case $offloads in
    matched) item_bytes=${ITEM_BYTES:-32} ;;
    mismatched) item_bytes=${ITEM_BYTES:-4096} ;;
    *) echo "capture.sh: OFFLOADS is matched or mismatched, not '$offloads'" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "capture.sh: needs root (network namespaces)" >&2; exit 2; }
mkdir -p "$out/node"
out=$(cd "$out" && pwd)

# The servers and tools, installed as ../shop/capture.sh installs them (plus iptables,
# ethtool and conntrack for the nodes).
if ! command -v nginx >/dev/null || ! command -v redis-server >/dev/null \
    || ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 \
    || ! command -v tcpdump >/dev/null || ! command -v iptables-restore >/dev/null \
    || ! command -v ethtool >/dev/null || ! command -v conntrack >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light redis-server \
        postgresql tcpdump tshark python3-venv iptables ethtool conntrack >/dev/null
fi
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
venv=${TMPDIR:-/tmp}/shop-venv  # the shop's: app.py needs redis and psycopg2
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q redis psycopg2-binary
fi

# ---- The topology --------------------------------------------------------------------
# Node network 10.78.0.0/24 (a bridge in a namespace of its own, `k8s-lan`, so that
# nothing of it lives in the host's namespace and the host's iptables never see it).
declare -A node_ip=([node-a]=10.78.0.1 [node-b]=10.78.0.2)
declare -A pod_cidr=([node-a]=10.244.1.0/24 [node-b]=10.244.2.0/24)
client_ip=10.78.0.100
# Pods: address and node. Calls that cross nodes: web->app-1, app-0->cache,
# app-1->db and the NodePort's client->web is external; web->app-0, app-0->db and
# app-1->cache stay on one node.
pods=(web app-0 db app-1 cache)
declare -A pod_ip=([web]=10.244.1.2 [app-0]=10.244.1.3 [db]=10.244.1.4
                   [app-1]=10.244.2.2 [cache]=10.244.2.3)
declare -A pod_node=([web]=node-a [app-0]=node-a [db]=node-a
                     [app-1]=node-b [cache]=node-b)
# Services (ClusterIP range 10.96.0.0/12).
web_vip=10.96.0.20 app_vip=10.96.0.60 cache_vip=10.96.0.40 db_vip=10.96.0.50
node_port=30080
gateway=169.254.1.1  # the pods' next hop, as in Calico (a static neighbour entry here)

namespaces=(lan node-a node-b client "${pods[@]}")
ns() { echo "k8s-$1"; }
on() { local where=$1; shift; ip netns exec "$(ns "$where")" "$@"; }

work=$(mktemp -d)
chmod 755 "$work"
pids=()

stop_namespaces() {
    # Whatever still runs in a namespace (servers started through `on`, their workers,
    # or those of an interrupted run), then the namespaces: every link lives in one of
    # them, so deleting them removes it all.
    local name signal running
    for signal in TERM KILL; do
        running=$(for name in "${namespaces[@]}"; do ip netns pids "$(ns "$name")" 2>/dev/null || true; done)
        if [ -n "$running" ]; then
            kill -s "$signal" $running 2>/dev/null || true
            sleep 1
        fi
    done
    for name in "${namespaces[@]}"; do ip netns del "$(ns "$name")" 2>/dev/null || true; done
}

cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    stop_namespaces
    rm -rf "$work"
}

stop_namespaces  # leftovers of an interrupted run
trap cleanup EXIT
for name in "${namespaces[@]}"; do
    ip netns add "$(ns "$name")"
    on "$name" ip link set lo up
done

# The node network: a bridge in k8s-lan with a port for each node and the client.
on lan sysctl -qw net.bridge.bridge-nf-call-iptables=0 2>/dev/null || true
on lan ip link add br0 type bridge
on lan ip link set br0 up
for host in node-a node-b client; do
    ip link add eth0 netns "$(ns "$host")" type veth peer name "$host" netns "$(ns lan)"
    on lan ip link set "$host" master br0 up
    on "$host" ip link set eth0 up
done
on node-a ip addr add "${node_ip[node-a]}/24" dev eth0
on node-b ip addr add "${node_ip[node-b]}/24" dev eth0
on client ip addr add "$client_ip/24" dev eth0
# The nodes route; each reaches the other's pods through it.
for node in node-a node-b; do
    on "$node" sysctl -qw net.ipv4.ip_forward=1
done
on node-a ip route add "${pod_cidr[node-b]}" via "${node_ip[node-b]}"
on node-b ip route add "${pod_cidr[node-a]}" via "${node_ip[node-a]}"

# Pods: eth0 (a /32) is a veth whose peer, veth-<pod>, sits in the node's namespace with
# no address; the node routes the pod's /32 to it. The pod's default route (and so the
# ClusterIP range) goes to 169.254.1.1, which the pod resolves to the node's veth; the
# neighbour entry is static here, where Calico answers by proxy ARP.
for pod in "${pods[@]}"; do
    node=${pod_node[$pod]}
    ip link add eth0 netns "$(ns "$pod")" type veth peer name "veth-$pod" netns "$(ns "$node")"
    on "$node" ip link set "veth-$pod" up
    on "$pod" ip addr add "${pod_ip[$pod]}/32" dev eth0
    on "$pod" ip link set eth0 up
    on "$node" ip route add "${pod_ip[$pod]}/32" dev "veth-$pod" scope link
    on "$pod" ip route add "$gateway" dev eth0 scope link
    on "$pod" ip route add default via "$gateway" dev eth0
    mac=$(on "$node" cat "/sys/class/net/veth-$pod/address")
    on "$pod" ip neigh replace "$gateway" lladdr "$mac" dev eth0 nud permanent
done

if [ "$offloads" = mismatched ]; then
    # The sender segments nothing (TSO/GSO stay on at every pod's eth0 and the client's),
    # the last hop towards each receiver cannot carry large segments, so the kernel cuts
    # them to the MSS there; the receivers do not merge them again (GRO off).
    for pod in "${pods[@]}"; do
        on "${pod_node[$pod]}" ethtool -K "veth-$pod" tso off gso off
        on "$pod" ethtool -K eth0 gro off
    done
    on lan ethtool -K client tso off gso off
    on client ethtool -K eth0 gro off
fi

# ---- Services, as kube-proxy (iptables mode) writes them, in both nodes --------------
# Chain names are readable here; kube-proxy hashes them (KUBE-SVC-XGLOHA7QRQ3V22RZ...).
# `--random-fully` and the 0x4000 mark are kube-proxy's. Traffic to a ClusterIP from
# outside the cluster CIDR is masqueraded (kube-proxy's --cluster-cidr rule); traffic
# from pods is not: the server sees the calling pod's own address and port.
sep() {  # name, pod
    echo "-A KUBE-SEP-$1 -s ${pod_ip[$2]}/32 -m comment --comment \"hairpin\" -j KUBE-MARK-MASQ"
    echo "-A KUBE-SEP-$1 -p tcp -m tcp -j DNAT --to-destination ${pod_ip[$2]}:$3"
}
rules() {
    cat <<RULES
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-SVC-WEB - [0:0]
:KUBE-EXT-WEB - [0:0]
:KUBE-SEP-WEB - [0:0]
:KUBE-SVC-APP - [0:0]
:KUBE-SEP-APP-0 - [0:0]
:KUBE-SEP-APP-1 - [0:0]
:KUBE-SVC-CACHE - [0:0]
:KUBE-SEP-CACHE - [0:0]
:KUBE-SVC-DB - [0:0]
:KUBE-SEP-DB - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
-A KUBE-SERVICES -d $web_vip/32 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-WEB
-A KUBE-SERVICES -d $app_vip/32 -p tcp -m comment --comment "default/app:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-APP
-A KUBE-SERVICES -d $cache_vip/32 -p tcp -m comment --comment "default/cache:redis cluster IP" -m tcp --dport 6379 -j KUBE-SVC-CACHE
-A KUBE-SERVICES -d $db_vip/32 -p tcp -m comment --comment "default/db:postgres cluster IP" -m tcp --dport 5432 -j KUBE-SVC-DB
-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-A KUBE-NODEPORTS -p tcp -m comment --comment "default/web:http" -m tcp --dport $node_port -j KUBE-EXT-WEB
-A KUBE-EXT-WEB -m comment --comment "masquerade traffic for default/web:http external destinations" -j KUBE-MARK-MASQ
-A KUBE-EXT-WEB -j KUBE-SVC-WEB
-A KUBE-SVC-WEB ! -s 10.244.0.0/16 -d $web_vip/32 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-WEB -m comment --comment "default/web:http -> ${pod_ip[web]}:8080" -j KUBE-SEP-WEB
-A KUBE-SVC-APP ! -s 10.244.0.0/16 -d $app_vip/32 -p tcp -m comment --comment "default/app:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-APP -m comment --comment "default/app:http -> ${pod_ip[app-0]}:8080" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-APP-0
-A KUBE-SVC-APP -m comment --comment "default/app:http -> ${pod_ip[app-1]}:8080" -j KUBE-SEP-APP-1
-A KUBE-SVC-CACHE ! -s 10.244.0.0/16 -d $cache_vip/32 -p tcp -m comment --comment "default/cache:redis cluster IP" -m tcp --dport 6379 -j KUBE-MARK-MASQ
-A KUBE-SVC-CACHE -m comment --comment "default/cache:redis -> ${pod_ip[cache]}:6379" -j KUBE-SEP-CACHE
-A KUBE-SVC-DB ! -s 10.244.0.0/16 -d $db_vip/32 -p tcp -m comment --comment "default/db:postgres cluster IP" -m tcp --dport 5432 -j KUBE-MARK-MASQ
-A KUBE-SVC-DB -m comment --comment "default/db:postgres -> ${pod_ip[db]}:5432" -j KUBE-SEP-DB
$(sep WEB web 8080)
$(sep APP-0 app-0 8080)
$(sep APP-1 app-1 8080)
$(sep CACHE cache 6379)
$(sep DB db 5432)
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-FORWARD - [0:0]
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
COMMIT
RULES
}
rules > "$work/rules"
for node in node-a node-b; do on "$node" iptables-restore < "$work/rules"; done

# Every address:port that names a service, for truth.py: its ClusterIP, its NodePort on
# each node, its endpoints.
{
    printf 'web\t%s\nweb\t%s\nweb\t%s\nweb\t%s\n' "$web_vip:80" "${node_ip[node-a]}:$node_port" \
        "${node_ip[node-b]}:$node_port" "${pod_ip[web]}:8080"
    printf 'app\t%s\napp\t%s\napp\t%s\n' "$app_vip:80" "${pod_ip[app-0]}:8080" "${pod_ip[app-1]}:8080"
    printf 'cache\t%s\ncache\t%s\n' "$cache_vip:6379" "${pod_ip[cache]}:6379"
    printf 'db\t%s\ndb\t%s\n' "$db_vip:5432" "${pod_ip[db]}:5432"
} > "$out/services.tsv"

# ---- The shop's servers, in their pods ------------------------------------------------
# Database: a throwaway cluster that trusts the pod network.
mkdir -p "$work/pg" "$work/pgsock"
chown postgres "$work/pg" "$work/pgsock"
su postgres -s /bin/sh -c "$pgbin/initdb -A trust -D $work/pg" >/dev/null
echo "host all all 10.244.0.0/16 trust" >> "$work/pg/pg_hba.conf"
on db su postgres -s /bin/sh -c "exec $pgbin/postgres -D $work/pg -k $work/pgsock \
    -c listen_addresses=${pod_ip[db]} -c fsync=off" >"$work/pg.log" 2>&1 &
pids+=($!)
until su postgres -s /bin/sh -c "$pgbin/pg_isready -q -h $work/pgsock"; do sleep 0.2; done
psql() { su postgres -s /bin/sh -c "psql -q -h $work/pgsock $*"; }
psql "-c 'CREATE ROLE shop LOGIN'"
psql "-c 'CREATE DATABASE shop OWNER shop'"
# The shop's 40 items, named by their md5 (32 bytes), repeated to ITEM_BYTES.
psql "-U shop shop -c 'CREATE TABLE items (id int PRIMARY KEY, name text);
    CREATE TABLE orders (id serial PRIMARY KEY, item int, at timestamptz DEFAULT now());
    INSERT INTO items SELECT i, left(repeat(md5(i::text), ($item_bytes + 31) / 32), $item_bytes)
        FROM generate_series(1, 40) i;'"

on cache redis-server --bind "${pod_ip[cache]}" --port 6379 --save "" --appendonly no \
    --protected-mode no >"$work/redis.log" 2>&1 &
pids+=($!)

# Two replicas of the application, each reaching Redis and PostgreSQL by ClusterIP.
rm -f "$out"/*.pcap "$out"/node/*.pcap "$out"/*-calls.log "$out"/*-pool.tsv "$out/truth.tsv"
for app in app-0 app-1; do
    logs=("$out/$app-calls.log")
    if [[ $workers == *q* ]]; then logs+=("$out/$app-pool.tsv"); fi
    on "$app" "$venv/bin/python" "$shop/app.py" "${pod_ip[$app]}:8080" "$cache_vip" "$db_vip" \
        "$workers" "${logs[@]}" >"$work/$app.log" 2>&1 &
    pids+=($!)
done

# nginx as in the shop, its upstream the app Service's ClusterIP, keep-alive.
cat > "$work/nginx.conf" <<CONF
user root;
worker_processes 1;
daemon off;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events {}
http {
    access_log off;
    client_body_temp_path $work/nginx-body;
    proxy_temp_path $work/nginx-proxy;
    upstream app { server $app_vip:80; keepalive 8; }
    server {
        listen ${pod_ip[web]}:8080;
        location / {
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
CONF
on web nginx -c "$work/nginx.conf" &
pids+=($!)

# Ready: each replica answers (asked directly from the web pod), then the NodePort does.
get() {  # namespace, url
    on "$1" python3 -c "import urllib.request as u; u.urlopen('$2', timeout=1)" 2>/dev/null
}
for app in app-0 app-1; do
    for try in $(seq 100); do
        get web "http://${pod_ip[$app]}:8080/item/1" && break
        [ "$try" = 100 ] && { echo "capture.sh: $app does not answer" >&2; cat "$work/$app.log" >&2; exit 1; }
        sleep 0.2
    done
done
for try in $(seq 100); do
    get client "http://${node_ip[node-a]}:$node_port/item/1" && break
    [ "$try" = 100 ] && { echo "capture.sh: the NodePort does not answer" >&2; exit 1; }
    sleep 0.2
done

# ---- Captures and load ----------------------------------------------------------------
# Started without `on`, so that $! is tcpdump itself (ip netns exec execs it) and the
# SIGINT below reaches it and makes it write its last packets.
captures=()
for host in client "${pods[@]}"; do
    ip netns exec "$(ns "$host")" tcpdump -q -n -s 0 -U -i eth0 -w "$out/$host.pcap" \
        2>"$work/tcpdump-$host.txt" &
    captures+=($!)
done
ip netns exec "$(ns node-a)" tcpdump -q -n -s 0 -U -i any -w "$out/node/node-a.pcap" \
    2>"$work/tcpdump-node-a.txt" &
captures+=($!)
sleep 1

# load.py builds its URLs on port 80; load_port.py runs it against HOST:PORT.
on client python3 "$here/load_port.py" "${node_ip[node-a]}:$node_port" "$load_seconds" \
    "$threads" "$out/client-calls.log"

sleep 1
for pid in "${captures[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
wait "${captures[@]}" 2>/dev/null || true
chmod 644 "$out"/*.pcap "$out"/node/*.pcap
# tcpdump's own count of what it lost (kernel drops), kept with the captures.
for host in client "${pods[@]}" node-a; do
    echo "$host: $(grep -E 'captured|dropped by kernel' "$work/tcpdump-$host.txt" | paste -sd,)"
done | tee "$out/node/tcpdump-stats.txt" >&2

# What the NAT did, after the load: conntrack (closed connections stay in TIME_WAIT for
# 120 s, so the run's connections are all there) and the rules' counters.
for node in node-a node-b; do
    on "$node" conntrack -L -p tcp > "$out/node/conntrack-$node.txt" 2>/dev/null || true
    on "$node" iptables-save -c -t nat > "$out/node/iptables-$node.txt"
    on "$node" ip -o link > "$out/node/links-$node.txt"  # node-a.pcap's interface indexes
done
echo "DNAT'd connections per endpoint (conntrack, reply source), and NodePort SNATs:" >&2
for node in node-a node-b; do
    for service in "$app_vip:80" "$cache_vip:6379" "$db_vip:5432" "${node_ip[node-a]}:$node_port"; do
        vip=${service%:*} port=${service#*:}
        awk -v vip="$vip" -v port="$port" -v node="$node" '
            # A conntrack line: the original src= dst= sport= dport=, then the reply'"'"'s.
            { s = 0; d = 0; p = 0
              for (i = 1; i <= NF; i++) {
                  if ($i ~ /^src=/) src[++s] = substr($i, 5)
                  else if ($i ~ /^dst=/) dst[++d] = substr($i, 5)
                  else if ($i ~ /^dport=/) dport[++p] = substr($i, 7) }
              if (dst[1] == vip && dport[1] == port) count[src[2] " (its reply to " dst[2] ")"]++ }
            END { for (k in count) printf "  %s: %s:%s -> %s: %d\n", node, vip, port, k, count[k] }' \
            "$out/node/conntrack-$node.txt" >&2
    done
done

python3 "$here/truth.py" "$out"
ls -l "$out"/*.pcap "$out"/node/*.pcap
