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
3. The same for the correlation ids of request/reply (quotes): AMQP content headers'
   correlation-id property, MQTT 5 PUBLISH Correlation Data (property 0x09), Kafka
   record header kafka_correlationId, as tshark dissects them, per connection
   direction, against the logged order; and that every request on the wire names
   where to reply (AMQP reply-to, MQTT Response Topic 0x08, Kafka record header
   kafka_replyTopic) as the log says.
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
        # Every record here carries one X-Request-Id header (the quotes' records
        # kafka_replyTopic and kafka_correlationId too).
        records = headers.split(",").count("X-Request-Id") if headers else 0
        if records:
            counts[f"kafka records with headers{' (fetched)' if response else ' (produced)'}"] \
                += records
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


def correlations(pcap):
    """(src, dst) -> [(correlation id, reply-to or response topic or None)] in wire
    order: AMQP content headers' properties, MQTT PUBLISH properties 0x08 and 0x09
    (the dissector gives both as prop_string, in the order of their ids), Kafka record
    headers kafka_replyTopic and kafka_correlationId (Spring Kafka's names; in Produce
    requests and Fetch responses, each record's headers in their order)."""
    out = collections.defaultdict(list)
    for src, sport, dst, dport, keys, values in tshark(
            pcap, '!tcp.analysis.retransmission && kafka.header_key == "kafka_correlationId"',
            "ip.src", "tcp.srcport", "ip.dst", "tcp.dstport", "kafka.header_key",
            "kafka.header_value"):
        way = (f"{src}:{sport}", f"{dst}:{dport}")
        topic = None
        for key, value in zip(keys.split(","), values.split(",")):
            value = bytes.fromhex(value.replace(":", "")).decode()
            if key == "X-Request-Id":  # a record's first header
                topic = None
            elif key == "kafka_replyTopic":
                topic = value
            elif key == "kafka_correlationId":
                out[way].append((value, topic))
    for src, sport, dst, dport, amqp_ids, amqp_replies, ids, strings in tshark(
            pcap, "!tcp.analysis.retransmission && (amqp.method.properties.correlation_id"
            " || mqtt.property_id == 0x09)", "ip.src", "tcp.srcport", "ip.dst",
            "tcp.dstport", "amqp.method.properties.correlation_id",
            "amqp.method.properties.reply_to", "mqtt.property_id", "mqtt.prop_string"):
        way = (f"{src}:{sport}", f"{dst}:{dport}")
        if amqp_ids:
            # Every AMQP message here with a correlation id has a reply-to only if it is
            # a request: pair them through the frame's content headers' text.
            replies = amqp_replies.split(",") if amqp_replies else []
            for correlation in amqp_ids.split(","):
                out[way].append((correlation, None))
            out[(way, "reply-to")] += replies
        if ids:
            values = iter(strings.split(","))
            topic = None
            for property_id in ids.split(","):
                property_id = int(property_id, 0)
                if property_id == 8:
                    topic = next(values)
                elif property_id == 9:
                    out[way].append((next(values), topic))
                    topic = None
                elif property_id in (3, 0x12):  # content type, assigned client id
                    next(values)
    return out


def logged_correlations(lines):
    """(local, peer, dir) -> [(correlation id, response topic (MQTT) or reply topic
    (Kafka), reply-to (AMQP))] by the logs' order."""
    out = collections.defaultdict(list)
    for line in lines:
        if "correlation_id" in line and "local" in line:
            out[(line["local"], line["peer"], line["dir"])].append(
                (line.get("seq", 0), line["time"], line["correlation_id"],
                 line.get("response_topic") or line.get("reply_topic"),
                 line.get("reply_to")))
    return {key: sorted(value) for key, value in out.items()}


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


def check_correlations(pcap, logged_correlation):
    """Correlation ids (and where to reply) on the wire against the logs; the number of
    connection directions that disagree."""
    seen_all = correlations(pcap)
    checked = agreed = bad = 0
    summary = collections.Counter()
    for way in sorted(way for way in seen_all if isinstance(way[0], str)):
        src, dst = way
        seen = seen_all[way]
        logged = logged_correlation.get((src, dst, "sent"))
        if logged is None:
            logged = logged_correlation.get((dst, src, "received"), [])
        checked += 1
        ids_ok = [c for c, _ in seen] == [item[2] for item in logged]
        # MQTT, Kafka: the Response Topic, kafka_replyTopic on the wire where the log
        # has one.
        topics_ok = all(topic == item[3] for (_, topic), item in zip(seen, logged)
                        if topic is not None or item[3] is not None)
        # AMQP: a reply-to on the wire for each logged one, the same name (the broker
        # rewrites amq.rabbitmq.reply-to to amq.rabbitmq.reply-to.<token> when it
        # delivers the request; the worker's log has the rewritten name).
        replies = seen_all.get((way, "reply-to"), [])
        logged_replies = [item[4] for item in logged if item[4]]
        replies_ok = replies == logged_replies
        if ids_ok and topics_ok and replies_ok:
            agreed += 1
        else:
            bad += 1
            service = PORTS.get(int(dst.rsplit(":", 1)[1])) or PORTS.get(
                int(src.rsplit(":", 1)[1]))
            print(f"  correlation {service} {src}>{dst}: {len(seen)} on the wire, "
                  f"{len(logged)} logged; ids {'agree' if ids_ok else 'differ'}, "
                  f"response topics {'agree' if topics_ok else 'differ'}, reply-to "
                  f"{len(replies)} on the wire, {len(logged_replies)} logged"
                  f"{'' if replies_ok else ', differ'}")
        summary["requests naming a reply-to" if replies else
                "requests naming a response or reply topic" if any(t for _, t in seen) else
                "replies"] += len(seen)
    if checked:
        print(f"  {agreed} of {checked} connection directions carry the logged correlation "
              f"ids in the logged order ("
              + ", ".join(f"{count} with {what}" for what, count in sorted(summary.items()))
              + ")")
    return bad


def main():
    directory = sys.argv[1]
    lines = []
    for path in glob.glob(os.path.join(directory, "*.log.jsonl*")):
        with open_any(path) as file:
            lines += [json.loads(text) for text in file if text.strip()]
    lines.sort(key=lambda line: line["time"])
    want = expected(lines)
    logged_correlation = logged_correlations(lines)
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
        total_bad += check_correlations(pcap, logged_correlation)
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
