"""The brokers system's connections, each a real client library's, wrapped only to log
what goes over them (calllog.py): which message, when, and on which connection as the
library's own socket sees it. web.py and worker.py share them.

Where a library orders messages itself, the log follows it at the point where the
message takes its place on the wire:
- nats-py: a publish is logged where the client queues its PUB/HPUB command
  (`_send_publish`), a received message where the client builds it from the MSG/HMSG
  just parsed (`_build_message`), in the order the reader parsed them. A flush writes its
  PING straight to the socket, ahead of publishes still waiting for the flusher task.
- aiormq (the AMQP 0-9-1 client under aio-pika): publishes on a channel are numbered
  by the channel (publisher-confirm delivery tags, 1, 2, ...); a consumer's deliveries
  are numbered by the broker (delivery tags); confirms and deliveries are logged as the
  channel's reader task handles their frames.
- aiokafka: records are logged as they are handed to the producer, in that order; the
  broker's offset, when the produce response confirms them, is logged apart (truth.py
  checks that both orders agree). Each producer here sends to one topic (web has one
  for `orders`, one for `quote`), so no Produce request mixes topics, whose records
  the request would group by topic. Fetched records are logged as the consumer's
  iterator hands them over: a Fetch response's partitions in its order, and a
  partition's records are handed over before a later response's (aiokafka fetches a
  partition again only once its records are all handed over).
- paho-mqtt: PUBLISH packets in the order of publish(); PUBACKs and received PUBLISH
  packets in the order the network thread reads them.
- redis-py (asyncio): one connection, one command at a time under a lock, so the log's
  order is the connection's.
"""
import asyncio
import json
import os
import threading
import time

from calllog import ends_of_socket, ends_of_transport

RID = "X-Request-Id"


class Nats:
    """One nats-py connection; every PUB/HPUB sent and MSG/HMSG received is logged."""

    def __init__(self, log, address, name):
        self.log, self.address, self.name = log, address, name
        self.on_message = None  # called with (msg, line) for each message received

    async def start(self):
        import nats
        # No PINGs of its own in a run (ping_interval), only those of flush().
        self.nc = await nats.connect(f"nats://{self.address}", name=self.name,
                                     allow_reconnect=False, max_reconnect_attempts=0,
                                     ping_interval=3600)
        self.local, self.peer = ends_of_transport(self.nc._transport._io_writer.transport)
        # The connect handshake (CONNECT, PING; PONG) is the connection's first PING.
        self.pings = 1
        send_publish, build_message = self.nc._send_publish, self.nc._build_message

        async def logged_send_publish(subject, reply, payload, size, headers):
            kind = ("reply" if subject.startswith("_INBOX.") else
                    "request" if reply else "publish")
            self.log.write(kind, "sent", proto="nats", rid=(headers or {}).get(RID),
                           local=self.local, peer=self.peer,
                           wire="HPUB" if headers else "PUB", subject=subject,
                           reply_to=reply or None, body_rid=body_rid(payload))
            await send_publish(subject, reply, payload, size, headers)

        def logged_build_message(sid, subject, reply, data, headers):
            msg = build_message(sid, subject, reply, data, headers)
            subject = subject.decode()
            msg.logged = self.log.write(
                "reply" if subject.startswith("_INBOX.") else "delivery", "received",
                proto="nats", rid=(headers or {}).get(RID), local=self.local, peer=self.peer,
                wire="HMSG" if headers else "MSG", subject=subject,
                reply_to=reply.decode() or None, sid=sid, body_rid=body_rid(data))
            return msg

        self.nc._send_publish = logged_send_publish
        self.nc._build_message = logged_build_message

    async def flush(self, rid=None):
        """nc.flush(): a PING, and the PONG that answers it (the server answers PINGs in
        order, so the n-th PONG answers the n-th PING)."""
        self.pings += 1
        seq = self.pings
        self.log.write("flush", "sent", proto="nats", rid=rid, local=self.local,
                       peer=self.peer, wire="PING", seq=seq)
        await self.nc.flush(timeout=10)
        self.log.write("confirm", "received", proto="nats", rid=rid, local=self.local,
                       peer=self.peer, wire="PONG", seq=seq)

    async def close(self):
        await self.nc.close()


def body_rid(data):
    """The request id a message's JSON body carries, if any."""
    try:
        return json.loads(data).get("rid")
    except (ValueError, AttributeError, TypeError):
        return None


