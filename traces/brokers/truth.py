"""The truth of a brokers run, from its programs' call logs (calllog.py).

Usage: truth.py DIR            writes DIR/truth.jsonl and prints counts and checks
       truth.py --pending DIR  prints how many orders no worker has finished yet (and
                               quotes not yet answered), for capture.sh

DIR/truth.jsonl has one object per request id, in the order the client sent them:

  rid, method, path, kind (order|quote), broker (nats|amqp|kafka|mqtt)
  signature      the path as it happened, e.g. client->web(nats⇒worker-nats(cache,cache))
  request        the client's HTTP request: time sent, done (response read), status,
                 local/peer (the client's view of its connection), seq on it
  served, response   web's view of the same request and of its response
  publish        web's message to the broker: time, local/peer (web's connection),
                 broker_host, wire (HPUB, basic.publish, record, PUBLISH), seq, subject or
                 exchange+routing_key or topic, delivery_tag (AMQP) or mid (MQTT)
  flush          NATS orders: the PING web sent after the publish (seq on the connection)
  confirm        what the broker answered the publish with: PONG (NATS flush), basic.ack
                 (AMQP publisher confirm: its seq, delivery tag, multiple), the produce
                 response's partition and offset (Kafka), PUBACK (MQTT)
  deliveries     each time a worker got the message: host, time, local/peer (the worker's
                 connection), wire (HMSG, basic.deliver, record, PUBLISH), seq,
                 delivery_tag / offset / mid; exactly one unless something went wrong
  calls          the worker's Redis calls for it, in order: command, key, time, done,
                 local/peer, seq on that connection
  ack            the worker's acknowledgement: basic.ack (delivery tag), OffsetCommit
                 (offset committed), PUBACK (mid); none for NATS
  reply          quotes: the worker's reply (sent) and web's receipt of it (received);
                 MQTT also the broker's PUBACK of the worker's reply (confirm) and web's
                 PUBACK of the reply it got (ack); Kafka the Produce response to the
                 worker's reply record (confirm: partition, offset). AMQP, Kafka and
                 MQTT quotes carry the request id as correlation id (correlation_id) in
                 the request, its delivery and the reply; the request names where to
                 reply (reply_to: amq.rabbitmq.reply-to, which the broker delivers to
                 the worker as amq.rabbitmq.reply-to.<token>; Kafka's header
                 kafka_replyTopic, reply_topic: reply-web; response_topic: reply/web)
  problems       every check below that failed for this request (empty when all agree)

Checks: every request served by web on the connection the client used (the two views
mirrored, same order on it); one publish; exactly one delivery, carrying the same id in
its headers and its body, on a connection to the broker the publish went to; the
worker's calls between the delivery and the ack; the ack naming the delivery (tag,
mid, offset); the confirm naming the publish; AMQP publish tags and Kafka record order
as the broker numbered them (confirm tags, offsets); orders on each connection counted
without gaps. Quotes: the reply sent by the worker to where the request said
(NATS inbox, AMQP reply_to as delivered, Kafka kafka_replyTopic, MQTT Response Topic)
with the request's correlation id, after its cache call and before its ack, and
received by web on the connection it asked on (Kafka: on web's consumer's connection to
the same broker, at the offset the worker's Produce response named); MQTT replies
PUBACKed at both ends (mids); Kafka replies' Produce response before the commit.
"""
import bisect
import collections
import glob
import gzip
import json
import os
import re
import sys

BROKER_HOST = {"nats": "nats", "amqp": "rabbit", "kafka": "kafka", "mqtt": "mqtt"}
BROKER_PORT = {"nats": 4222, "amqp": 5672, "kafka": 9092, "mqtt": 1883}
DETAIL = ("subject", "reply_to", "exchange", "routing_key", "topic", "partition", "offset",
          "delivery_tag", "multiple", "mid", "sid", "redelivered", "command", "key",
          "method", "path", "status", "error", "done", "reason", "correlation_id",
          "response_topic", "reply_topic", "qos")


