"""The web tier of the brokers system: an aiohttp service that turns each HTTP request
into one message on one broker, the broker named by the path, and answers once that
broker has taken it.

POST /order/nats   HPUB `orders` (header X-Request-Id), then a flush (PING/PONG)
POST /order/amqp   basic.publish to exchange `orders`, routing key `order`, with the
                   request id in the basic properties' headers; answers on the
                   publisher confirm (basic.ack)
POST /order/kafka  a record on topic `orders` with a record header X-Request-Id
                   (acks=1); answers on the produce response
POST /order/mqtt   PUBLISH `orders` at QoS 1 with a user property X-Request-Id (MQTT 5);
                   answers on the PUBACK
GET  /quote/nats   a NATS request on `quote` (reply to an _INBOX subject, header
                   X-Request-Id); answers with worker-nats's reply
GET  /quote/amqp   RabbitMQ RPC: basic.publish to the default exchange, routing key
                   (queue) `quote`, with reply_to `amq.rabbitmq.reply-to` (direct
                   reply-to, consumed no-ack on the same channel) and correlation_id =
                   the request id (headers X-Request-Id too); answers with worker-amqp's
                   reply, delivered to that consumer
GET  /quote/kafka  request/reply over Kafka topics, Spring Kafka's ReplyingKafkaTemplate
                   convention: a record on topic `quote` (its own producer, acks=1,
                   key = the id) with headers X-Request-Id, kafka_replyTopic
                   `reply-web` and kafka_correlationId = the id (32 hex chars, ASCII);
                   answers with worker-kafka's reply, a record on `reply-web` carrying
                   the same kafka_correlationId, read by web's own consumer (no group,
                   the partition assigned by hand, fetch wait KAFKA_FETCH_WAIT_MS)
GET  /quote/mqtt   MQTT 5 request/response: PUBLISH `quote` at QoS 1 with Response Topic
                   `reply/web` (subscribed at QoS 1) and Correlation Data = the request
                   id (user property X-Request-Id too); answers with worker-mqtt's reply,
                   a PUBLISH on `reply/web` that web PUBACKs

Every message body is JSON carrying the request id too. Every request served, message
sent or received is logged (calllog.py, clients.py).

Usage: web.py HOST LISTEN NATS AMQP KAFKA MQTT LOG READY  (addresses as ip:port)
"""
import asyncio
import json
import signal
import sys
import time

from aiohttp import web

from calllog import Log, ends_of_transport
from clients import (KAFKA_CORRELATION_ID, KAFKA_FETCH_WAIT_MS, RID, Amqp, Kafka,
                     KafkaProducer, Mqtt, Nats, body_rid)

HOST, LISTEN, NATS, AMQP, KAFKA, MQTT, LOG, READY = sys.argv[1:9]
log = Log(LOG, HOST)
DIRECT_REPLY_TO = "amq.rabbitmq.reply-to"
REPLY_TOPIC = f"reply/{HOST}"
# Where worker-kafka replies to web's Kafka quotes (worker.py creates it).
KAFKA_REPLY_TOPIC_NAME = f"reply-{HOST}"


