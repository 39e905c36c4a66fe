#!/usr/bin/env bash
# Builds the shop, a small real multi-tier system, on this machine and captures one
# packet capture per host into this directory (see README.md for what it is).
#
# Hosts are network namespaces joined by a bridge; the servers are Debian's nginx,
# Redis and PostgreSQL with a small Python application tier between them. Needs root;
# installs what it needs. Usage:
#   traces/shop/capture.sh [SECONDS_OF_LOAD] [CLIENT_THREADS] [DIR] [APP_WORKERS] [traced]
# DIR (default: this directory) receives one capture per host. APP_WORKERS 0 (the
# default) runs a thread per connection in the application tier; N > 0 a pool of N
# workers connected before the load starts, each serving one nginx connection at a time;
# Nq (e.g. 8q) a pool of N such workers serving requests from one queue, so that with
# more requests in flight than workers they wait at app; Nq:MS (e.g. 8q:15) the same
# with each request holding its worker MS ms more (see app.py; traced, the workers'
# queue waits go to DIR/app-pool.tsv). `traced`: the clients send a
# W3C traceparent, the application passes it on to its SQL as a sqlcommenter comment,
# both log every call, and truth.py writes DIR/truth.tsv from the logs (needs a built
# blackbox, see truth.py).
#
# SHOP_NODELAY=1 in the environment (`sudo SHOP_NODELAY=1 traces/shop/capture.sh ...`)
# sets TCP_NODELAY on the application tier's accepted connections (app.py). app writes
# each reply's headers and body in two sends; by default Nagle's algorithm holds the
# body until nginx ACKs the headers, which nginx delays ~40 ms, so the shipped captures
# show that stall in most requests. With SHOP_NODELAY=1 both go out at once: the same
# system without the stall (traces/shop-nodelay). Unset or 0: the default.
#
# SHOP_COLLECT=netns or SHOP_COLLECT=ssh captures with `blackbox collect` instead of a
# tcpdump (dumpcap on db) per host: DIR gets <host>.pcap for every host and manifest.json.
# netns: collect reaches each host with `ip netns exec shop-{host}` (its --via). ssh: each
# namespace runs a real OpenSSH server on its address, the root namespace reaches them
# over the bridge (10.77.0.1), and the hosts file names each host's own template,
# `ssh -F WORK/ssh_config {host}` (a key made for the run, root). The script waits for
# collect's `collect: all 5 hosts capturing`, runs the load, then stops collect with
# SIGINT and fails if it exits nonzero. BLACKBOX names the binary (default: blackbox on the
# PATH); SHOP_COLLECT_ARGS, word-split, is added to its command line (e.g. --buffer-size 1).
# Unset: one tcpdump per host as above, as the shipped captures were made.
#
# SHOP_NO_INSTALL=1: install nothing (a missing tool is an error naming it); SHOP_VENV: a
# venv with redis and psycopg2-binary to use (default: $TMPDIR/shop-venv, made if missing).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
load_seconds=${1:-15}
threads=${2:-4}
out=${3:-$here}
workers=${4:-0}
traced=${5:-}
nodelay=${SHOP_NODELAY:-0}
case $nodelay in 0|1) ;; *) echo "capture.sh: SHOP_NODELAY must be 0 or 1" >&2; exit 2;; esac
collect=${SHOP_COLLECT:-}
case $collect in ''|netns|ssh) ;; *) echo "capture.sh: SHOP_COLLECT must be netns or ssh" >&2; exit 2;; esac
no_install=${SHOP_NO_INSTALL:-0}
case $no_install in 0|1) ;; *) echo "capture.sh: SHOP_NO_INSTALL must be 0 or 1" >&2; exit 2;; esac
blackbox=${BLACKBOX:-blackbox}
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ "$(id -u)" = 0 ] || { echo "capture.sh: needs root (network namespaces)" >&2; exit 2; }

if [ -n "$collect" ] && ! command -v "$blackbox" >/dev/null; then
    echo "capture.sh: SHOP_COLLECT=$collect needs blackbox: $blackbox is not found (set BLACKBOX)" >&2
    exit 2
fi
missing=()
tools=(nginx redis-server postgres tcpdump)
packages=(nginx-light redis-server postgresql tcpdump tshark python3-venv)
if [ -z "$collect" ]; then tools+=(dumpcap); fi
if [ "$collect" = ssh ]; then
    tools+=(/usr/sbin/sshd ssh ssh-keygen)
    packages+=(openssh-server openssh-client)
