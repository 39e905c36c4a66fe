"""How long requests wait at a pooled host before it serves them: `wait.py DIR CALLER
HOST` reads the captures in DIR through `blackbox records` and DIR/truth.tsv (the
capture scripts' traced runs), and prints, over the requests CALLER sent to HOST that
made a call out, the time from a request's arrival at HOST to HOST's first call out for
it (both on HOST's clock, from its capture); and how many requests HOST held at once,
and how many of them it was serving (from their first call out to their answer: the
workers busy), averaged over the capture. With DIR/HOST-pool.tsv (the pool's own log:
`trace-id  queued  served  start` in seconds, as traces/shop/app.py's Nq mode and
traces/grpc-proxy/proxy.py write it), also what the pool logged: each request's wait in
its queue, its time in a worker, and the workers busy, averaged from the first request
a worker took to the last it finished. Used by traces/shop/saturate.sh (web app) and
traces/grpc-proxy/study.sh (client proxy).

BLACKBOX names the blackbox binary, as for truth.py.
"""
import glob
import os
import statistics
import subprocess
import sys

if len(sys.argv) != 4:
    sys.exit("usage: wait.py DIR CALLER HOST")
directory, caller, host = sys.argv[1:4]
here = os.path.dirname(os.path.abspath(__file__))
built = os.path.join(here, "..", "target", "release", "blackbox")
blackbox = os.environ.get("BLACKBOX") or (built if os.path.exists(built) else "blackbox")
captures = sorted(glob.glob(os.path.join(directory, "*.pcap*")))
records = subprocess.run([blackbox, "records", "-q", *captures], check=True,
                         capture_output=True, text=True).stdout

trace_of = {}
with open(os.path.join(directory, "truth.tsv")) as truth:
    for line in truth:
        call, trace = line.split()
        trace_of[call] = trace

arrived, answered, first_out = {}, {}, {}
for line in records.splitlines():
    fields = line.split()
    if len(fields) < 5:
        continue
    time, kind, source, destination, call = float(fields[0]), fields[1], fields[2], fields[3], fields[4]
    trace = trace_of.get(call)
    if trace is None:
        continue
    if kind == "CALL_RECV" and source == caller and destination == host:
        arrived[trace] = min(time, arrived.get(trace, time))
    elif kind == "RET_SENT" and source == host and destination == caller:
        answered[trace] = max(time, answered.get(trace, time))
    elif kind == "CALL_SENT" and source == host:
        first_out[trace] = min(time, first_out.get(trace, time))

waits = sorted(first_out[t] - arrived[t] for t in arrived if t in first_out)
if not waits:
    sys.exit(f"wait.py: no request at {host} with a call out")
# Requests held by the host at once, averaged over time (Little's law over the capture).
held = [(arrived[t], answered[t]) for t in arrived if t in answered]
span = max(end for _, end in held) - min(start for start, _ in held)
in_host = sum(end - start for start, end in held) / span
# Requests between their first call out and their answer: the workers busy.
busy = sum(answered[t] - first_out[t] for t in first_out if t in answered) / span
ms = 1000
print(f"{len(waits)} requests: wait at {host} before the first call out mean {statistics.mean(waits) * ms:.2f} ms, "
      f"median {waits[len(waits) // 2] * ms:.2f} ms, p90 {waits[int(len(waits) * 0.9)] * ms:.2f} ms, "
      f"max {waits[-1] * ms:.2f} ms; requests at {host} at once (mean) {in_host:.1f}, "
      f"of them served (mean, from the first call out to the answer) {busy:.1f}")

pool_log = os.path.join(directory, f"{host}-pool.tsv")
if os.path.exists(pool_log):
    queued, served = [], []
    with open(pool_log) as lines:
        for line in lines:
            _, wait, serving, start = line.rstrip("\n").split("\t")
            queued.append(float(wait))
            served.append((float(start), float(serving)))
    queued.sort()
    busy = sum(s for _, s in served) / (max(t + s for t, s in served) - min(t for t, _ in served))
    print(f"{host}'s pool: {len(queued)} requests: in the queue mean {statistics.mean(queued) * ms:.2f} ms, "
          f"p90 {queued[int(len(queued) * 0.9)] * ms:.2f} ms; in a worker mean "
          f"{statistics.mean(s for _, s in served) * ms:.2f} ms; workers busy (mean) {busy:.2f}")
