"""A cut-through gRPC (h2c) proxy with a bounded worker pool: `proxy.py LISTEN UPSTREAM
WORKERS [POOL_LOG]`, e.g. `proxy.py 10.89.0.15:50051 10.89.0.20:50051 4`.

It serves every method (a generic handler: the messages stay bytes, never decoded).
Each call it receives goes into one FIFO queue; WORKERS worker threads take calls from
it one at a time, forward each as one call to UPSTREAM, with the metadata it came with
(so `x-request-id` passes on), on one channel that all workers share (one HTTP/2
connection, each call a stream), and relay the answer, or the error, back. The threads
that receive calls only wait: a call waits in the queue until a worker is free.
With POOL_LOG, each call appends `id  wait  serving  start` (seconds; start on the
proxy's clock) to it: its time in the queue and in a worker.
"""
import queue
import sys
import threading
import time
from concurrent import futures

import grpc

listen, upstream, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
pool_log = open(sys.argv[4], "a", buffering=1) if len(sys.argv) > 4 else None
log_lock = threading.Lock()
channel = grpc.insecure_channel(upstream)
methods = {}
jobs = queue.Queue()
# Metadata gRPC itself sets, which a forwarded call must not repeat.
RESERVED = {"user-agent", "grpc-timeout", "grpc-encoding", "grpc-accept-encoding",
            "content-type", "te"}


class Job:
    def __init__(self, method, request, metadata, timeout):
        self.method, self.request, self.metadata, self.timeout = method, request, metadata, timeout
        self.queued = time.monotonic()
        self.done = threading.Event()
        self.answer = self.error = None


def worker():
    while True:
        job = jobs.get()
        start = time.monotonic()
        call = methods.get(job.method)
        if call is None:
            call = methods[job.method] = channel.unary_unary(job.method)
        try:
            job.answer = call(job.request, metadata=job.metadata, timeout=job.timeout)
        except grpc.RpcError as error:
            job.error = error
        end = time.monotonic()
        job.done.set()
        if pool_log:
            trace = dict(job.metadata).get("x-request-id", "-")
            with log_lock:
                pool_log.write(f"{trace}\t{start - job.queued:.6f}\t{end - start:.6f}\t{start:.6f}\n")


class Forward(grpc.GenericRpcHandler):
    def service(self, details):
        method = details.method
        metadata = [(k, v) for k, v in details.invocation_metadata if k not in RESERVED
                    and not k.startswith(":")]

        def forward(request, context):
            remaining = context.time_remaining()
            timeout = remaining if remaining is not None and remaining < 1e6 else None
            job = Job(method, request, metadata, timeout)
            jobs.put(job)
            job.done.wait()
            if job.error is not None:
                context.abort(job.error.code(), job.error.details() or "")
            return job.answer
        return grpc.unary_unary_rpc_method_handler(forward)


for _ in range(workers):
    threading.Thread(target=worker, daemon=True).start()
# Enough receiving threads for every stream a client may open: they only wait.
server = grpc.server(futures.ThreadPoolExecutor(max_workers=256),
                     handlers=[Forward()], maximum_concurrent_rpcs=None)
server.add_insecure_port(listen)
server.start()
server.wait_for_termination()