def read(directory):
    lines = []
    for path in sorted(glob.glob(os.path.join(directory, "*.log.jsonl"))
                       + glob.glob(os.path.join(directory, "*.log.jsonl.gz"))):
        with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as file:
            for number, text in enumerate(file, 1):
                text = text.strip()
                if not text:
                    continue
                try:
                    lines.append(json.loads(text))
                except ValueError:
                    # A program stopped in the middle of a line.
                    print(f"truth.py: {path}:{number}: not JSON, skipped", file=sys.stderr)
    lines.sort(key=lambda line: line["time"])
    return lines


def hosts_of(directory):
    hosts = {}
    path = os.path.join(directory, "hosts.tsv")
    if os.path.exists(path):
        with open(path) as file:
            for text in file:
                host, address = text.split()
                hosts[address] = host
    return hosts


def view(line, *extra):
    """The part of a log line a truth entry keeps."""
    out = {"host": line["host"], "time": line["time"]}
    for key in ("local", "peer", "wire", "seq") + DETAIL + extra:
        if key in line:
            out[key] = line[key]
    return out


def broker_of(line):
    if line.get("proto") in BROKER_HOST:
        return line["proto"]
    return None


def pending(lines):
    """Orders published but not yet finished by their worker, and quotes unanswered."""
    published, finished = set(), set()
    asked, answered = set(), set()
    for line in lines:
        kind, proto, host = line["kind"], line.get("proto"), line["host"]
        if host == "web" and kind == "publish" and line["dir"] == "sent":
            published.add((proto, line.get("rid")))
        elif host == "web" and kind == "request" and line["dir"] == "sent":
            asked.add((proto, line.get("rid")))
        elif host == "web" and kind == "reply" and line["dir"] == "received":
            answered.add((proto, line.get("rid")))
        elif (kind == "ack" and host != "web") or (
                kind == "redis" and host == "worker-nats" and line.get("command") == "INCR"):
            finished.add(("nats" if host == "worker-nats" else proto, line.get("rid")))
    return len(published - finished) + len(asked - answered)


