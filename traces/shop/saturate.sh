#!/usr/bin/env bash
# The shop under saturation (issue 43): captures the shop, traced, with an application
# pool smaller than the clients at each client count, and measures blackbox on it from
# timing alone (--ignore-ids; the truth comes from the programs' logs, see truth.py).
# Needs root, as capture.sh does, and a built blackbox. Usage:
#   traces/shop/saturate.sh [DIR [SECONDS [APP_WORKERS [CLIENTS...]]]]
# defaults: /tmp/shop-pool 20 8q 16 32 64 128. DIR/N receives the captures at N clients
# (capture.sh's), truth.tsv, app-pool.tsv, and what each measurement printed:
#   wait.txt        wait.py: the wait at app between a request's arrival and its first call out
#   eval-joint.*    blackbox eval --ignore-ids (the default joint choice; with its summary)
#   eval-paper.*    the same with --algorithm paper
#   eval-truth.*    the same with --start-from-truth (a bound on the joint search)
#   nest.txt        blackbox nest -q --ignore-ids --top 12, timed in nest.time (seconds)
# and DIR/summary.md a table of them all. BLACKBOX names the blackbox binary (default:
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
    [ -s "$dir/truth.tsv" ] || { echo "saturate.sh: no truth in $dir" >&2; exit 1; }
    python3 "$here/../wait.py" "$dir" web app | tee "$dir/wait.txt"
    captures=("$dir"/*.pcap*)
    "$blackbox" eval "${captures[@]}" --truth-ids "$dir/truth.tsv" --ignore-ids \
        --json "$dir/eval-joint.json" >"$dir/eval-joint.txt" 2>&1
    "$blackbox" eval "${captures[@]}" --truth-ids "$dir/truth.tsv" --ignore-ids -q \
        --algorithm paper --json "$dir/eval-paper.json" >"$dir/eval-paper.txt" 2>&1
    "$blackbox" eval "${captures[@]}" --truth-ids "$dir/truth.tsv" --ignore-ids -q \
        --start-from-truth --json "$dir/eval-truth.json" >"$dir/eval-truth.txt" 2>&1
    start=$EPOCHREALTIME
    "$blackbox" nest -q --ignore-ids --top 12 "${captures[@]}" >"$dir/nest.txt"
    awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f\n", b - a }' >"$dir/nest.time"
done

python3 - "$out" "$workers" "${clients[@]}" <<'PY' | tee "$out/summary.md"
import json, os, re, sys
out, workers, clients = sys.argv[1], sys.argv[2], sys.argv[3:]
print(f"app workers {workers}; pure inference (--ignore-ids)\n")
print("| clients | requests | parallelism | requests exact: joint / paper / from truth "
      "| calls with their true parent (of those with one): joint / paper / from truth "
      "| true patterns in nest's top 12 | requests in true patterns: joint / paper / from truth "
      "| nest wall time | wait at app before the first call out: mean (p90) | in the queue (app's log): mean | workers busy (app's log) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for n in clients:
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
