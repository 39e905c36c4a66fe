"""The call log every program of the brokers system writes: JSON lines, one per message
it sent or received and per call it made, for truth.py.

Each line has
  host   the program's own host (network namespace)
  time   wall time, time.time_ns(), when the program handed the message to its library
         (sent) or got it from its library (received)
  kind   request/served/response (HTTP), publish/request/reply/delivery/flush/confirm/
         ack (brokers), redis (cache calls), ready/stop (markers, no message)
  dir    sent or received, from this program's side
  proto  http, nats, amqp, kafka, mqtt, redis
  rid    the request id (X-Request-Id, 32 hex digits), where the message carries one
  local, peer
         the connection as this program's own socket sees it, `ip:port`, read from the
         library's transport object (getsockname/getpeername)
  wire   the protocol message it is on the wire (HPUB, HMSG, PING, PONG, basic.publish,
         basic.deliver, basic.ack, confirm, record, OffsetCommit, PUBLISH, PUBACK,
         command, request, response)
  seq    its order on that connection: the n-th message of that `wire` type that this
         program sent (or received) on that connection, from 1
and what the protocol names it by: subject, reply_to, exchange, routing_key, topic,
partition, offset, delivery_tag, mid, command, key, path, status; for request/reply the
correlation id (correlation_id: AMQP correlation-id, MQTT 5 Correlation Data, Kafka
header kafka_correlationId) and where to reply (reply_to, response_topic: MQTT 5
Response Topic, reply_topic: Kafka header kafka_replyTopic).
"""
import json
import threading
import time


def endpoint(address):
    return f"{address[0]}:{address[1]}"


def ends_of_transport(transport):
    """(local, peer) of an asyncio transport, as `ip:port` strings."""
    return (endpoint(transport.get_extra_info("sockname")),
            endpoint(transport.get_extra_info("peername")))


def ends_of_socket(sock):
    return endpoint(sock.getsockname()), endpoint(sock.getpeername())


class Log:
    def __init__(self, path, host):
        self.file = open(path, "a", buffering=1)
        self.host = host
        self.lock = threading.Lock()
        self.counters = {}

    def next_seq(self, local, peer, direction, wire):
        """The order of the next `wire` message in `direction` on the connection."""
        key = (local, peer, direction, wire)
        with self.lock:
            self.counters[key] = self.counters.get(key, 0) + 1
            return self.counters[key]

    def write(self, kind, direction=None, time_ns=None, seq=None, **fields):
        """Writes one line. Without `seq`, if local, peer and wire are given, the line's
        order on its connection is counted here (so call it in wire order); seq=False
        writes none."""
        line = {"host": self.host, "time": time_ns or time.time_ns(), "kind": kind}
        if direction:
            line["dir"] = direction
        line.update({key: value for key, value in fields.items() if value is not None})
        if seq is None and "wire" in fields and fields.get("local"):
            seq = self.next_seq(fields["local"], fields["peer"], direction, fields["wire"])
        if seq is not None and seq is not False:
            line["seq"] = seq
        text = json.dumps(line, separators=(",", ":")) + "\n"
        with self.lock:
            self.file.write(text)
        return line
