#!/usr/bin/env bash
# The gRPC shop behind the proxy under load (issue 43): captures it (capture.sh) at each
# stream count and measures blackbox on it from timing alone (--ignore-ids; the truth
# comes from the request ids the calls carry and the services' logs, see truth.py).
# Needs root, as capture.sh does, and a built blackbox. Usage:
#   traces/grpc-proxy/study.sh [DIR [SECONDS [STREAMS...]]]
# defaults: /tmp/grpc-proxy 15 16 32 64; PROXY_WORKERS as for capture.sh (default 16).
# DIR/N receives the captures at N streams (capture.sh's: *.pcap, truth.tsv,
# proxy-pool.tsv, the services' *-calls.log) and what each measurement printed:
#   wait.txt        wait.py: the wait at the proxy, from proxy.pcap and from its pool's log
#   eval-joint.*    blackbox eval --ignore-ids (the default joint choice; with its summary)
#   eval-paper.*    the same with --algorithm paper
#   eval-truth.*    the same with --start-from-truth (a bound on the joint search)
#   nest.txt        blackbox nest -q --ignore-ids --top 12, timed in nest.time (seconds)
#   edges.txt       edges.py: per hop, the calls nest gave a parent of their own request
# and DIR/summary.md a table of them all. BLACKBOX names the blackbox binary (default:
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
    [ -s "$dir/truth.tsv" ] || { echo "study.sh: no truth in $dir" >&2; exit 1; }
    python3 "$here/../wait.py" "$dir" client proxy | tee "$dir/wait.txt"
    captures=("$dir"/*.pcap)
    "$blackbox" eval "${captures[@]}" --truth-ids "$dir/truth.tsv" --ignore-ids \
        --json "$dir/eval-joint.json" >"$dir/eval-joint.txt" 2>&1
    "$blackbox" eval "${captures[@]}" --truth-ids "$dir/truth.tsv" --ignore-ids -q \
        --algorithm paper --json "$dir/eval-paper.json" >"$dir/eval-paper.txt" 2>&1
    "$blackbox" eval "${captures[@]}" --truth-ids "$dir/truth.tsv" --ignore-ids -q \
        --start-from-truth --json "$dir/eval-truth.json" >"$dir/eval-truth.txt" 2>&1
    start=$EPOCHREALTIME
    "$blackbox" nest -q --ignore-ids --top 12 "${captures[@]}" >"$dir/nest.txt"
    awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f\n", b - a }' >"$dir/nest.time"
    python3 "$here/edges.py" "$dir" >"$dir/edges.txt"
done

python3 - "$out" "${PROXY_WORKERS:-16}" "${streams[@]}" <<'PY' | tee "$out/summary.md"
import json, os, re, sys
out, workers, streams = sys.argv[1], sys.argv[2], sys.argv[3:]
print(f"proxy workers {workers}; pure inference (--ignore-ids)\n")
print("| streams | requests | parallelism | requests exact: joint / paper / from truth "
      "| calls with their true parent (of those with one): joint / paper / from truth "
      "| true patterns in nest's top 12 | requests in true patterns: joint / paper / from truth "
      "| nest wall time | wait at proxy before its call out: mean (p90) | in the queue (proxy's log): mean | workers busy (proxy's log) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for n in streams:
    d = os.path.join(out, n)
    ev = {k: json.load(open(os.path.join(d, f"eval-{k}.json")))["paths"] for k in ("joint", "paper", "truth")}
    requests = ev["joint"]["instances"]["truth"]
    exact = " / ".join(f"{ev[k]['instances_exact'] / requests:.1%}" for k in ev)
    calls = " / ".join(f"{ev[k]['children_right'] / ev[k]['children']:.2%}" for k in ev)
    share = " / ".join(f"{sum(p['inferred_count'] for p in ev[k]['latency']) / requests:.1%}" for k in ev)
    true = {p["signature"] for k in ev for p in ev[k]["latency"]}
    top = [line.split()[-1] for line in open(os.path.join(d, "nest.txt"))
           if re.match(r"\s*\d+\s+\d+\s", line)][:12]
    in_top = f"{len(true & set(top))} of {ev['joint']['patterns']['truth']}"
    summary = open(os.path.join(d, "eval-joint.txt")).read()
    parallelism = re.search(r"mean per-node parallelism ([\d.]+)", summary)
    wait = open(os.path.join(d, "wait.txt")).read()
    mean, p90 = (re.search(rf"{k} ([\d.]+) ms", wait).group(1) for k in ("mean", "p90"))
    pool = re.search(r"in the queue mean ([\d.]+) ms.*workers busy \(mean\) ([\d.]+)", wait)
    queue_mean, busy = pool.groups() if pool else ("?", "?")
    nest_time = float(open(os.path.join(d, "nest.time")).read())
    print(f"| {n} | {requests} | {parallelism.group(1) if parallelism else '?'} | {exact} | {calls} "
          f"| {in_top} | {share} | {nest_time:.1f} s | {mean} ms ({p90} ms) | {queue_mean} ms | {busy} |")
PY