def truth(directory):
    lines = read(directory)
    hosts = hosts_of(directory)
    entries = collections.OrderedDict()

    def entry(rid):
        if rid not in entries:
            entries[rid] = {"rid": rid, "deliveries": [], "calls": [], "problems": []}
        return entries[rid]

    orphans = collections.Counter()  # lines with no request id that should have one
    amqp_confirms = collections.defaultdict(list)  # web's (local, peer) -> confirm lines
    amqp_publishes = collections.defaultdict(list)
    kafka_publishes = collections.defaultdict(list)  # (host, local, peer, topic) -> lines
    sequences = collections.defaultdict(list)  # (host, local, peer, dir, wire) -> seqs

    for line in lines:
        kind, host, rid = line["kind"], line["host"], line.get("rid")
        if "seq" in line and "local" in line:
            sequences[(host, line["local"], line["peer"], line.get("dir"), line["wire"])
                      ].append(line["seq"])
        if kind in ("ready", "stop"):
            continue
        if kind == "confirm" and line.get("proto") == "amqp":
            amqp_confirms[(line["local"], line["peer"])].append(line)
            continue
        if rid is None:
            # The workers' start: a Redis PING, a NATS flush.
            if not (kind == "redis" and line.get("command") == "PING") and \
                    kind not in ("flush", "confirm"):
                orphans[(host, kind)] += 1
            continue
        e = entry(rid)
        if kind == "request" and host == "client":
            e["request"] = view(line)
            e["method"], e["path"] = line["method"], line["path"]
            e["kind"], _, e["broker"] = line["path"].strip("/").partition("/")
        elif kind == "served":
            e.setdefault("served_all", []).append(view(line))
        elif kind == "response":
            e["response"] = view(line)
        elif kind in ("publish", "request") and host == "web":
            e.setdefault("publishes", []).append(view(line))
            e["publish"] = e["publishes"][0]
            e["publish"]["broker_host"] = hosts.get(line["peer"].split(":")[0])
            if line["proto"] == "amqp":
                amqp_publishes[(line["local"], line["peer"])].append(line)
            if line["proto"] == "kafka":
                kafka_publishes[(host, line["local"], line["peer"], line["topic"])
                                ].append(line)
        elif kind == "flush":
            e["flush"] = view(line)
        elif kind == "confirm" and host != "web":
            # The broker's PUBACK of worker-mqtt's reply.
            e.setdefault("reply", {})["confirm"] = view(line)
        elif kind == "confirm":
            e["confirm"] = view(line)
        elif kind == "delivery":
            d = view(line)
            d["broker_host"] = hosts.get(line["peer"].split(":")[0]) if line.get("peer") else None
            if line.get("body_rid") != rid:
                e["problems"].append(f"delivery at {host}: header id {rid}, body id "
                                     f"{line.get('body_rid')}")
            e["deliveries"].append(d)
        elif kind == "redis":
            e["calls"].append(view(line))
        elif kind == "ack" and host == "web":
            # web's PUBACK of an MQTT reply (paho acks it on receipt).
            e.setdefault("reply", {})["ack"] = view(line)
        elif kind == "ack":
            e.setdefault("acks", []).append(view(line))
        elif kind == "reply":
            e.setdefault("reply", {})[line["dir"]] = view(line)
            if line["proto"] == "kafka" and line["dir"] == "sent":
                kafka_publishes[(host, line["local"], line["peer"], line["topic"])
                                ].append(line)
            e.setdefault("reply_count", collections.Counter())[line["dir"]] += 1
        else:
            e["problems"].append(f"unexpected line {kind} at {host}")

    # AMQP publisher confirms: which confirm frame covered which publish tag.
    for connection, frames in amqp_confirms.items():
        tags = {line["delivery_tag"]: line["rid"] for line in amqp_publishes[connection]}
        unconfirmed = sorted(tags)
        for frame in sorted(frames, key=lambda line: line["seq"]):
            tag = frame["delivery_tag"]
            if frame.get("multiple"):
                cut = bisect.bisect_right(unconfirmed, tag)
                covered, unconfirmed = unconfirmed[:cut], unconfirmed[cut:]
            else:
                at = bisect.bisect_left(unconfirmed, tag)
                covered = [tag] if at < len(unconfirmed) and unconfirmed[at] == tag else []
                unconfirmed = unconfirmed[:at] + unconfirmed[at + len(covered):]
            for covered_tag in covered:
                entries[tags[covered_tag]]["confirm"] = view(frame)
    # Kafka: the records' order as web (and worker-kafka, its replies) handed them over,
    # against the broker's offsets, per connection and topic.
    kafka_order_problems = 0
    for (host, *_), records in kafka_publishes.items():
        offsets = [(entries[line["rid"]].get("confirm", {}) if line["kind"] != "reply"
                    else entries[line["rid"]].get("reply", {}).get("confirm", {})
                    ).get("offset")
                   for line in sorted(records, key=lambda line: line["seq"])]
        known = [offset for offset in offsets if offset is not None]
        kafka_order_problems += sum(1 for a, b in zip(known, known[1:]) if b <= a)

    # Gaps and repeats in the orders counted on each connection.
    sequence_problems = []
    for (host, local, peer, direction, wire), seqs in sequences.items():
        seqs.sort()
        first = 2 if wire in ("PING", "PONG") else 1  # NATS: the handshake's PING
        if seqs != list(range(first, first + len(seqs))):
            sequence_problems.append(f"{host} {local}>{peer} {direction} {wire}: "
                                     f"orders {seqs[:3]}..{seqs[-3:]} of {len(seqs)} "
                                     f"not {first}..{first + len(seqs) - 1}")

    for e in entries.values():
        check(e)
        e.pop("served_all", None)
        e.pop("publishes", None)
        e.pop("acks", None)
        e.pop("reply_count", None)
    return (lines, entries, orphans, kafka_order_problems, sequence_problems)