class Amqp:
    """One aiormq connection with one channel."""

    def __init__(self, log, address, confirms):
        self.log, self.address, self.confirms = log, address, confirms
        self.tags = {}  # publish delivery tag -> request id
        self.on_deliver = None

    async def start(self):
        import aiormq
        import aiormq.connection

        recorded = {}

        class RecordingFactory(aiormq.connection.TCPTransportFactory):
            async def create(self, url, **kwargs):
                reader, writer = await super().create(url, **kwargs)
                recorded["ends"] = ends_of_transport(writer.transport)
                return reader, writer

        self.connection = aiormq.Connection(f"amqp://guest:guest@{self.address}/",
                                            transport_factory=RecordingFactory())
        await self.connection.connect()
        self.local, self.peer = recorded["ends"]
        self.channel = await self.connection.channel(publisher_confirms=self.confirms)
        self.published = 0
        if self.confirms:
            on_confirm = self.channel._on_confirm_frame

            async def logged_confirm(frame):
                self.log.write("confirm", "received", proto="amqp",
                               rid=self.tags.get(frame.delivery_tag), local=self.local,
                               peer=self.peer, wire="basic.ack",
                               delivery_tag=frame.delivery_tag, multiple=frame.multiple)
                await on_confirm(frame)

            self.channel._on_confirm_frame = logged_confirm

    async def publish(self, rid, body, exchange, routing_key, kind="publish",
                      reply_to=None, correlation_id=None):
        """basic.publish with the request id in the headers (and as message-id); for
        RPC also reply_to and correlation_id. On a confirming channel, returns the
        publisher confirm's frame."""
        from pamqp import commands as spec
        # The channel numbers its publishes in the order basic_publish takes its lock,
        # which is the order of these calls: nothing awaits in between. Without
        # confirms the count is still the publishes' order on the channel.
        self.published += 1
        tag = self.published
        if self.confirms:
            self.tags[tag] = rid
        self.log.write(kind, "sent", proto="amqp", rid=rid, local=self.local,
                       peer=self.peer, wire="basic.publish", seq=tag, exchange=exchange,
                       routing_key=routing_key, delivery_tag=tag if self.confirms else None,
                       reply_to=reply_to, correlation_id=correlation_id,
                       body_rid=body_rid(body))
        properties = spec.Basic.Properties(
            content_type="application/json", delivery_mode=1, message_id=rid,
            headers={RID: rid}, reply_to=reply_to, correlation_id=correlation_id)
        return await self.channel.basic_publish(body, exchange=exchange,
                                                routing_key=routing_key,
                                                properties=properties)

    async def close(self):
        await self.connection.close()


class Kafka:
    """aiokafka: the connection a request to `node` goes over, as the client keeps it."""

    @staticmethod
    def ends(client, node, group):
        connection = client._conns.get((node, group))
        if connection is None or connection._writer is None:
            return None, None
        return ends_of_transport(connection._writer.transport)

    @staticmethod
    def leader(client, topic):
        """The node that leads the topic's partition (every topic here has one)."""
        from aiokafka.structs import TopicPartition
        partitions = client.cluster.partitions_for_topic(topic)
        assert partitions, f"topic {topic} has no partitions"
        return client.cluster.leader_for_partition(TopicPartition(topic, min(partitions)))


# Spring Kafka's ReplyingKafkaTemplate convention (KafkaHeaders.REPLY_TOPIC and
# KafkaHeaders.CORRELATION_ID): the request record names the topic to reply to and
# carries a correlation id, which the reply record carries back.
KAFKA_REPLY_TOPIC = "kafka_replyTopic"
KAFKA_CORRELATION_ID = "kafka_correlationId"
# How long the broker may hold a Fetch (fetch.max.wait.ms): tansu holds every fetch
# for about that long (README.md), aiokafka's default is 500 ms.
KAFKA_FETCH_WAIT_MS = int(os.environ.get("KAFKA_FETCH_WAIT_MS", "20"))


