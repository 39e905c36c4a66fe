"""Each request's true path as `blackbox nest` writes it, for `blackbox eval --true-signatures`.

Usage: signatures.py DIR   reads DIR/truth.jsonl (or .jsonl.gz), writes DIR/signatures.tsv

One line per request whose checks all passed (truth.py's `problems` empty):
`request-id<TAB>signature`. The request id is the `X-Request-Id` the client sent, which
blackbox reads from the root call. truth.py writes a quote's path as it happened,
`client->web(nats⇒worker-nats(cache)⇒nats⇒web)`; web waits for the reply, so blackbox
nests the request/reply through nats as a call and writes `client->web(nats(worker-nats(cache)))`:
the same path in the notation of calls. The quotes over RabbitMQ (reply_to and
correlation_id), Kafka (record headers kafka_replyTopic and kafka_correlationId) and
MQTT 5 (Response Topic and Correlation Data) are written alike:
`client->web(rabbit(worker-amqp(cache)))`, `client->web(kafka(worker-kafka(cache)))`,
`client->web(mqtt(worker-mqtt(cache)))`.
Every other path is written alike by both.
"""
import gzip
import json
import os
import re
import sys

# broker⇒worker(calls)⇒broker⇒web: a request that web waited for the reply to.
REQUEST_REPLY = re.compile(r"^client->web\(([\w-]+)⇒([\w-]+)\(([^()]*)\)⇒\1⇒web\)$")


def notation(signature):
    """truth.py's signature as blackbox writes the same path."""
    match = REQUEST_REPLY.match(signature)
    if match:
        broker, worker, calls = match.groups()
        return f"client->web({broker}({worker}({calls})))"
    return signature


def main(directory):
    path = os.path.join(directory, "truth.jsonl")
    opener = open
    if not os.path.exists(path):
        path += ".gz"
        opener = gzip.open
    written = skipped = 0
    with opener(path, "rt") as source, open(os.path.join(directory, "signatures.tsv"), "w") as out:
        out.write("# request id\tsignature (blackbox's notation), from %s\n" % os.path.basename(path))
        for line in source:
            request = json.loads(line)
            if request.get("problems"):
                skipped += 1
                continue
            out.write("%s\t%s\n" % (request["rid"], notation(request["signature"])))
            written += 1
    print("%s/signatures.tsv: %d requests (%d with failed checks left out)" % (directory, written, skipped))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