class KafkaReplies:
    """web's consumer of its Kafka reply topic: one aiokafka consumer, no group (nothing
    committed), the topic's one partition assigned by hand and read from its end as it
    was before any request; short fetch waits (KAFKA_FETCH_WAIT_MS). Each reply is
    logged as the consumer hands it over and completes the request waiting for its
    kafka_correlationId."""

    def __init__(self, waiting):
        self.waiting = waiting

    async def start(self):
        from aiokafka import AIOKafkaConsumer
        from aiokafka.structs import TopicPartition
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=KAFKA, client_id=f"{HOST}-replies", group_id=None,
            enable_auto_commit=False, auto_offset_reset="latest",
            fetch_max_wait_ms=KAFKA_FETCH_WAIT_MS)
        await self.consumer.start()
        client = self.consumer._client
        partitions = await client._wait_on_metadata(KAFKA_REPLY_TOPIC_NAME)
        self.partitions = [TopicPartition(KAFKA_REPLY_TOPIC_NAME, partition)
                           for partition in sorted(partitions)]
        self.consumer.assign(self.partitions)
        await self.consumer.seek_to_end(*self.partitions)
        for partition in self.partitions:
            await self.consumer.position(partition)
        self.task = asyncio.create_task(self.consume())

    async def consume(self):
        from aiokafka.client import ConnectionGroup
        client = self.consumer._client
        async for record in self.consumer:
            headers = dict(record.headers or ())
            rid = headers.get(RID, b"").decode() or None
            correlation = headers.get(KAFKA_CORRELATION_ID)
            correlation = correlation.decode() if correlation is not None else None
            node = Kafka.leader(client, record.topic)
            local, peer = Kafka.ends(client, node, ConnectionGroup.DEFAULT)
            log.write("reply", "received", proto="kafka", rid=rid, local=local, peer=peer,
                      wire="record", topic=record.topic, partition=record.partition,
                      offset=record.offset, correlation_id=correlation,
                      body_rid=body_rid(record.value))
            future = self.waiting.pop(correlation, None)
            if future and not future.done():
                future.set_result(record.value)

    async def close(self):
        self.task.cancel()
        await self.consumer.stop()


