"""Checks a brokers run's captures against its call logs, with tshark.

Usage: verify.py DIR     (DIR as capture.sh left it: <host>.pcap[.gz], *.log.jsonl[.gz])

1. Per capture, the messages tshark's dissectors find (HTTP, AMQP, Kafka, MQTT, RESP;
   tshark has no NATS dissector, so NATS operations are read from the TCP payload on
   port 4222 here), by type.
2. Per capture and per direction of each TCP connection, the request ids that message
   bodies carry (`"rid": "<32 hex>"`: every broker message, HTTP response, reply and
   Redis SET of an order has one), in the order of the bytes, against the order the
   program at one end logged those messages in (calllog.py's seq). Both captures of a
   connection are checked, so the broker's capture is held to its clients' logs.
"""
import collections
import glob
import gzip
import json
import os
import re
import subprocess
import sys

RID = re.compile(rb'"rid": ?"([0-9a-f]{32})"')
NATS_OP = re.compile(rb"(?m)^(HPUB|PUB|HMSG|MSG|PING|PONG|SUB|UNSUB|CONNECT|INFO|\+OK|-ERR)\b")
PORTS = {4222: "nats", 5672: "amqp", 9092: "kafka", 1883: "mqtt", 6379: "redis", 80: "http"}
AMQP = {(60, 40): "basic.publish", (60, 60): "basic.deliver", (60, 80): "basic.ack",
        (60, 20): "basic.consume", (60, 10): "basic.qos"}
KAFKA = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit",
         9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
         13: "LeaveGroup", 14: "SyncGroup", 18: "ApiVersions", 19: "CreateTopics"}
MQTT = {1: "CONNECT", 2: "CONNACK", 3: "PUBLISH", 4: "PUBACK", 8: "SUBSCRIBE",
        9: "SUBACK", 12: "PINGREQ", 13: "PINGRESP", 14: "DISCONNECT"}


def tshark(pcap, display_filter, *fields):
    command = ["tshark", "-n", "-r", pcap, "-Y", display_filter, "-T", "fields",
               "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,"]
    for field in fields:
        command += ["-e", field]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    return [line.split("\t") for line in result.stdout.splitlines()]


def open_any(path):
    return gzip.open(path, "rt") if path.endswith(".gz") else open(path)


def streams(pcap):
    """(src, dst) -> the bytes that went that way, in order (retransmissions left out);
    and per service and direction, how many segments carried how many request ids
    (several messages in one segment)."""
    data = collections.defaultdict(bytearray)
    batching = collections.defaultdict(collections.Counter)
    for src, sport, dst, dport, payload in tshark(
            pcap, "tcp.len > 0 && !tcp.analysis.retransmission", "ip.src", "tcp.srcport",
            "ip.dst", "tcp.dstport", "tcp.payload"):
        segment = bytes.fromhex(payload.replace(":", ""))
        data[(f"{src}:{sport}", f"{dst}:{dport}")] += segment
        if int(dport) in PORTS:
            way = f"{PORTS[int(dport)]} to server"
        else:
            way = f"{PORTS.get(int(sport), sport)} from server"
        batching[way][len(RID.findall(segment))] += 1
    return data, batching


def message_counts(pcap, data):
    counts = collections.Counter()
    for (src, dst), payload in data.items():
        if src.endswith(":4222") or dst.endswith(":4222"):
            way = "<" if src.endswith(":4222") else ">"
            for op in NATS_OP.findall(bytes(payload)):
                counts[f"nats {op.decode()}{way}"] += 1
    for method_class, method, *_ in tshark(pcap, "amqp.method.class", "amqp.method.class",
                                           "amqp.method.method"):
        for c, m in zip(method_class.split(","), method.split(",")):
            name = AMQP.get((int(c), int(m)))
            if name:
                counts[f"amqp {name}"] += 1
    for api_key, response, headers in tshark(pcap, "kafka", "kafka.api_key",
                                             "kafka.request_frame", "kafka.header_key"):
        for key in api_key.split(","):
            if key:
                name = KAFKA.get(int(key), key)
                counts[f"kafka {name}{' response' if response else ''}"] += 1
        if headers:
            counts[f"kafka records with headers{' (fetched)' if response else ' (produced)'}"] \
                += len(headers.split(","))
    for msgtype, *_ in tshark(pcap, "mqtt", "mqtt.msgtype"):
        for t in msgtype.split(","):
            counts[f"mqtt {MQTT.get(int(t), t)}"] += 1
    for port, values, *_ in tshark(pcap, "resp && tcp.dstport == 6379", "tcp.dstport",
                                   "resp.bulk_string.value"):
        counts[f"redis {bytes.fromhex(values.split(',')[0]).decode().upper()}"] += 1
    for method, *_ in tshark(pcap, "http.request", "http.request.method"):
        counts[f"http {method} request"] += 1
    counts["http responses"] = len(tshark(pcap, "http.response", "frame.number"))
    return counts


