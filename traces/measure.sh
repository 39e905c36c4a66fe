#!/usr/bin/env bash
# Measures blackbox on one traced capture run of a saturation study (issue 43:
# shop/saturate.sh, grpc-proxy/study.sh), from timing alone (--ignore-ids; the truth is
# DIR/truth.tsv, from the request ids the calls carry). Writes into DIR:
#   wait.txt        wait.py: the wait at the pooled HOST, from its capture and its pool's log
#   eval-joint.*    blackbox eval --ignore-ids (the default joint choice; with its summary)
#   eval-paper.*    the same with --algorithm paper
#   eval-truth.*    the same with --start-from-truth (a bound on the joint search)
#   nest.txt        blackbox nest -q --ignore-ids --top 12, timed in nest.time (seconds)
# Usage: BLACKBOX=PATH traces/measure.sh DIR CALLER HOST   (CALLER calls the pooled HOST)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 3 ] || { echo "usage: BLACKBOX=PATH measure.sh DIR CALLER HOST" >&2; exit 2; }
dir=$1 caller=$2 host=$3
blackbox=${BLACKBOX:?measure.sh: set BLACKBOX to the blackbox binary}
[ -s "$dir/truth.tsv" ] || { echo "measure.sh: no truth in $dir" >&2; exit 1; }
python3 "$here/wait.py" "$dir" "$caller" "$host" | tee "$dir/wait.txt"
captures=("$dir"/*.pcap*)
scored() {
    local name=$1
    shift
    "$blackbox" eval "${captures[@]}" --truth-ids "$dir/truth.tsv" --ignore-ids "$@" \
        --json "$dir/eval-$name.json" >"$dir/eval-$name.txt" 2>&1
}
scored joint
scored paper -q --algorithm paper
scored truth -q --start-from-truth
start=$EPOCHREALTIME
"$blackbox" nest -q --ignore-ids --top 12 "${captures[@]}" >"$dir/nest.txt"
awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f\n", b - a }' >"$dir/nest.time"
