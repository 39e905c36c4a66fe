"""The clients of the brokers system: CLIENTS threads, each a closed-loop client that
keeps one HTTP/1.1 connection to web open and sends one request after another, with a
short think time (5-50 ms), for SECONDS. Each request carries its own request id,
`X-Request-Id: <32 hex digits>`. The paths are spread evenly: each client goes through
them all (eight by default) in a new random order every round. Seeded per client, so that every
run asks the same things in the same order (the request ids too).

Each request is logged (calllog.py) as the client's socket sees its connection, with
its order on that connection, the time it was sent and the time its response was read.

Usage: load.py WEB SECONDS CLIENTS LOG [PATH...]
"""
import http.client
import json
import random
import sys
import threading
import time

from calllog import Log, ends_of_socket

WEB, SECONDS, CLIENTS, LOG = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
PATHS = sys.argv[5:] or ["/order/nats", "/order/amqp", "/order/kafka", "/order/mqtt",
                         "/quote/nats", "/quote/amqp", "/quote/kafka", "/quote/mqtt"]
log = Log(LOG, "client")


def browse(number):
    rng = random.Random(number)
    host, port = WEB.split(":")
    connection = None
    deadline = time.time() + SECONDS
    paths = []
    while time.time() < deadline:
        if not paths:
            paths = rng.sample(PATHS, len(PATHS))
        path = paths.pop()
        rid = f"{rng.getrandbits(128):032x}"
        item = rng.randint(1, 40)
        headers = {"X-Request-Id": rid}
        if path.startswith("/order/"):
            method, url = "POST", path
            body = json.dumps({"item": item, "qty": rng.randint(1, 5)}).encode()
            headers["Content-Type"] = "application/json"
        else:
            method, url, body = "GET", f"{path}?item={item}", None
        if connection is None:
            connection = http.client.HTTPConnection(host, int(port), timeout=15)
            try:
                connection.connect()
            except OSError as exception:  # web is gone (the run is being stopped)
                log.write("request", "sent", proto="http", rid=rid, method=method, path=path,
                          error=repr(exception))
                connection = None
                time.sleep(0.5)
                continue
        local, peer = ends_of_socket(connection.sock)
        start = time.time_ns()
        seq = log.next_seq(local, peer, "sent", "request")
        status, error = None, None
        try:
            connection.request(method, url, body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            status = response.status
        except (OSError, http.client.HTTPException) as exception:
            error = repr(exception)
            connection.close()
            connection = None
        log.write("request", "sent", time_ns=start, proto="http", rid=rid, local=local,
                  peer=peer, wire="request", seq=seq, method=method, path=path,
                  status=status, error=error, done=time.time_ns())
        time.sleep(rng.uniform(0.005, 0.05))
    if connection is not None:
        connection.close()


threads = [threading.Thread(target=browse, args=(number,)) for number in range(CLIENTS)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