fi
for tool in "${tools[@]}"; do
    case $tool in
        postgres) ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing+=("$tool");;
        *) command -v "$tool" >/dev/null || missing+=("$tool");;
    esac
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$no_install" = 1 ]; then
        echo "capture.sh: missing ${missing[*]} (SHOP_NO_INSTALL=1: not installing ${packages[*]})" >&2
        exit 2
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null
fi
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
venv=${SHOP_VENV:-${TMPDIR:-/tmp}/shop-venv}
if [ -n "${SHOP_VENV:-}" ] && ! "$venv/bin/python" -c 'import redis, psycopg2' 2>/dev/null; then
    echo "capture.sh: SHOP_VENV=$venv is not a venv with redis and psycopg2-binary" >&2
    exit 2
fi
if [ ! -x "$venv/bin/python" ]; then
    if [ "$no_install" = 1 ]; then
        echo "capture.sh: no venv $venv with redis and psycopg2-binary (SHOP_NO_INSTALL=1; set SHOP_VENV)" >&2
        exit 2
    fi
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q redis psycopg2-binary
fi

work=$(mktemp -d)
chmod 755 "$work"
declare -A address=([client]=10.77.0.10 [web]=10.77.0.20 [app]=10.77.0.30
                    [cache]=10.77.0.40 [db]=10.77.0.50)
hosts=(client web app cache db)
pids=()

cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    # Whatever still runs in a namespace (servers started through `on`, their workers).
    for host in "${hosts[@]}"; do
        ip netns pids "shop-$host" 2>/dev/null | xargs -r kill 2>/dev/null || true
    done
    # Until they are gone (su, PostgreSQL's parent, lingers 2 s after a signal); at most 10 s.
    local tries=0
    while [ -n "$(for host in "${hosts[@]}"; do ip netns pids "shop-$host" 2>/dev/null; done)" ]; do
        tries=$((tries + 1))
        if [ $tries -ge 50 ]; then
            for host in "${hosts[@]}"; do
                ip netns pids "shop-$host" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
            done
            sleep 0.2
            break
        fi
        sleep 0.2
    done
    remove_network
    rm -rf "$work"
}

remove_network() {
    for host in "${hosts[@]}"; do
        ip netns del "shop-$host" 2>/dev/null || true
        ip link del "shop-$host" 2>/dev/null || true
    done
    ip link del shop-br 2>/dev/null || true
}

remove_network  # leftovers of an interrupted run
trap cleanup EXIT

ip link add shop-br type bridge
ip link set shop-br up
for host in "${hosts[@]}"; do
    ip netns add "shop-$host"
    ip link add "shop-$host" type veth peer name eth0 netns "shop-$host"
    ip link set "shop-$host" master shop-br up
    ip -n "shop-$host" addr add "${address[$host]}/24" dev eth0
    ip -n "shop-$host" link set eth0 up
    ip -n "shop-$host" link set lo up
done
on() { local host=$1; shift; ip netns exec "shop-$host" "$@"; }

# For SHOP_COLLECT=ssh, an OpenSSH server on every host, reached from the root namespace
# over the bridge with a key made for this run.
if [ "$collect" = ssh ]; then
    source "$here/../sshd.sh"
    serve_ssh "$work" shop-br 10.77.0.1/24 shop
fi

# Database: a throwaway cluster that trusts the shop's network.
mkdir -p "$work/pg" "$work/pgsock"
chown postgres "$work/pg" "$work/pgsock"
su postgres -s /bin/sh -c "$pgbin/initdb -A trust -D $work/pg" >/dev/null
echo "host all all 10.77.0.0/24 trust" >> "$work/pg/pg_hba.conf"
on db su postgres -s /bin/sh -c "exec $pgbin/postgres -D $work/pg -k $work/pgsock \
    -c listen_addresses=${address[db]} -c fsync=off" >"$work/pg.log" 2>&1 &
pids+=($!)
until su postgres -s /bin/sh -c "$pgbin/pg_isready -q -h $work/pgsock"; do sleep 0.2; done
psql() { su postgres -s /bin/sh -c "psql -q -h $work/pgsock $*"; }
psql "-c 'CREATE ROLE shop LOGIN'"
psql "-c 'CREATE DATABASE shop OWNER shop'"
psql "-U shop shop -c 'CREATE TABLE items (id int PRIMARY KEY, name text);
    CREATE TABLE orders (id serial PRIMARY KEY, item int, at timestamptz DEFAULT now());
    INSERT INTO items SELECT i, md5(i::text) FROM generate_series(1, 40) i;'"

# Cache.
on cache redis-server --bind "${address[cache]}" --port 6379 --save "" --appendonly no \
    --protected-mode no >"$work/redis.log" 2>&1 &
pids+=($!)

