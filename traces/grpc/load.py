"""Load for the gRPC shop: CLIENTS threads share one channel to the gateway (so their
calls multiplex on one HTTP/2 connection) and call it for SECONDS seconds: GetItem
(75%, items 1..40) or PlaceOrder (25%). Usage: load.py GATEWAY SECONDS CLIENTS"""
import os
import random
import sys
import threading
import time

import grpc

sys.path.insert(0, os.environ.get("SHOP_STUBS", "."))
import shop_pb2  # noqa: E402
import shop_pb2_grpc  # noqa: E402

gateway, seconds, clients = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
stub = shop_pb2_grpc.GatewayStub(grpc.insecure_channel(f"{gateway}:50051"))
done = {"items": 0, "orders": 0}
lock = threading.Lock()


def run(seed):
    rng = random.Random(seed)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        item = rng.randint(1, 40)
        if rng.random() < 0.75:
            stub.GetItem(shop_pb2.ItemRequest(item=item, user=f"u{seed}"))
            kind = "items"
        else:
            stub.PlaceOrder(shop_pb2.OrderRequest(item=item, user=f"u{seed}"))
            kind = "orders"
        with lock:
            done[kind] += 1
        time.sleep(rng.uniform(0.005, 0.02))


threads = [threading.Thread(target=run, args=(seed,)) for seed in range(clients)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(f"load: {done['items']} GetItem, {done['orders']} PlaceOrder", file=sys.stderr)
