"""Which hops blackbox gets wrong: `edges.py DIR` runs `blackbox nest -q --ignore-ids
--assignments` on the captures in DIR and prints, for each hop (caller -> callee),
how many of its calls were given a parent of their own request (DIR/truth.tsv).
BLACKBOX names the blackbox binary, as for truth.py.
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
captures = sorted(glob.glob(os.path.join(directory, "*.pcap")))
assignments = subprocess.run([blackbox, "nest", "-q", "--ignore-ids", "--assignments", "-",
                              *captures], check=True, capture_output=True, text=True).stdout
with open(os.path.join(directory, "truth.tsv")) as lines:
    truth = dict(line.split() for line in lines)
right, total = collections.Counter(), collections.Counter()
for line in assignments.splitlines():
    fields = line.split("\t")
    if len(fields) < 7 or fields[0] == "client":
        continue
    sender, receiver, call, parent = fields[0], fields[1], fields[2], fields[6]
    hop = f"{sender}->{receiver}"
    total[hop] += 1
    if parent != "-" and truth.get(parent) == truth.get(call):
        right[hop] += 1
for hop in sorted(total):
    print(f"{hop:18} {right[hop]:6} of {total[hop]:6} calls given a parent of their request "
          f"({right[hop] / total[hop]:.1%})")
