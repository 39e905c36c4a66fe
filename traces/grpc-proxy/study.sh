#!/usr/bin/env bash
# The gRPC shop behind the proxy under load (issue 43): captures it (capture.sh) at each
# stream count and measures blackbox on it from timing alone (--ignore-ids; the truth
# comes from the request ids the calls carry and the services' logs, see truth.py).
# Needs root, as capture.sh does, and a built blackbox. Usage:
#   traces/grpc-proxy/study.sh [DIR [SECONDS [STREAMS...]]]
# defaults: /tmp/grpc-proxy 15 16 32 64; PROXY_WORKERS as for capture.sh (default 16).
# DIR/N receives the captures at N streams (capture.sh's: *.pcap, truth.tsv,
# proxy-pool.tsv, the services' *-calls.log), what ../measure.sh writes (wait, evals,
# timed nest), and edges.txt (edges.py: per hop, the calls nest gave a parent of their
# own request);
# and DIR/summary.md the table of ../summary.py. BLACKBOX names the blackbox binary (default:
# target/release/blackbox of this repository; copy it elsewhere first if others may
# rebuild it meanwhile). MEASURE_ONLY=1 measures the captures already in DIR/N again
# without capturing (no root needed then).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-/tmp/grpc-proxy}
seconds=${2:-15}
shift $(( $# < 2 ? $# : 2 ))
streams=("$@")
[ ${#streams[@]} -gt 0 ] || streams=(16 32 64)
blackbox=${BLACKBOX:-$here/../../target/release/blackbox}
[ -x "$blackbox" ] || { echo "study.sh: no blackbox at $blackbox (cargo build --release)" >&2; exit 2; }
blackbox=$(cd "$(dirname "$blackbox")" && pwd)/$(basename "$blackbox")
export BLACKBOX=$blackbox
mkdir -p "$out"

for n in "${streams[@]}"; do
    dir=$out/$n
    echo "== $n streams, ${PROXY_WORKERS:-16} proxy workers, ${seconds} s: $dir" >&2
    if [ -z "${MEASURE_ONLY:-}" ]; then
        bash "$here/capture.sh" "$seconds" "$n" "$dir"
    fi
    bash "$here/../measure.sh" "$dir" client proxy
    python3 "$here/edges.py" "$dir" >"$dir/edges.txt"
done

python3 "$here/../summary.py" "$out" streams proxy "${PROXY_WORKERS:-16}" "${streams[@]}" | tee "$out/summary.md"