class KafkaProducer:
    """One aiokafka producer (acks=1, not idempotent), its connection to the topic's
    leader opened before the first record. Records go out in the order of publish(), in
    Produce requests of their own or batched, one topic per producer here, so their
    order on the connection is the order of these calls (and of their offsets)."""

    def __init__(self, log, address, client_id, topic):
        self.log, self.address, self.client_id, self.topic = log, address, client_id, topic
        self.sent = 0

    async def start(self):
        from aiokafka import AIOKafkaProducer
        from aiokafka.client import ConnectionGroup
        self.group = ConnectionGroup.DEFAULT
        self.producer = AIOKafkaProducer(bootstrap_servers=self.address,
                                         client_id=self.client_id, acks=1,
                                         enable_idempotence=False)
        await self.producer.start()
        await self.producer.partitions_for(self.topic)
        # Open the connection to the partition's leader now, not in the first request.
        self.node = Kafka.leader(self.producer.client, self.topic)
        await self.producer.client.ready(self.node)

    async def publish(self, rid, body, kind="publish", topic=None, reply_topic=None,
                      correlation=None):
        """A record (key and header X-Request-Id = the id; for request/reply the
        headers kafka_replyTopic and kafka_correlationId too); returns the produce
        response's metadata (partition, offset) once it came."""
        topic = topic or self.topic
        local, peer = Kafka.ends(self.producer.client, self.node, self.group)
        self.sent += 1
        headers = [(RID, rid.encode())]
        if reply_topic is not None:
            headers.append((KAFKA_REPLY_TOPIC, reply_topic.encode()))
        if correlation is not None:
            headers.append((KAFKA_CORRELATION_ID, correlation))
        self.log.write(kind, "sent", proto="kafka", rid=rid, local=local, peer=peer,
                       wire="record", seq=self.sent, topic=topic, reply_topic=reply_topic,
                       correlation_id=correlation.decode() if correlation else None,
                       body_rid=body_rid(body))
        future = await self.producer.send(topic, value=body, key=rid.encode(),
                                          headers=headers)
        metadata = await future
        self.log.write("confirm", "received", proto="kafka", rid=rid, local=local,
                       peer=peer, wire="ProduceResponse", seq=False, topic=metadata.topic,
                       partition=metadata.partition, offset=metadata.offset)
        return metadata

    async def close(self):
        await self.producer.stop()