def check(e):
    problems = e["problems"]
    request = e.get("request")
    if request is None:
        problems.append("no client request")
        return
    if request.get("status") != 200:
        problems.append(f"status {request.get('status')} {request.get('error', '')}".strip())
    served = e.get("served_all", [])
    if len(served) != 1:
        problems.append(f"served {len(served)} times")
    if served:
        e["served"] = served[0]
        s = served[0]
        if (s["local"], s["peer"]) != (request["peer"], request["local"]):
            problems.append("web served it on another connection than the client sent it")
        elif s["seq"] != request["seq"]:
            problems.append(f"request {request['seq']} on the client's connection, "
                            f"{s['seq']} at web")
    if request.get("status") == 200 and "response" not in e:
        problems.append("no response logged at web")
    broker = e["broker"]
    publishes = e.get("publishes", [])
    if len(publishes) != 1:
        problems.append(f"{len(publishes)} publishes")
        if not publishes:
            e["signature"] = "client->web"
            return
    publish = e["publish"]
    if publish.get("broker_host") != BROKER_HOST[broker] or \
            not publish["peer"].endswith(f":{BROKER_PORT[broker]}"):
        problems.append(f"published to {publish['peer']}, not {BROKER_HOST[broker]}")
    if "confirm" not in e and (e["kind"] == "order" or broker != "nats"):
        problems.append("publish not confirmed")
    confirm = e.get("confirm")
    if broker == "nats" and e["kind"] == "order":
        if "flush" not in e or confirm is None or e["flush"]["seq"] != confirm.get("seq"):
            problems.append("no PING/PONG after the publish")
    if broker == "mqtt" and confirm and confirm.get("mid") != publish.get("mid"):
        problems.append(f"PUBACK mid {confirm.get('mid')} for PUBLISH mid {publish.get('mid')}")
    deliveries = e["deliveries"]
    if not deliveries:
        problems.append("not delivered")
    elif len(deliveries) > 1:
        problems.append(f"delivered {len(deliveries)} times")
    worker = f"worker-{broker}"
    for d in deliveries:
        if d["host"] != worker:
            problems.append(f"delivered to {d['host']}")
        if d.get("broker_host") != BROKER_HOST[broker]:
            problems.append(f"delivered from {d.get('peer')}, not {BROKER_HOST[broker]}")
        if d["time"] < publish["time"]:
            problems.append("delivered before it was published")
    if broker == "kafka" and deliveries and confirm and (
            deliveries[0].get("offset"), deliveries[0].get("topic")) != (
            confirm.get("offset"), confirm.get("topic")):
        problems.append(f"produced at {confirm.get('topic')} offset {confirm.get('offset')}, "
                        f"delivered from {deliveries[0].get('topic')} "
                        f"{deliveries[0].get('offset')}")
    expected = ["GET"] if e["kind"] == "quote" else ["SET", "INCR"]
    commands = [call["command"] for call in e["calls"]]
    if commands != expected * max(1, len(deliveries)):
        problems.append(f"cache calls {commands}, not {expected}")
    if deliveries and e["calls"]:
        if e["calls"][0]["time"] < deliveries[0]["time"]:
            problems.append("a cache call before the delivery")
    acks = e.get("acks", [])
    if broker != "nats":
        if len(acks) != len(deliveries):
            problems.append(f"{len(acks)} acks for {len(deliveries)} deliveries")
        for ack, d in zip(acks, deliveries):
            if e["calls"] and ack["time"] < e["calls"][-1].get("done", 0):
                problems.append("acked before its cache calls returned")
            if broker == "amqp" and ack.get("delivery_tag") != d.get("delivery_tag"):
                problems.append(f"ack of tag {ack.get('delivery_tag')} for delivery "
                                f"{d.get('delivery_tag')}")
            if broker == "mqtt" and ack.get("mid") != d.get("mid"):
                problems.append(f"PUBACK mid {ack.get('mid')} for PUBLISH mid {d.get('mid')}")
            if broker == "kafka" and ack.get("offset") != d.get("offset", -2) + 1:
                problems.append(f"committed {ack.get('offset')} for offset {d.get('offset')}")
    if acks:
        e["ack"] = acks[0] if len(acks) == 1 else acks
    if e["kind"] == "quote":
        check_reply(e, publish, deliveries, acks)
    e["signature"] = signature(e)


