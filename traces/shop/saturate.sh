#!/usr/bin/env bash
# The shop under saturation (issue 43): captures the shop, traced, with an application
# pool smaller than the clients at each client count, and measures blackbox on it from
# timing alone (--ignore-ids; the truth comes from the programs' logs, see truth.py).
# Needs root, as capture.sh does, and a built blackbox. Usage:
#   traces/shop/saturate.sh [DIR [SECONDS [APP_WORKERS [CLIENTS...]]]]
# defaults: /tmp/shop-pool 20 8q 16 32 64 128. DIR/N receives the captures at N clients
# (capture.sh's), truth.tsv, app-pool.tsv, and what ../measure.sh writes (wait, evals,
# timed nest),
# and DIR/summary.md the table of ../summary.py. BLACKBOX names the blackbox binary (default:
# target/release/blackbox of this repository; copy it elsewhere first if others may
# rebuild it meanwhile). MEASURE_ONLY=1 measures the captures already in DIR/N again
# without capturing (no root needed then).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-/tmp/shop-pool}
seconds=${2:-20}
workers=${3:-8q}
shift $(( $# < 3 ? $# : 3 ))
clients=("$@")
[ ${#clients[@]} -gt 0 ] || clients=(16 32 64 128)
blackbox=${BLACKBOX:-$here/../../target/release/blackbox}
[ -x "$blackbox" ] || { echo "saturate.sh: no blackbox at $blackbox (cargo build --release)" >&2; exit 2; }
blackbox=$(cd "$(dirname "$blackbox")" && pwd)/$(basename "$blackbox")
export BLACKBOX=$blackbox
mkdir -p "$out"

for n in "${clients[@]}"; do
    dir=$out/$n
    echo "== $n clients, $workers app workers, ${seconds} s: $dir" >&2
    if [ -z "${MEASURE_ONLY:-}" ]; then
        bash "$here/capture.sh" "$seconds" "$n" "$dir" "$workers" traced
    fi
    bash "$here/../measure.sh" "$dir" web app
done

python3 "$here/../summary.py" "$out" clients app "$workers" "${clients[@]}" | tee "$out/summary.md"
