#!/usr/bin/env bash
# Captures HTTPS in network namespaces: curl fetching pages from openssl's s_server on
# two hosts, web on 8443 (a TLS port blackbox knows) and api on 9443 (one it recognises
# by the TLS record header), one capture per host, into this directory (README.md). Needs
# root; installs openssl, curl and tcpdump if missing. Usage: traces/tls/capture.sh [N]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${CAPTURE_DIR:-$here}  # where the captures go
fetches=${1:-20}
[ "$(id -u)" = 0 ] || { echo "capture.sh: needs root (network namespaces)" >&2; exit 2; }
if ! command -v openssl >/dev/null || ! command -v curl >/dev/null \
    || ! command -v tcpdump >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl curl tcpdump >/dev/null
fi

declare -A address=([client]=10.81.0.10 [web]=10.81.0.20 [api]=10.81.0.30)
declare -A port=([web]=8443 [api]=9443)
hosts=(client web api)
work=$(mktemp -d)
pids=()
prefix=tl
source "$here/../netns.sh"
make_network

openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=web -days 1 \
    -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
echo "hello over TLS" > "$work/index.html"
for server in web api; do
    (cd "$work" && on "$server" openssl s_server -quiet -accept "${port[$server]}" -WWW \
        -cert cert.pem -key key.pem >/dev/null 2>&1) &
    pids+=($!)
    wait_for client "${address[$server]}" "${port[$server]}"
done
start_captures "$out"
for server in web api; do
    for _ in $(seq "$fetches"); do
        on client curl -sk -o /dev/null "https://${address[$server]}:${port[$server]}/index.html"
    done
done
stop_captures
ls -l "$out"/*.pcap
