#!/usr/bin/env bash
# The gRPC shop (../grpc) behind a cut-through gRPC proxy with a bounded worker pool
# (README.md): builds it out of real servers, one network namespace per host, drives
# STREAMS concurrent client streams through it for SECONDS seconds, captures packets on
# every host into DIR/<host>.pcap and writes DIR/truth.tsv from the request ids the
# calls carry (truth.py). Reuses ../grpc's services.py, load.py and shop.proto as they
# are, run through traced.py. Needs root; installs what is missing (mariadb-server,
# memcached, tcpdump; grpcio, grpcio-tools, pymysql and pymemcache from PyPI).
# Usage: traces/grpc-proxy/capture.sh [SECONDS [STREAMS [DIR]]]
# defaults: 15 32 /tmp/grpc-proxy/STREAMS. PROXY_WORKERS (default 16) sizes the proxy's
# pool. BLACKBOX names the blackbox binary truth.py runs (default: the repository's
# target/release/blackbox).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
shop=$(cd "$here/../grpc" && pwd)
seconds=${1:-15}
streams=${2:-32}
out=${3:-/tmp/grpc-proxy/$streams}
workers=${PROXY_WORKERS:-16}
[ "$(id -u)" = 0 ] || { echo "capture.sh: needs root (network namespaces)" >&2; exit 2; }
if ! command -v mariadbd >/dev/null || ! command -v memcached >/dev/null \
    || ! command -v tcpdump >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server memcached tcpdump >/dev/null
fi
python3 -c 'import grpc, grpc_tools, pymysql, pymemcache' 2>/dev/null \
    || pip install -q grpcio grpcio-tools pymysql pymemcache
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/*.pcap "$out"/*-calls.log "$out"/proxy-pool.tsv "$out"/truth.tsv

declare -A address=([client]=10.89.0.10 [proxy]=10.89.0.15 [gateway]=10.89.0.20
    [auth]=10.89.0.30 [catalog]=10.89.0.40 [orders]=10.89.0.50 [cache]=10.89.0.60
    [db]=10.89.0.70)
hosts=(client proxy gateway auth catalog orders cache db)
work=$(mktemp -d)
chmod 755 "$work"  # the database runs as mysql
pids=()

prefix=gp
source "$here/../netns.sh"
make_network

export SHOP_STUBS="$work/stubs" GATEWAY=${address[gateway]} AUTH=${address[auth]} \
    CATALOG=${address[catalog]} ORDERS=${address[orders]} CACHE=${address[cache]} \
    DB=${address[db]}
mkdir -p "$SHOP_STUBS"
python3 -m grpc_tools.protoc -I "$shop" --python_out="$SHOP_STUBS" \
    --grpc_python_out="$SHOP_STUBS" "$shop/shop.proto"

# The database, as ../grpc/capture.sh makes it.
mkdir -p "$work/mysql" && chown mysql: "$work/mysql"
mariadb-install-db --user=mysql --datadir="$work/mysql" >/dev/null
on db mariadbd --user=mysql --datadir="$work/mysql" --socket="$work/mysql/db.sock" \
    --bind-address="${address[db]}" --port=3306 --pid-file="$work/mysql/db.pid" \
    --skip-name-resolve 2>/dev/null &
pids+=($!)
until mariadb --socket="$work/mysql/db.sock" -e 'select 1' >/dev/null 2>&1; do sleep 0.2; done
mariadb --socket="$work/mysql/db.sock" <<'SQL'
CREATE DATABASE shop;
CREATE USER 'shop'@'%' IDENTIFIED BY 'shop';
GRANT ALL ON shop.* TO 'shop'@'%';
CREATE TABLE shop.items (id INT PRIMARY KEY, name TEXT);
CREATE TABLE shop.orders (id INT AUTO_INCREMENT PRIMARY KEY, item INT);
USE shop;
INSERT INTO shop.items SELECT seq, CONCAT('item-', seq) FROM seq_1_to_40;
SQL
on cache memcached -u nobody -l "${address[cache]}" -p 11211 -U 0 -m 64 &
pids+=($!)
for role in auth catalog orders gateway; do
    CALL_LOG="$out/$role-calls.log" on "$role" python3 "$here/traced.py" "$shop/services.py" "$role" &
    pids+=($!)
done
for role in auth catalog orders gateway; do
    wait_for client "${address[$role]}" 50051
done
on proxy python3 "$here/proxy.py" "${address[proxy]}:50051" "${address[gateway]}:50051" \
    "$workers" "$out/proxy-pool.tsv" &
pids+=($!)
wait_for client "${address[proxy]}" 50051
start_captures "$out"
# load.py's clients call "the gateway" at the address it is given: the proxy's.
TRACE_PREFIX=req on client python3 "$here/traced.py" "$shop/load.py" "${address[proxy]}" \
    "$seconds" "$streams"
stop_captures
chmod a+r "$out"/*.pcap
python3 "$here/truth.py" "$out"
ls -l "$out"
