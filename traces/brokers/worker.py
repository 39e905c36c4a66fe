"""The workers of the brokers system, one mode per broker. Each consumes the `orders`
its broker delivers, one message at a time in the order they came, and for each
makes two calls to the cache (Redis) on its one connection, then acknowledges it:

  SET order:<request id> <body> EX 600    the order, keyed by the request id
  INCR orders:<broker>                    a counter per broker

nats   subscription on `orders` in queue group `workers` (no ack: core NATS); also
       answers `quote` requests (queue group `workers`): GET price:<item>, then a reply
       to the request's inbox with the request id in the reply's headers
amqp   basic.consume (manual ack, prefetch 10) on queue `orders`, bound to the direct
       exchange `orders` with key `order`; basic.ack after the calls. Also consumes
       queue `quote` (default exchange) on the same channel, manual ack: GET
       price:<item>, then basic.publish of the reply to the default exchange with the
       request's reply_to as routing key and its correlation_id, then basic.ack
kafka  aiokafka consumer in group `workers` on topics `orders` and `quote` (created
       here, with web's reply topic `reply-web`, one partition each, if missing), no
       auto-commit, fetch wait KAFKA_FETCH_WAIT_MS; commits each message's next offset
       after the calls. A `quote` record (Spring Kafka's ReplyingKafkaTemplate
       convention): GET price:<item>, then a reply record to the topic its header
       kafka_replyTopic names, with its header kafka_correlationId, through the
       worker's producer (acks=1); once the Produce response came, the commit
mqtt   paho-mqtt MQTT 5 subscription on `orders` at QoS 1, manual ack: the PUBACK goes
       after the calls. Also subscribes `quote` (one SUBSCRIBE for both): GET
       price:<item>, then a PUBLISH of the reply (QoS 1) to the request's Response Topic
       with its Correlation Data, waits for that PUBACK, then PUBACKs the request

Deliveries are logged as the library hands them over, in wire order; the calls and the
ack as they are made (calllog.py, clients.py).

Usage: worker.py MODE HOST BROKER CACHE LOG READY   (addresses as ip:port)
"""
import asyncio
import json
import signal
import sys

from calllog import Log
from clients import (KAFKA_CORRELATION_ID, KAFKA_FETCH_WAIT_MS, KAFKA_REPLY_TOPIC, RID,
                     Amqp, Kafka, KafkaProducer, Mqtt, Nats, Redis)

MODE, HOST, BROKER, CACHE, LOG, READY = sys.argv[1:7]
log = Log(LOG, HOST)
# Kafka: the topics worker-kafka consumes, and web's reply topic (web.py's
# reply-<host>), made here in one CreateTopics before web starts.
KAFKA_TOPICS = ("orders", "quote")
KAFKA_REPLY_TOPICS = ("reply-web",)


async def work(cache, rid, body):
    await cache.call(rid, "SET", f"order:{rid}", body, "EX", "600")
    await cache.call(rid, "INCR", f"orders:{MODE}")


async def price(cache, rid, body):
    """A quote's work: GET price:<item>; the reply's body."""
    item = json.loads(body).get("item", 1)
    price = await cache.call(rid, "GET", f"price:{item}")
    return json.dumps({"rid": rid, "item": item, "price": int(price or 100)}).encode()


async def run_nats(cache, stop):
    nats = Nats(log, BROKER, HOST)
    await nats.start()

    async def on_order(msg):
        await work(cache, (msg.headers or {}).get(RID), msg.data)

    async def on_quote(msg):
        rid = (msg.headers or {}).get(RID)
        reply = await price(cache, rid, msg.data)
        await nats.nc.publish(msg.reply, reply, headers={RID: rid})

    await nats.nc.subscribe("orders", queue="workers", cb=on_order)
    await nats.nc.subscribe("quote", queue="workers", cb=on_quote)
    await nats.flush()
    ready()
    await stop.wait()
    await nats.nc.drain()


async def run_amqp(cache, stop):
    amqp = Amqp(log, BROKER, confirms=False)
    await amqp.start()
    channel = amqp.channel
    await channel.basic_qos(prefetch_count=10)
    await channel.exchange_declare("orders", exchange_type="direct")
    await channel.queue_declare("orders")
    await channel.queue_bind("orders", "orders", routing_key="order")
    await channel.queue_declare("quote")
    queue = asyncio.Queue()
    async def on_message(message):
        # aiormq starts a task per delivery, in the order the frames came; nothing here
        # awaits before the message is queued, so the queue keeps that order. The
        # delivery tag is the broker's count of deliveries on this channel.
        properties = message.header.properties
        headers = properties.headers or {}
        rid = headers.get(RID)
        rid = rid.decode() if isinstance(rid, bytes) else rid
        log.write("delivery", "received", proto="amqp", rid=rid, local=amqp.local,
                  peer=amqp.peer, wire="basic.deliver", seq=message.delivery_tag,
                  exchange=message.exchange, routing_key=message.routing_key,
                  delivery_tag=message.delivery_tag, redelivered=message.redelivered,
                  reply_to=properties.reply_to, correlation_id=properties.correlation_id,
                  body_rid=json.loads(message.body).get("rid"))
        queue.put_nowait((rid, message))

    await channel.basic_consume("orders", on_message, no_ack=False)
    await channel.basic_consume("quote", on_message, no_ack=False)
    ready()

    async def consume():
        while True:
            rid, message = await queue.get()
            if message.routing_key == "quote":
                properties = message.header.properties
                reply = await price(cache, rid, message.body)
                await amqp.publish(rid, reply, "", properties.reply_to, kind="reply",
                                   correlation_id=properties.correlation_id)
            else:
                await work(cache, rid, message.body)
            log.write("ack", "sent", proto="amqp", rid=rid, local=amqp.local,
                      peer=amqp.peer, wire="basic.ack", delivery_tag=message.delivery_tag)
            await channel.basic_ack(message.delivery_tag)

    consumer = asyncio.create_task(consume())
    await stop.wait()
    consumer.cancel()
    await amqp.close()