# Application tier.
logs=()
rm -f "$out"/*-calls.log "$out/truth.tsv" "$out/app-pool.tsv"
if [ -n "$traced" ]; then logs=("$out/app-calls.log"); fi
if [ -n "$traced" ] && [[ $workers == *q* ]]; then logs+=("$out/app-pool.tsv"); fi
app_env=()
if [ "$nodelay" = 1 ]; then app_env=(env SHOP_NODELAY=1); fi
on app "${app_env[@]}" "$venv/bin/python" "$here/app.py" "${address[app]}:8080" "${address[cache]}" \
    "${address[db]}" "$workers" "${logs[@]}" >"$work/app.log" 2>&1 &
pids+=($!)

# Web tier: nginx as a reverse proxy with keep-alive connections to the application.
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
    upstream app { server ${address[app]}:8080; keepalive 8; }
    server {
        listen ${address[web]}:80;
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

for _ in $(seq 50); do
    on client python3 -c "import urllib.request as u; u.urlopen('http://${address[web]}/item/1', timeout=1)" \
        2>/dev/null && break
    sleep 0.2
done

# One capture per host, as its owner would take it: tcpdump on most, dumpcap's pcapng
# on the database host, and the client's on every interface (Linux cooked v2 headers).
rm -f "$out"/*.pcap "$out"/*.pcapng
if [ -n "$collect" ]; then
    # Or one through `blackbox collect` (SHOP_COLLECT, above): its tcpdump on every host.
    rm -f "$out/manifest.json"
    via=()
    if [ "$collect" = netns ]; then
        printf '%s\n' "${hosts[@]}" > "$work/hosts"
        via=(--via "ip netns exec shop-{host}")
    else
        printf '%s ssh -F '"$work"'/ssh_config {host}\n' "${hosts[@]}" > "$work/hosts"
    fi
    extra=()
    read -r -a extra <<< "${SHOP_COLLECT_ARGS:-}"
    "$blackbox" collect --out "$out" --hosts "$work/hosts" "${via[@]}" --duration 600s \
        "${extra[@]}" 2>"$work/collect.log" &
    collect_pid=$!
    pids+=($collect_pid)
    tries=0
    until grep -q "^collect: all ${#hosts[@]} hosts capturing" "$work/collect.log"; do
        tries=$((tries + 1))
        if ! kill -0 "$collect_pid" 2>/dev/null || [ $tries -ge 300 ]; then
            echo "capture.sh: blackbox collect did not report all ${#hosts[@]} hosts capturing" \
                "($(kill -0 "$collect_pid" 2>/dev/null && echo 'in 30 s' || echo 'it exited'));" \
                "its log:" >&2
            cat "$work/collect.log" >&2
            exit 1
        fi
        sleep 0.1
    done
else
    capture_pids=()
    # Started without the `on` function, so that $! is the capturing process itself (ip
    # netns exec execs it) and the SIGINT below reaches it.
    for host in web app cache; do
        ip netns exec "shop-$host" tcpdump -q -n -s 0 -U -i eth0 -w "$out/$host.pcap" 2>/dev/null &
        capture_pids+=($!)
    done
    ip netns exec shop-client tcpdump -q -n -s 0 -U -i any -w "$out/client.pcap" 2>/dev/null &
    capture_pids+=($!)
    ip netns exec shop-db dumpcap -q -i eth0 -w "$out/db.pcapng" 2>/dev/null &
    capture_pids+=($!)
    sleep 1
fi

client_log=()
if [ -n "$traced" ]; then client_log=("$out/client-calls.log"); fi
on client python3 "$here/load.py" "${address[web]}" "$load_seconds" "$threads" "${client_log[@]}"

sleep 1
if [ -n "$collect" ]; then
    kill -INT "$collect_pid" 2>/dev/null || true
    tries=0
    while kill -0 "$collect_pid" 2>/dev/null; do
        tries=$((tries + 1))
        if [ $tries -ge 600 ]; then
            echo "capture.sh: blackbox collect still runs 60 s after SIGINT; its log:" >&2
            cat "$work/collect.log" >&2
            exit 1
        fi
        sleep 0.1
    done
    status=0
    wait "$collect_pid" || status=$?
    if [ $status != 0 ]; then
        echo "capture.sh: blackbox collect exited with status $status; its log:" >&2
        cat "$work/collect.log" >&2
        exit 1
    fi
    chmod 644 "$out"/*.pcap
else
    for pid in "${capture_pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
    wait "${capture_pids[@]}" 2>/dev/null || true
    chmod 644 "$out"/*.pcap "$out"/*.pcapng
fi
if [ -n "$traced" ]; then
    python3 "$here/truth.py" "$out"
    rm -f "$out"/*-calls.log
fi
if [ -n "$collect" ]; then
    ls -l "$out"/*.pcap "$out/manifest.json"
else
    ls -l "$out"/*.pcap "$out"/*.pcapng
fi
