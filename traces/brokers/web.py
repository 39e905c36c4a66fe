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
from clients import RID, Amqp, Kafka, Mqtt, Nats, body_rid

HOST, LISTEN, NATS, AMQP, KAFKA, MQTT, LOG, READY = sys.argv[1:9]
log = Log(LOG, HOST)


class KafkaProducer:
    async def start(self):
        from aiokafka import AIOKafkaProducer
        from aiokafka.client import ConnectionGroup
        self.group = ConnectionGroup.DEFAULT
        self.producer = AIOKafkaProducer(bootstrap_servers=KAFKA, client_id="web", acks=1,
                                         enable_idempotence=False)
        await self.producer.start()
        partitions = await self.producer.partitions_for("orders")
        assert partitions, "topic orders has no partitions"
        # Open the connection to the partition's leader now, not in the first request.
        from aiokafka.structs import TopicPartition
        self.node = self.producer.client.cluster.leader_for_partition(
            TopicPartition("orders", min(partitions)))
        await self.producer.client.ready(self.node)
        self.sent = 0

    async def publish(self, rid, body):
        local, peer = Kafka.ends(self.producer.client, self.node, self.group)
        self.sent += 1
        log.write("publish", "sent", proto="kafka", rid=rid, local=local, peer=peer,
                  wire="record", seq=self.sent, topic="orders", body_rid=body_rid(body))
        future = await self.producer.send("orders", value=body, key=rid.encode(),
                                          headers=[(RID, rid.encode())])
        metadata = await future
        log.write("confirm", "received", proto="kafka", rid=rid, local=local, peer=peer,
                  wire="ProduceResponse", seq=False, topic=metadata.topic,
                  partition=metadata.partition, offset=metadata.offset)
        return {"partition": metadata.partition, "offset": metadata.offset}

    async def close(self):
        await self.producer.stop()


async def main():
    loop = asyncio.get_running_loop()
    # A broker given as "-" is not run (capture.sh's BROKERS): its path answers 404.
    nats = Nats(log, NATS, "web") if NATS != "-" else None
    amqp = Amqp(log, AMQP, confirms=True) if AMQP != "-" else None
    kafka = KafkaProducer() if KAFKA != "-" else None
    mqtt = Mqtt(log, MQTT, "web", loop) if MQTT != "-" else None
    if nats:
        await nats.start()
    if amqp:
        await amqp.start()
        await amqp.channel.exchange_declare("orders", exchange_type="direct")
    if kafka:
        await kafka.start()
    if mqtt:
        await mqtt.start()

    async def publish_nats(rid, body):
        await nats.nc.publish("orders", body, headers={RID: rid})
        await nats.flush(rid)
        return {}

    async def publish_amqp(rid, body):
        frame = await amqp.publish(rid, body, "orders", "order")
        return {"confirm": frame.delivery_tag}

    async def publish_mqtt(rid, body):
        reason = await mqtt.publish(rid, "orders", body)
        return {"puback": str(reason)}

    publishers = {name: publish for name, publish, client in (
        ("nats", publish_nats, nats), ("amqp", publish_amqp, amqp),
        ("kafka", kafka and kafka.publish, kafka), ("mqtt", publish_mqtt, mqtt)) if client}

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

    async def quote(request):
        rid, local, peer = served(request)
        if not nats:
            raise web.HTTPNotFound()
        item = int(request.query.get("item", "1"))
        body = json.dumps({"rid": rid, "item": item}).encode()
        reply = await nats.nc.request("quote", body, timeout=10, headers={RID: rid})
        answer = json.loads(reply.data)
        return respond(request, rid, local, peer, {"rid": rid, "broker": "nats", **answer})

    app = web.Application()
    app.add_routes([web.post("/order/{broker}", order), web.get("/quote/nats", quote)])
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
    for client in (nats, amqp, kafka):
        if client:
            await client.close()
    if mqtt:
        mqtt.close()
    log.write("stop")


if __name__ == "__main__":
    asyncio.run(main())
