#!/usr/bin/env bash
# Builds the gRPC shop (README.md) out of real servers, one network namespace per
# host: python grpcio services, Debian's MariaDB and memcached; drives load through it
# and captures packets on every host into this directory. Needs root; installs what
# is missing (mariadb-server, memcached, tcpdump; grpcio, grpcio-tools, pymysql and
# pymemcache from PyPI). Usage: traces/grpc/capture.sh [SECONDS] [CLIENTS]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${CAPTURE_DIR:-$here}  # where the captures go
seconds=${1:-10}
clients=${2:-8}
[ "$(id -u)" = 0 ] || { echo "capture.sh: needs root (network namespaces)" >&2; exit 2; }
if ! command -v mariadbd >/dev/null || ! command -v memcached >/dev/null \
    || ! command -v tcpdump >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server memcached tcpdump >/dev/null
fi
python3 -c 'import grpc, grpc_tools, pymysql, pymemcache' 2>/dev/null \
    || pip install -q grpcio grpcio-tools pymysql pymemcache

declare -A address=([client]=10.79.0.10 [gateway]=10.79.0.20 [auth]=10.79.0.30
    [catalog]=10.79.0.40 [orders]=10.79.0.50 [cache]=10.79.0.60 [db]=10.79.0.70)
hosts=(client gateway auth catalog orders cache db)
work=$(mktemp -d)
chmod 755 "$work"  # the database runs as mysql
pids=()

prefix=gs
source "$here/../netns.sh"
make_network

export SHOP_STUBS="$work/stubs" GATEWAY=${address[gateway]} AUTH=${address[auth]} \
    CATALOG=${address[catalog]} ORDERS=${address[orders]} CACHE=${address[cache]} \
    DB=${address[db]}
mkdir -p "$SHOP_STUBS"
python3 -m grpc_tools.protoc -I "$here" --python_out="$SHOP_STUBS" \
    --grpc_python_out="$SHOP_STUBS" "$here/shop.proto"

# The database: a fresh data directory, the shop's tables and user, then served on
# the db host's address.
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
    on "$role" python3 "$here/services.py" "$role" &
    pids+=($!)
done
for role in auth catalog orders gateway; do
    wait_for client "${address[$role]}" 50051
done
start_captures "$out"
on client python3 "$here/load.py" "${address[gateway]}" "$seconds" "$clients"
stop_captures
ls -l "$out"/*.pcap
