"""The shop's truth, from what its programs say they did: `truth.py DIR` reads the
captures in DIR through `blackbox records` and the call logs that load.py and app.py
wrote (DIR/*-calls.log: per line `client>server  operation  trace-id`, in the order
each connection carried the calls), and writes DIR/truth.tsv, the trace id of every
captured call by its call id, for `blackbox eval --truth-ids`.

A connection carries one call at a time, so its calls in the capture, in time order,
are the calls its program logged, in order. Calls made before the capture started are
in the log but not in the capture, so the two are matched from their ends; every
matched pair must name the same operation, or this fails. The ids blackbox reads from
the captures play no part: the truth comes from the programs alone.

BLACKBOX names the blackbox binary (default: target/release/blackbox of this
repository, else `blackbox` on the PATH).
"""
import collections
import glob
import os
import subprocess
import sys

directory = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
built = os.path.join(here, "..", "..", "target", "release", "blackbox")
blackbox = os.environ.get("BLACKBOX") or (built if os.path.exists(built) else "blackbox")
captures = sorted(glob.glob(os.path.join(directory, "*.pcap*")))
records = subprocess.run([blackbox, "records", "-q", *captures], check=True,
                         capture_output=True, text=True).stdout

# Each captured call's first time, operation and connection.
first = {}
for line in records.splitlines():
    fields = line.split()
    if len(fields) < 5 or not fields[1].startswith("CALL"):
        continue
    call = fields[4]
    operation = next((f[3:] for f in fields[5:] if f.startswith("op=")), "")
    time = float(fields[0])
    if call not in first or time < first[call][0]:
        first[call] = (time, operation)
captured = collections.defaultdict(list)
for call, (time, operation) in first.items():
    connection = call.split(":", 1)[1].rsplit("#", 1)[0]
    captured[connection].append((time, call, operation))

logged = collections.defaultdict(list)
for log in sorted(glob.glob(os.path.join(directory, "*-calls.log"))):
    with open(log) as lines:
        for line in lines:
            connection, operation, trace = line.rstrip("\n").split("\t")
            logged[connection].append((operation, trace))


def verb(operation):
    return operation.replace("_", " ").split(" ")[0].upper()


truth, unlogged, mismatched = [], 0, []
for connection, calls in sorted(captured.items()):
    calls.sort()
    log = logged.get(connection, [])
    matched = min(len(calls), len(log))
    unlogged += len(calls) - matched
    for (_, call, operation), (said, trace) in zip(calls[len(calls) - matched:],
                                                   log[len(log) - matched:]):
        if verb(operation) != verb(said):
            mismatched.append(f"{call}: captured {operation}, logged {said}")
        elif trace != "-":
            truth.append((call, trace))
if mismatched:
    sys.exit("truth.py: the capture and the logs disagree:\n" + "\n".join(mismatched[:10]))
with open(os.path.join(directory, "truth.tsv"), "w") as out:
    for call, trace in sorted(truth):
        out.write(f"{call}\t{trace}\n")
print(f"truth.py: {len(truth)} of {len(first)} captured calls given their request; "
      f"{unlogged} captured calls no log names (made before the load)", file=sys.stderr)