def wire_name(line):
    """The name message_counts gives the message a log line stands for."""
    proto, wire = line.get("proto"), line.get("wire")
    if proto == "nats" and wire in ("HPUB", "PUB", "PING"):
        return f"nats {wire}>"
    if proto == "nats" and wire in ("HMSG", "MSG", "PONG"):
        return f"nats {wire}<"
    if proto == "amqp":
        return f"amqp {wire}"
    if proto == "kafka" and wire == "record":
        return ("kafka records with headers "
                f"({'produced' if line['dir'] == 'sent' else 'fetched'})")
    if proto == "kafka" and wire == "OffsetCommit":
        return "kafka OffsetCommit"
    if proto == "mqtt":
        return f"mqtt {wire}"
    if proto == "redis":
        return f"redis {line['command']}"
    if proto == "http" and line["kind"] in ("request", "served"):
        return f"http {line['method']} request"
    if proto == "http" and line["kind"] == "response":
        return "http responses"
    return None


def logged_counts(lines, host, address):
    """What the logs say host's capture holds: its own log's lines if it runs a logging
    program, else (brokers, cache) the lines of the programs connected to it."""
    own = [line for line in lines if line["host"] == host]
    if not own:
        own = [line for line in lines if line.get("peer", "").split(":")[0] == address]
    counts = collections.Counter()
    for line in own:
        if line["kind"] in ("ready", "stop"):
            continue
        name = wire_name(line)
        if name:
            counts[name] += 1
    if host == "client":  # the client logs each request once; web answered it
        counts["http responses"] = sum(1 for line in own if line.get("status") == 200)
    return counts


def carries_id(line):
    """Whether the message a log line stands for has the request id in its body."""
    kind = line["kind"]
    if kind in ("publish", "request", "delivery", "reply"):
        return line["host"] != "client"  # broker messages (the client's are HTTP)
    if kind == "response":  # web's HTTP response, a JSON body
        return True
    return kind == "redis" and line.get("command") == "SET"  # SET order:<id> <body>


def expected(lines):
    """(local, peer, 'sent'|'received') -> request ids in the order their bodies went
    over that connection, by the logs (their seq)."""
    out = collections.defaultdict(list)
    for line in lines:
        rid = line.get("rid")
        if "local" not in line or rid is None:
            continue
        if line["host"] == "client" and line["kind"] == "request":
            if line.get("status") == 200:  # the response it read carries the id
                out[(line["local"], line["peer"], "received")].append(
                    (line["seq"], line["time"], rid))
        elif carries_id(line):
            out[(line["local"], line["peer"], line["dir"])].append(
                (line.get("seq", 0), line["time"], rid))
    return {key: [item[-1] for item in sorted(value)] for key, value in out.items()}


def main():
    directory = sys.argv[1]
    lines = []
    for path in glob.glob(os.path.join(directory, "*.log.jsonl*")):
        with open_any(path) as file:
            lines += [json.loads(text) for text in file if text.strip()]
    lines.sort(key=lambda line: line["time"])
    want = expected(lines)
    addresses = {}
    with open(os.path.join(directory, "hosts.tsv")) as file:
        for text in file:
            host, address = text.split()
            addresses[host] = address
    total_bad = 0
    for pcap in sorted(glob.glob(os.path.join(directory, "*.pcap*"))):
        host = os.path.basename(pcap).split(".")[0]
        data, batching = streams(pcap)
        counts = message_counts(pcap, data)
        print(f"{host}: " + ", ".join(f"{name} {count}" for name, count in
                                      sorted(counts.items()) if count))
        logged = logged_counts(lines, host, addresses[host])
        # Every NATS connection's handshake has a PING and PONG of its own, not logged.
        for name in ("nats PING>", "nats PONG<"):
            if logged[name]:
                logged[name] += counts["nats CONNECT>"]
        differ = [f"{name}: {count} logged, {counts[name]} on the wire"
                  for name, count in sorted(logged.items()) if counts[name] != count]
        total_bad += len(differ)
        print("  counts " + ("agree with the logs: " + ", ".join(sorted(logged)) if not differ
                             else "differ: " + "; ".join(differ)))
        checked = agreed = 0
        for (src, dst), payload in sorted(data.items()):
            seen = [rid.decode() for rid in RID.findall(bytes(payload))]
            # The log of the program at one end: the sender's, else the receiver's.
            logged = want.get((src, dst, "sent"))
            if logged is None:
                logged = want.get((dst, src, "received"))
            if logged is None:
                logged = []
            if not seen and not logged:
                continue
            checked += 1
            if seen == logged:
                agreed += 1
                continue
            total_bad += 1
            service = PORTS.get(int(dst.rsplit(":", 1)[1])) or PORTS.get(
                int(src.rsplit(":", 1)[1]))
            missing = len(set(logged) - set(seen))
            extra = len(set(seen) - set(logged))
            print(f"  {service} {src}>{dst}: {len(seen)} ids on the wire, {len(logged)} "
                  f"logged; {missing} logged not seen, {extra} seen not logged"
                  f"{', same ids, other order' if not missing and not extra else ''}")
        print(f"  {agreed} of {checked} connection directions carry the logged ids in the "
              f"logged order")
        several = []
        for way, histogram in sorted(batching.items()):
            many = {n: c for n, c in histogram.items() if n > 1}
            if many:
                several.append(f"{way} {sum(many.values())} of "
                               f"{sum(c for n, c in histogram.items() if n)} (up to "
                               f"{max(many)} ids)")
        if several:
            print("  segments with several messages' ids: " + "; ".join(several))
    print("all agree" if total_bad == 0 else f"{total_bad} disagreements")
    return 0 if total_bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