async def run_kafka(cache, stop):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.client import ConnectionGroup
    from aiokafka.errors import TopicAlreadyExistsError

    admin = AIOKafkaAdminClient(bootstrap_servers=BROKER, client_id=f"{HOST}-admin")
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)
                                   for topic in KAFKA_TOPICS + KAFKA_REPLY_TOPICS])
    except TopicAlreadyExistsError:
        pass
    await admin.close()

    # The replies' producer (a connection of its own to the reply topics' leader).
    producer = KafkaProducer(log, BROKER, f"{HOST}-replies", KAFKA_REPLY_TOPICS[0])
    await producer.start()
    # One consumer for both topics, so that one loop handles every record in the order
    # the consumer hands them over.
    consumer = AIOKafkaConsumer(*KAFKA_TOPICS, bootstrap_servers=BROKER, client_id=HOST,
                                group_id="workers", enable_auto_commit=False,
                                auto_offset_reset="earliest",
                                fetch_max_wait_ms=KAFKA_FETCH_WAIT_MS)
    await consumer.start()
    while len(consumer.assignment()) < len(KAFKA_TOPICS):
        await asyncio.sleep(0.1)
    for partition in consumer.assignment():
        await consumer.position(partition)
    ready()
    client = consumer._client

    async def consume():
        async for record in consumer:
            headers = dict(record.headers or ())
            rid = headers.get(RID, b"").decode() or None
            reply_topic = headers.get(KAFKA_REPLY_TOPIC)
            reply_topic = reply_topic.decode() if reply_topic is not None else None
            correlation = headers.get(KAFKA_CORRELATION_ID)
            node = client.cluster.leader_for_partition(
                _partition(record.topic, record.partition))
            local, peer = Kafka.ends(client, node, ConnectionGroup.DEFAULT)
            log.write("delivery", "received", proto="kafka", rid=rid, local=local, peer=peer,
                      wire="record", topic=record.topic, partition=record.partition,
                      offset=record.offset, reply_topic=reply_topic,
                      correlation_id=correlation.decode() if correlation is not None else None,
                      body_rid=json.loads(record.value).get("rid"))
            if record.topic == "quote":
                reply = await price(cache, rid, record.value)
                # Waits for the Produce response.
                await producer.publish(rid, reply, kind="reply", topic=reply_topic,
                                       correlation=correlation)
            else:
                await work(cache, rid, record.value)
            coordinator = consumer._coordinator.coordinator_id
            local, peer = Kafka.ends(client, coordinator, ConnectionGroup.COORDINATION)
            log.write("ack", "sent", proto="kafka", rid=rid, local=local, peer=peer,
                      wire="OffsetCommit", topic=record.topic, partition=record.partition,
                      offset=record.offset + 1)
            await consumer.commit({_partition(record.topic, record.partition):
                                   record.offset + 1})

    consumer_task = asyncio.create_task(consume())
    await stop.wait()
    consumer_task.cancel()
    await consumer.stop()
    await producer.close()


def _partition(topic, partition):
    from aiokafka.structs import TopicPartition
    return TopicPartition(topic, partition)


async def run_mqtt(cache, stop):
    loop = asyncio.get_running_loop()
    mqtt = Mqtt(log, BROKER, HOST, loop, manual_ack=True)
    queue = asyncio.Queue()
    mqtt.on_message = lambda message, line: queue.put_nowait((line.get("rid"), message))
    await mqtt.start()
    await mqtt.subscribe("orders", "quote")
    ready()

    async def consume():
        while True:
            rid, message = await queue.get()
            if message.topic == "quote":
                properties = message.properties
                reply = await price(cache, rid, message.payload)
                await mqtt.publish(rid, properties.ResponseTopic, reply, kind="reply",
                                   correlation=properties.CorrelationData)
            else:
                await work(cache, rid, message.payload)
            mqtt.ack(rid, message)

    consumer = asyncio.create_task(consume())
    await stop.wait()
    consumer.cancel()
    mqtt.close()


def ready():
    log.write("ready")
    open(READY, "w").close()


async def main():
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    cache = Redis(log, CACHE)
    await cache.start()
    await cache.call(None, "PING")
    await {"nats": run_nats, "amqp": run_amqp, "kafka": run_kafka, "mqtt": run_mqtt}[MODE](
        cache, stop)
    await cache.close()
    log.write("stop")


if __name__ == "__main__":
    asyncio.run(main())
