"""The clients of the shop: a few threads, each a browser that keeps its connection
to the web server open and sends one request after another, with a short think time.
Seeded, so that every run asks the same things in the same order.

With a fourth argument, a file: every request carries a W3C `traceparent` with a trace
id of its own, as a traced front end sends, and each request is written to the file as
`client-address>server-address  method  trace-id`, in the order each connection carried
them (see app.py)."""
import http.client
import random
import sys
import threading
import time

WEB, SECONDS, THREADS = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
CALLS = open(sys.argv[4], "a", buffering=1) if len(sys.argv) > 4 else None
calls_lock = threading.Lock()


def browse(seed):
    rng = random.Random(seed)
    connection = http.client.HTTPConnection(WEB, 80, timeout=10)
    deadline = time.time() + SECONDS
    while time.time() < deadline:
        item = rng.randint(1, 40)
        headers = {}
        if CALLS:
            trace = f"{rng.getrandbits(128):032x}"
            headers["traceparent"] = f"00-{trace}-{rng.getrandbits(64):016x}-01"
        if rng.random() < 0.25:
            method = "POST"
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            connection.request(method, f"/order/{item}", body=b"qty=1", headers=headers)
        else:
            method = "GET"
            connection.request(method, f"/item/{item}", headers=headers)
        if CALLS:
            (here, here_port), (there, there_port) = (connection.sock.getsockname()[:2],
                                                      connection.sock.getpeername()[:2])
            with calls_lock:
                CALLS.write(f"{here}:{here_port}>{there}:{there_port}\t{method}\t{trace}\n")
        connection.getresponse().read()
        time.sleep(rng.uniform(0.005, 0.05))


threads = [threading.Thread(target=browse, args=(seed,)) for seed in range(THREADS)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