async def main():
    loop = asyncio.get_running_loop()
    # A broker given as "-" is not run (capture.sh's BROKERS): its path answers 404.
    nats = Nats(log, NATS, "web") if NATS != "-" else None
    amqp = Amqp(log, AMQP, confirms=True) if AMQP != "-" else None
    kafka = KafkaProducer(log, KAFKA, HOST, "orders") if KAFKA != "-" else None
    # The quotes' requests go out through a producer of their own, so that no Produce
    # request holds records of both topics (clients.py).
    kafka_quote = KafkaProducer(log, KAFKA, f"{HOST}-quote", "quote") if kafka else None
    mqtt = Mqtt(log, MQTT, "web", loop, reply_topic=REPLY_TOPIC) if MQTT != "-" else None
    # Quotes waiting for their reply, by broker and correlation id (the request id).
    waiting = {"amqp": {}, "kafka": {}, "mqtt": {}}
    kafka_replies = KafkaReplies(waiting["kafka"]) if kafka else None
    if nats:
        await nats.start()
    if amqp:
        await amqp.start()
        await amqp.channel.exchange_declare("orders", exchange_type="direct")

        async def on_amqp_reply(message):
            # A task per delivery, started in the order the frames came; nothing awaits
            # before the line is written, so the log counts their order. Not by the
            # delivery tag: RabbitMQ delivers every direct reply-to reply with tag 1.
            properties = message.header.properties
            rid = (properties.headers or {}).get(RID)
            rid = rid.decode() if isinstance(rid, bytes) else rid
            log.write("reply", "received", proto="amqp", rid=rid, local=amqp.local,
                      peer=amqp.peer, wire="basic.deliver",
                      exchange=message.exchange, routing_key=message.routing_key,
                      delivery_tag=message.delivery_tag,
                      correlation_id=properties.correlation_id,
                      body_rid=json.loads(message.body).get("rid"))
            future = waiting["amqp"].pop(properties.correlation_id, None)
            if future and not future.done():
                future.set_result(message.body)

        # Direct reply-to: consumed no-ack before any request names it.
        await amqp.channel.basic_consume(DIRECT_REPLY_TO, on_amqp_reply, no_ack=True)
    if kafka:
        await kafka.start()
        await kafka_quote.start()
        # Reading its reply topic from the end before any request names it.
        await kafka_replies.start()
    if mqtt:
        def on_mqtt_message(message, line):
            if message.topic != REPLY_TOPIC:
                return
            future = waiting["mqtt"].pop(line.get("correlation_id"), None)
            if future and not future.done():
                future.set_result(message.payload)

        mqtt.on_message = on_mqtt_message
        await mqtt.start()
        await mqtt.subscribe(REPLY_TOPIC)

    async def publish_nats(rid, body):
        await nats.nc.publish("orders", body, headers={RID: rid})
        await nats.flush(rid)
        return {}

    async def publish_amqp(rid, body):
        frame = await amqp.publish(rid, body, "orders", "order")
        return {"confirm": frame.delivery_tag}

    async def publish_kafka(rid, body):
        metadata = await kafka.publish(rid, body)
        return {"partition": metadata.partition, "offset": metadata.offset}

    async def publish_mqtt(rid, body):
        reason = await mqtt.publish(rid, "orders", body)
        return {"puback": str(reason)}

    publishers = {name: publish for name, publish, client in (
        ("nats", publish_nats, nats), ("amqp", publish_amqp, amqp),
        ("kafka", publish_kafka, kafka), ("mqtt", publish_mqtt, mqtt)) if client}

    def served(request):
        rid = request.headers.get(RID)
        local, peer = ends_of_transport(request.transport)
        log.write("served", "received", proto="http", rid=rid, local=local, peer=peer,
                  wire="request", method=request.method, path=request.path)
        return rid, local, peer

    def respond(request, rid, local, peer, result):
        log.write("response", "sent", proto="http", rid=rid, local=local, peer=peer,
                  wire="response", status=200, path=request.path)
        return web.json_response(result)

    async def order(request):
        rid, local, peer = served(request)
        broker = request.match_info["broker"]
        if broker not in publishers:
            raise web.HTTPNotFound()
        order = await request.json()
        body = json.dumps({"rid": rid, "broker": broker, "at": time.time_ns(),
                           **order}).encode()
        result = await publishers[broker](rid, body)
        return respond(request, rid, local, peer, {"rid": rid, "broker": broker, **result})

    async def quote_nats(rid, body):
        reply = await nats.nc.request("quote", body, timeout=10, headers={RID: rid})
        return reply.data

    async def quote_amqp(rid, body):
        future = waiting["amqp"][rid] = loop.create_future()
        # The publisher confirm comes back too (web's channel confirms); the reply may
        # come before it.
        await amqp.publish(rid, body, "", "quote", kind="request",
                           reply_to=DIRECT_REPLY_TO, correlation_id=rid)
        return await asyncio.wait_for(future, 10)

    async def quote_mqtt(rid, body):
        future = waiting["mqtt"][rid] = loop.create_future()
        await mqtt.publish(rid, "quote", body, kind="request", response_topic=REPLY_TOPIC,
                           correlation=rid.encode())
        return await asyncio.wait_for(future, 10)

    async def quote_kafka(rid, body):
        future = waiting["kafka"][rid] = loop.create_future()
        # The produce response comes back first: the worker fetches the record only
        # once the broker has it.
        await kafka_quote.publish(rid, body, kind="request",
                                  reply_topic=KAFKA_REPLY_TOPIC_NAME,
                                  correlation=rid.encode())
        return await asyncio.wait_for(future, 10)

    quoters = {name: ask for name, ask, client in (
        ("nats", quote_nats, nats), ("amqp", quote_amqp, amqp),
        ("kafka", quote_kafka, kafka), ("mqtt", quote_mqtt, mqtt)) if client}

    async def quote(request):
        rid, local, peer = served(request)
        broker = request.match_info["broker"]
        if broker not in quoters:
            raise web.HTTPNotFound()
        item = int(request.query.get("item", "1"))
        body = json.dumps({"rid": rid, "item": item}).encode()
        answer = json.loads(await quoters[broker](rid, body))
        return respond(request, rid, local, peer, {"rid": rid, "broker": broker, **answer})

    app = web.Application()
    app.add_routes([web.post("/order/{broker}", order), web.get("/quote/{broker}", quote)])
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, port = LISTEN.split(":")
    site = web.TCPSite(runner, host, int(port))
    await site.start()
    log.write("ready")
    open(READY, "w").close()

    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    await stop.wait()
    await runner.cleanup()
    for client in (nats, amqp, kafka, kafka_quote, kafka_replies):
        if client:
            await client.close()
    if mqtt:
        mqtt.close()
    log.write("stop")


if __name__ == "__main__":
    asyncio.run(main())
