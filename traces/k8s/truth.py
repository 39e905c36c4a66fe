"""The truth of a k8s-shop capture, from what its programs say they did: `truth.py DIR
[RECORDS]` reads the captures DIR/*.pcap* through `blackbox records` (or that command's
output, saved in the file RECORDS) and the call logs load.py and the two app.py replicas
wrote (DIR/*-calls.log: per line `client>server  operation  trace-id`, each connection
named from the logging socket's own view, in the order the connection carried the
calls), and writes DIR/truth.tsv: the trace id of every captured call by its call id,
for `blackbox eval --truth-ids`. As ../shop/truth.py, but NAT-aware.

Under NAT the ends of one connection see different addresses. The caller's capture
names it `caller:port>VIP:80`, the callee's `caller:port>pod:8080` (a ClusterIP's
DNAT) or `node:port>pod:8080` (a NodePort's MASQUERADE); a log names it as its socket
sees it. What the caller's view, the logs and a joined call id (caller endpoint as the
caller's capture shows it, server endpoint as the callee's does) agree on is the
caller's endpoint, the left of `>`: load.py logs the client's own endpoint, app.py the
app pod's own endpoint for the calls it makes and, for the calls it serves, nginx's
pod endpoint, which no NAT changes inside the cluster. So a call is keyed by its
caller endpoint and its service: the right of `>` is mapped to the service it names
(its ClusterIP, NodePort or endpoint, DIR/services.tsv from capture.sh), so that a
caller port reused for another service is another connection. The views of one call
in different captures (same caller endpoint, service and TCP sequence number, the
`#s` of the call id) are one call; each key's calls, in time order, are matched from
the ends with the calls its log names, in order (calls made before the capture are in
the log but not in the capture), and every matched pair must name the same operation,
or this fails. Every call id of a matched call gets its trace id (blackbox names a
call by its joined id, one per call; a blackbox that did not join the ends named each
end's view, and both get it). A call id whose caller endpoint no log names gets none:
without the join, that was the web pod's view of the client's requests, which names
the node's masqueraded endpoint (node:port>web:8080).

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
captures = sorted(glob.glob(os.path.join(directory, "*.pcap*")))  # not DIR/node/
if len(sys.argv) > 2:
    with open(sys.argv[2]) as text:
        records = text.read()
else:
    records = subprocess.run([blackbox, "records", "-q", *captures], check=True,
                             capture_output=True, text=True).stdout

services = {}
services_file = os.path.join(directory, "services.tsv")
if os.path.exists(services_file):
    with open(services_file) as lines:
        for line in lines:
            name, address = line.split()
            services[address] = name
else:
    print(f"truth.py: no {services_file}: keying on the full server endpoint",
          file=sys.stderr)


def key(connection):
    """(caller endpoint, service) of `caller>server`."""
    caller, _, server = connection.partition(">")
    return caller, services.get(server, server)


# Each captured call id's first time, operation and hosts.
first = {}
for line in records.splitlines():
    fields = line.split()
    if len(fields) < 5 or not fields[1].startswith("CALL"):
        continue
    call = fields[4]
    operation = next((f[3:] for f in fields[5:] if f.startswith("op=")), "")
    time = float(fields[0])
    if call not in first or time < first[call][0]:
        first[call] = (time, operation, f"{fields[2]}->{fields[3]}")

# One call, however many captures name it: (caller, service, sequence number).
views = collections.defaultdict(list)
for call, (time, operation, _) in first.items():
    connection, _, sequence = call.split(":", 1)[1].rpartition("#")
    views[(*key(connection), sequence)].append((time, operation, call))
captured = collections.defaultdict(list)
for (caller, service, _), named in views.items():
    time, operation, _ = min(named)
    captured[(caller, service)].append((time, operation, [call for *_, call in named]))

logged, logger = collections.defaultdict(list), {}
for log in sorted(glob.glob(os.path.join(directory, "*-calls.log"))):
    with open(log) as lines:
        for line in lines:
            connection, operation, trace = line.rstrip("\n").split("\t")
            if connection == "None":  # app.py before its first connection (never, traced)
                continue
            k = key(connection)
            if logger.setdefault(k, log) != log:
                sys.exit(f"truth.py: {k} is in two logs, {logger[k]} and {log}")
            logged[k].append((operation, trace))


def verb(operation):
    return operation.replace("_", " ").split(" ")[0].upper()


truth, mismatched = {}, []
unnamed = collections.Counter()   # caller endpoint in no log: by caller address
before = 0                        # in a logged connection, but before its log's first
untraced = 0                      # logged with no trace id
for k, calls in sorted(captured.items()):
    calls.sort()
    log = logged.get(k)
    if log is None:
        unnamed[k[0].rpartition(":")[0]] += sum(len(ids) for *_, ids in calls)
        continue
    matched = min(len(calls), len(log))
    before += sum(len(ids) for *_, ids in calls[:len(calls) - matched])
    for (_, operation, ids), (said, trace) in zip(calls[len(calls) - matched:],
                                                  log[len(log) - matched:]):
        if verb(operation) != verb(said):
            mismatched.append(f"{ids}: captured {operation}, logged {said}")
        elif trace == "-":
            untraced += len(ids)
        else:
            truth.update((call, trace) for call in ids)
if mismatched:
    sys.exit("truth.py: the capture and the logs disagree:\n" + "\n".join(mismatched[:10]))
with open(os.path.join(directory, "truth.tsv"), "w") as out:
    for call, trace in sorted(truth.items()):
        out.write(f"{call}\t{trace}\n")

pairs = collections.defaultdict(lambda: [0, 0])
for call, (_, _, pair) in first.items():
    pairs[pair][0] += 1
    pairs[pair][1] += call in truth
print(f"truth.py: {len(truth)} of {len(first)} captured call ids ({len(views)} calls) given "
      f"their request; without: {sum(unnamed.values())} whose caller endpoint no log names "
      f"(by caller address: {dict(unnamed)}), {before} made before their connection's "
      f"logged calls (opening a session), {untraced} logged without a trace id",
      file=sys.stderr)
print("truth.py: by caller->callee: " + ", ".join(
    f"{pair} {given}/{total}" for pair, (total, given) in sorted(pairs.items())),
    file=sys.stderr)