class Mqtt:
    """One paho-mqtt (v2 API, MQTT 5) client with its network thread."""

    def __init__(self, log, address, client_id, loop, manual_ack=False, reply_topic=None):
        import paho.mqtt.client as mqtt
        self.log, self.loop = log, loop
        self.manual_ack = manual_ack
        # Messages on this topic are replies to this client's requests (MQTT 5
        # request/response); any other is a delivery.
        self.reply_topic = reply_topic
        self.host, port = address.split(":")
        self.port = int(port)
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id,
                                  protocol=mqtt.MQTTv5, manual_ack=manual_ack)
        self.client.max_inflight_messages_set(0)  # unlimited, as far as the broker allows
        self.client.max_queued_messages_set(0)
        self.lock = threading.Lock()
        self.waiting, self.early = {}, {}
        self.connected = loop.create_future()
        self.subscribed = loop.create_future()
        self.on_message = None
        self.client.on_connect = self._on_connect
        self.client.on_publish = self._on_publish
        self.client.on_subscribe = self._on_subscribe
        self.client.on_message = self._on_message

    async def start(self):
        self.client.connect(self.host, self.port, keepalive=60, clean_start=True)
        if os.environ.get("MQTT_NODELAY") == "1":
            # capture.sh MQTT_NODELAY=1: no Nagle on this side (paho leaves it on).
            import socket
            self.client.socket().setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.local, self.peer = ends_of_socket(self.client.socket())
        self.client.loop_start()
        await self.connected

    def _on_connect(self, client, userdata, flags, reason, properties):
        self.loop.call_soon_threadsafe(self.connected.set_result, reason)

    def _on_subscribe(self, client, userdata, mid, reasons, properties):
        self.loop.call_soon_threadsafe(self.subscribed.set_result, reasons)

    async def subscribe(self, *topics):
        """One SUBSCRIBE for all the topics, at QoS 1."""
        from paho.mqtt.subscribeoptions import SubscribeOptions
        if len(topics) == 1:
            self.client.subscribe(topics[0], options=SubscribeOptions(qos=1))
        else:
            self.client.subscribe([(topic, SubscribeOptions(qos=1)) for topic in topics])
        await self.subscribed

    async def publish(self, rid, topic, body, kind="publish", response_topic=None,
                      correlation=None):
        """PUBLISH at QoS 1 with the request id as an MQTT 5 user property, and for
        request/response the Response Topic and Correlation Data properties; returns
        when its PUBACK came."""
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties
        properties = Properties(PacketTypes.PUBLISH)
        if response_topic is not None:
            properties.ResponseTopic = response_topic
        if correlation is not None:
            properties.CorrelationData = correlation
        properties.UserProperty = (RID, rid)
        start = time.time_ns()
        seq = self.log.next_seq(self.local, self.peer, "sent", "PUBLISH")
        info = self.client.publish(topic, body, qos=1, properties=properties)
        self.log.write(kind, "sent", time_ns=start, proto="mqtt", rid=rid,
                       local=self.local, peer=self.peer, wire="PUBLISH", seq=seq,
                       topic=topic, mid=info.mid, qos=1, response_topic=response_topic,
                       correlation_id=correlation.decode() if correlation else None,
                       body_rid=body_rid(body))
        future = self.loop.create_future()
        with self.lock:
            if info.mid in self.early:
                future.set_result(self.early.pop(info.mid))
            else:
                self.waiting[info.mid] = future
        # The PUBACK may come before publish() returns the mid: the network thread
        # notes when it came and its order, and the line is written here.
        when, seq, reason = await future
        self.log.write("confirm", "received", time_ns=when, proto="mqtt", rid=rid,
                       local=self.local, peer=self.peer, wire="PUBACK", seq=seq,
                       mid=info.mid, reason=str(reason))
        return reason

    def _on_publish(self, client, userdata, mid, reason, properties):
        acked = (time.time_ns(),
                 self.log.next_seq(self.local, self.peer, "received", "PUBACK"), reason)
        with self.lock:
            future = self.waiting.pop(mid, None)
            if future is None:
                self.early[mid] = acked
                return
        self.loop.call_soon_threadsafe(future.set_result, acked)

    def _on_message(self, client, userdata, message):
        properties = message.properties
        rid = dict(getattr(properties, "UserProperty", []) or []).get(RID)
        correlation = getattr(properties, "CorrelationData", None)
        line = self.log.write("reply" if message.topic == self.reply_topic else "delivery",
                              "received", proto="mqtt", rid=rid,
                              local=self.local, peer=self.peer, wire="PUBLISH",
                              topic=message.topic, mid=message.mid, qos=message.qos,
                              response_topic=getattr(properties, "ResponseTopic", None),
                              correlation_id=correlation.decode() if correlation else None,
                              body_rid=body_rid(message.payload))
        if not self.manual_ack and message.qos == 1:
            # paho sends the PUBACK itself when this callback returns.
            self.log.write("ack", "sent", proto="mqtt", rid=rid, local=self.local,
                           peer=self.peer, wire="PUBACK", mid=message.mid)
        if self.on_message:
            self.loop.call_soon_threadsafe(self.on_message, message, line)

    def ack(self, rid, message):
        self.log.write("ack", "sent", proto="mqtt", rid=rid, local=self.local,
                       peer=self.peer, wire="PUBACK", mid=message.mid)
        self.client.ack(message.mid, message.qos)

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()


class Redis:
    """One redis-py asyncio connection, one command at a time, each logged."""

    def __init__(self, log, address):
        self.log, self.address = log, address
        self.lock = asyncio.Lock()

    async def start(self):
        import redis.asyncio
        from redis.maint_notifications import MaintNotificationsConfig
        host, port = self.address.split(":")
        # RESP2, no CLIENT SETINFO, no maintenance notifications: nothing on connect
        # (redis-py 8 would send HELLO 3 and CLIENT MAINT_NOTIFICATIONS), so that the
        # connection carries only the logged commands and their order is counted right.
        self.redis = redis.asyncio.Redis(
            host=host, port=int(port), single_connection_client=True, protocol=2,
            driver_info=None,
            maint_notifications_config=MaintNotificationsConfig(enabled=False))
        await self.redis.initialize()
        await self.redis.connection.connect()
        self.local, self.peer = ends_of_transport(self.redis.connection._writer.transport)

    async def call(self, rid, *command):
        async with self.lock:
            start = time.time_ns()
            seq = self.log.next_seq(self.local, self.peer, "sent", "command")
            result = await self.redis.execute_command(*command)
            self.log.write("redis", "sent", time_ns=start, proto="redis", rid=rid,
                           local=self.local, peer=self.peer, wire="command", seq=seq,
                           command=command[0],
                           key=command[1] if len(command) > 1 else None,
                           done=time.time_ns())
            return result

    async def close(self):
        await self.redis.aclose()