def check_reply(e, publish, deliveries, acks):
    """A quote's reply: sent where the request said, with its correlation id, received
    by web on the connection it asked on; in order with the worker's call and ack."""
    problems, rid, broker = e["problems"], e["rid"], e["broker"]
    reply = e.get("reply", {})
    for direction, count in e.get("reply_count", {}).items():
        if count > 1:
            problems.append(f"reply {direction} {count} times")
    if "sent" not in reply or "received" not in reply:
        problems.append(f"quote reply {'not sent' if 'sent' not in reply else 'not received'}")
        return
    sent, received = reply["sent"], reply["received"]
    if sent["host"] != f"worker-{broker}":
        problems.append(f"reply sent by {sent['host']}")
    if broker == "kafka":
        # web reads its replies with a consumer of its own: another connection from web
        # to the same broker.
        if (received["local"].split(":")[0], received["peer"]) != (
                publish["local"].split(":")[0], publish["peer"]) or \
                received["local"] == publish["local"]:
            problems.append("reply not received on web's consumer's connection to the "
                            "broker the request went to")
    elif (received["local"], received["peer"]) != (publish["local"], publish["peer"]):
        problems.append("reply received on another connection than the request went on")
    if not publish["time"] <= sent["time"] <= received["time"]:
        problems.append("reply out of order (request, reply sent, reply received)")
    if e["calls"] and sent["time"] < e["calls"][-1].get("done", 0):
        problems.append("reply sent before its cache call returned")
    if broker == "nats":
        if sent["subject"] != publish.get("reply_to") or \
                received["subject"] != publish.get("reply_to"):
            problems.append("reply not to the request's inbox")
        return
    for where, line in (("request", publish), ("reply sent", sent),
                        ("reply received", received)) + tuple(
            ("delivery", d) for d in deliveries):
        if line.get("correlation_id") != rid:
            problems.append(f"{where}: correlation id {line.get('correlation_id')}")
    for ack in acks:
        if ack["time"] < sent["time"]:
            problems.append("request acked before the reply was sent")
    delivered = deliveries[0] if deliveries else {}
    if broker == "amqp":
        if publish.get("reply_to") != "amq.rabbitmq.reply-to":
            problems.append(f"reply_to {publish.get('reply_to')}")
        if not str(delivered.get("reply_to", "")).startswith("amq.rabbitmq.reply-to."):
            problems.append(f"delivered with reply_to {delivered.get('reply_to')}")
        if (sent.get("exchange"), sent.get("routing_key")) != ("", delivered.get("reply_to")):
            problems.append("reply not published to the delivered reply_to")
        if received.get("routing_key") != delivered.get("reply_to"):
            problems.append(f"reply delivered with key {received.get('routing_key')}")
    if broker == "kafka":
        topic = publish.get("reply_topic")
        if not topic or delivered.get("reply_topic") != topic:
            problems.append(f"reply topic {topic}, delivered {delivered.get('reply_topic')}")
        if sent.get("topic") != topic or received.get("topic") != topic:
            problems.append("reply not on the reply topic")
        confirm = reply.get("confirm", {})
        if (confirm.get("topic"), confirm.get("partition"), confirm.get("offset")) != (
                received.get("topic"), received.get("partition"), received.get("offset")):
            problems.append(f"reply produced at {confirm.get('partition')}/"
                            f"{confirm.get('offset')}, received from "
                            f"{received.get('partition')}/{received.get('offset')}")
        if confirm and not sent["time"] <= confirm["time"]:
            problems.append("reply's Produce response before it was sent")
        for ack in acks:
            if confirm and ack["time"] < confirm["time"]:
                problems.append("request committed before the reply's Produce response")
    if broker == "mqtt":
        topic = publish.get("response_topic")
        if not topic or delivered.get("response_topic") != topic:
            problems.append(f"response topic {topic}, delivered "
                            f"{delivered.get('response_topic')}")
        if sent.get("topic") != topic or received.get("topic") != topic:
            problems.append("reply not on the response topic")
        if reply.get("confirm", {}).get("mid") != sent.get("mid"):
            problems.append("the worker's reply not PUBACKed")
        if reply.get("ack", {}).get("mid") != received.get("mid"):
            problems.append("web did not PUBACK the reply")


def signature(e):
    """The request's path in blackbox's notation, `⇒` for a message handed to a broker
    and delivered by it to the next host."""
    broker_host = BROKER_HOST[e["broker"]]
    inner = broker_host
    for d in e["deliveries"]:
        calls = ",".join("cache" for call in e["calls"]
                         if call["host"] == d["host"])
        inner += f"⇒{d['host']}({calls})" if calls else f"⇒{d['host']}"
    if e.get("reply", {}).get("received"):
        inner += f"⇒{broker_host}⇒web"
    return f"client->web({inner})"


def quantile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] / 1e6


