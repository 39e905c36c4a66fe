"""The clients of the shop: a few threads, each a browser that keeps its connection
to the web server open and sends one request after another, with a short think time.
Seeded, so that every run asks the same things in the same order."""
import http.client
import random
import sys
import threading
import time

WEB, SECONDS, THREADS = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])


def browse(seed):
    rng = random.Random(seed)
    connection = http.client.HTTPConnection(WEB, 80, timeout=10)
    deadline = time.time() + SECONDS
    while time.time() < deadline:
        item = rng.randint(1, 40)
        if rng.random() < 0.25:
            connection.request("POST", f"/order/{item}", body=b"qty=1",
                               headers={"Content-Type": "application/x-www-form-urlencoded"})
        else:
            connection.request("GET", f"/item/{item}")
        connection.getresponse().read()
        time.sleep(rng.uniform(0.005, 0.05))


threads = [threading.Thread(target=browse, args=(seed,)) for seed in range(THREADS)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
