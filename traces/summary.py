"""The table of a saturation study (issue 43): `summary.py OUT UNIT HOST WORKERS N...`
reads what traces/measure.sh wrote into OUT/N for each N (clients or streams: UNIT) and
prints one markdown row per N: requests, the default's parallelism, requests exact and
calls given their true parent (joint / paper / from the truth), the true patterns in
nest's top 12, the requests in true patterns, nest's wall time, and the wait at the
pooled HOST (of WORKERS workers) from its capture and from its pool's log.
"""
import json
import os
import re
import sys

out, unit, host, workers, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
print(f"{host} workers {workers}; pure inference (--ignore-ids)\n")
print(f"| {unit} | requests | parallelism | requests exact: joint / paper / from truth "
      "| calls with their true parent (of those with one): joint / paper / from truth "
      "| true patterns in nest's top 12 | requests in true patterns: joint / paper / from truth "
      f"| nest wall time | wait at {host} before the first call out: mean (p90) "
      f"| in the queue ({host}'s log): mean | workers busy ({host}'s log) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for n in runs:
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