def summary(lines, entries, orphans, kafka_order_problems, sequence_problems):
    out = []
    requests = [e for e in entries.values() if "request" in e]
    paths = collections.Counter(e["path"] for e in requests)
    ok = collections.Counter(e["path"] for e in requests if e["request"].get("status") == 200)
    out.append(f"requests: {len(requests)} ({sum(ok.values())} answered 200)")
    for path in sorted(paths):
        out.append(f"  {path:<14} {paths[path]:6}  ({ok[path]} ok)")
    out.append("per broker (messages carrying a request id):")
    out.append(f"  {'broker':<7}{'published':>10}{'confirmed':>10}{'delivered':>10}"
               f"{'missing':>9}{'duplicated':>11}{'acked':>7}{'replies':>9}")
    for broker in ("nats", "amqp", "kafka", "mqtt"):
        for kind in ("order", "quote"):
            es = [e for e in requests if e["broker"] == broker and e["kind"] == kind
                  and "publish" in e]
            if not es and kind == "quote":
                continue
            name = broker if kind == "order" else f"{broker}-rr"
            out.append(
                f"  {name:<7}{len(es):>10}{sum('confirm' in e for e in es):>10}"
                f"{sum(len(e['deliveries']) for e in es):>10}"
                f"{sum(not e['deliveries'] for e in es):>9}"
                f"{sum(len(e['deliveries']) > 1 for e in es):>11}"
                f"{sum(1 for e in es if 'ack' in e):>7}"
                f"{sum(1 for e in es if e.get('reply', {}).get('received')):>9}")
    out.append("times, median and 99th percentile in ms (request: the client's; "
               "to delivery: publish to worker's delivery; to ack: delivery to ack; "
               "quotes: publish to the reply at web):")
    for broker in ("nats", "amqp", "kafka", "mqtt"):
        for kind in ("order", "quote"):
            es = [e for e in requests if e["broker"] == broker and e["kind"] == kind
                  and "publish" in e]
            if not es:
                continue
            name = broker if kind == "order" else f"{broker}-rr"
            spans = {
                "request": [e["request"]["done"] - e["request"]["time"] for e in es
                            if "done" in e["request"]],
                "to delivery": [e["deliveries"][0]["time"] - e["publish"]["time"]
                                for e in es if e["deliveries"]],
                "to ack": [e["ack"]["time"] - e["deliveries"][0]["time"] for e in es
                           if isinstance(e.get("ack"), dict) and e["deliveries"]],
                "to reply": [e["reply"]["received"]["time"] - e["publish"]["time"]
                             for e in es if e.get("reply", {}).get("received")],
            }
            out.append(f"  {name:<9}" + "  ".join(
                f"{label} {quantile(values, 0.5):.2f}/{quantile(values, 0.99):.2f}"
                for label, values in spans.items() if values))
    calls = sum(len(e["calls"]) for e in requests)
    out.append(f"cache calls for requests: {calls}")
    signatures = collections.Counter(e.get("signature") for e in requests)
    out.append("paths (signatures):")
    for sig, count in signatures.most_common():
        out.append(f"  {count:6}  {sig}")
    problem_entries = [e for e in entries.values() if e["problems"]]
    out.append(f"requests with problems: {len(problem_entries)}")
    kinds = collections.Counter(re.sub(r"[0-9a-f]{32}|\d+", "N", p)
                                for e in problem_entries for p in e["problems"])
    for problem, count in kinds.most_common(10):
        out.append(f"  {count:6}  {problem}")
    for e in problem_entries[:5]:
        out.append(f"  e.g. {e['rid']} {e.get('path')}: {'; '.join(e['problems'])}")
    if orphans:
        out.append("lines without a request id: " + ", ".join(
            f"{host} {kind} {count}" for (host, kind), count in sorted(orphans.items())))
    out.append(f"Kafka records out of offset order: {kafka_order_problems}")
    out.append(f"connections whose counted orders have gaps or repeats: {len(sequence_problems)}")
    for problem in sequence_problems[:5]:
        out.append(f"  {problem}")
    return "\n".join(out)


def main():
    if sys.argv[1] == "--pending":
        print(pending(read(sys.argv[2])))
        return
    directory = sys.argv[1]
    lines, entries, orphans, kafka_order, sequences = truth(directory)
    with open(os.path.join(directory, "truth.jsonl"), "w") as file:
        for e in entries.values():
            file.write(json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(summary(lines, entries, orphans, kafka_order, sequences))


if __name__ == "__main__":
    main()
