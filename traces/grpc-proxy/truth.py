"""The truth of a capture.sh run: `truth.py DIR` reads the captures in DIR through
`blackbox records` and writes DIR/truth.tsv (`call-id  request-id` lines, for `blackbox
eval --truth-ids`):

- a gRPC call (an HTTP/2 stream) is given the `x-request-id` it carries, which the
  records show as `id=`; traced.py set it from the request its caller served;
- a memcached or MariaDB call, or memcached's one-way `set`, cannot carry one:
  traced.py logged each, per connection
  in the order the connection carried them, with the request its thread served
  (DIR/*-calls.log). A connection carries one call at a time, so its calls in the
  capture, in time order, are the calls logged for it, in order; calls made before
  the capture are in the log only, so the two are matched from their ends, and every
  matched pair must name the same operation, or this fails (as ../shop/truth.py).

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

first, carried = {}, {}
for line in records.splitlines():
    fields = line.split()
    if len(fields) < 5 or not fields[1].startswith(("CALL", "MSG")):
        continue
    call = fields[4]
    # The one-way messages here are memcached's `set ... noreply`, named by no op=.
    default = "set" if fields[1].startswith("MSG") else ""
    operation = next((f[3:] for f in fields[5:] if f.startswith("op=")), default)
    trace = next((f[3:] for f in fields[5:] if f.startswith("id=")), None)
    if trace:
        carried[call] = trace
    time = float(fields[0])
    if call not in first or time < first[call][0]:
        first[call] = (time, operation)

captured = collections.defaultdict(list)
for call, (time, operation) in first.items():
    if call not in carried:
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


truth = dict(carried)
unknown, mismatched = 0, []
for connection, calls in sorted(captured.items()):
    calls.sort()
    log = logged.get(connection, [])
    matched = min(len(calls), len(log))
    unknown += len(calls) - matched
    for (_, call, operation), (said, trace) in zip(calls[len(calls) - matched:],
                                                   log[len(log) - matched:]):
        if verb(operation) != verb(said):
            mismatched.append(f"{call}: captured {operation}, logged {said}")
        elif trace != "-":
            truth[call] = trace
        else:
            unknown += 1
if mismatched:
    sys.exit("truth.py: the capture and the logs disagree:\n" + "\n".join(mismatched[:10]))
with open(os.path.join(directory, "truth.tsv"), "w") as out:
    for call, trace in sorted(truth.items()):
        out.write(f"{call}\t{trace}\n")
print(f"truth.py: {len(truth)} of {len(first)} captured calls and one-way messages given their request "
      f"({len(carried)} by the id they carry, {len(truth) - len(carried)} from the logs); "
      f"{unknown} with none", file=sys.stderr)
