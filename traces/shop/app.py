"""The application tier of the shop: a small HTTP service behind nginx that reads
through a Redis cache to PostgreSQL. Each worker thread keeps its own connections,
so calls from concurrent requests overlap on the wire as they do in real systems.

Three ways to run the workers (the fourth argument):
- 0 (the default): a thread per nginx connection, as Python's ThreadingHTTPServer
  does, connecting to Redis and PostgreSQL on its first request. When nginx opens and
  closes upstream connections under load, those first requests also carry the calls
  that open the sessions (redis-py's CLIENT SETINFO, ...).
- N > 0: a fixed pool of N worker threads, connected before any request, each serving
  one nginx connection at a time, as a pre-forked application server does. No request
  pays for opening a connection. nginx keeps idle upstream connections open, each
  holding its worker, so N must exceed the requests nginx has in flight: with fewer
  workers, a request on a further connection waits until nginx closes one.
- Nq (e.g. 8q): a pool of N worker threads, connected before any request, that take
  requests from one queue, as a servlet container's worker pool does: a thread per nginx
  connection reads each request and queues it; the next free worker makes its calls on
  its own Redis and PostgreSQL connections and sends the response. With more requests
  in flight than workers, requests wait in the queue between their arrival and their
  first call out, and a connection's requests are served by whichever worker is free.
  With a sixth argument, a file, each request served is written to it as it leaves its
  worker: `trace-id  queued  served  start` (seconds: its wait in the queue, its time in
  the worker, when the worker took it), for wait.py.
- Nq:MS (e.g. 8q:15): the same, and each request also holds its worker for MS
  milliseconds after its calls, before the response, as rendering it or a call this
  shop does not capture would: the pool, not Python, then limits the requests served.

With a fifth argument, a file: the service passes each request's W3C `traceparent`
on to its database queries as a sqlcommenter comment, as instrumented services do (its
Redis commands carry none), and writes every call it serves and makes to the file, one
line per call: `client-address>server-address  operation  trace-id`, in the order each
connection carried them. `truth.py` turns that into the captures' truth.

With SHOP_NODELAY=1 in the environment (capture.sh passes it on), the service sets
TCP_NODELAY on each accepted connection. It writes a response's headers and body in two
sends; without it Nagle's algorithm holds the body until nginx acknowledges the
headers, and nginx delays that acknowledgement ~40 ms, as the shipped captures show in
most requests. With it both go out at once: the same system without that stall.

GET  /item/<id>   cache GET; on a miss, SELECT from the database, then cache SET
POST /order/<id>  INSERT the order in the database, then cache INCR of the counter
"""
import os
import queue
import random
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer

import psycopg2
import redis

LISTEN, CACHE, DB = sys.argv[1], sys.argv[2], sys.argv[3]
POOL, _, WORK_MS = (sys.argv[4] if len(sys.argv) > 4 else "0").partition(":")
WORK = float(WORK_MS or 0) / 1000
QUEUED = POOL.endswith("q")
WORKERS = int(POOL[:-1] if QUEUED else POOL)
CALLS = open(sys.argv[5], "a", buffering=1) if len(sys.argv) > 5 else None
POOL_LOG = open(sys.argv[6], "a", buffering=1) if len(sys.argv) > 6 and QUEUED else None
NODELAY = os.environ.get("SHOP_NODELAY", "0") == "1"
calls_lock = threading.Lock()
local = threading.local()


def ends(sock):
    """`client>server` of a connection, as blackbox names it, from the client's side."""
    (here, here_port), (there, there_port) = sock.getsockname()[:2], sock.getpeername()[:2]
    return f"{here}:{here_port}>{there}:{there_port}"


def note(connection, operation, trace):
    if CALLS:
        with calls_lock:
            CALLS.write(f"{connection}\t{operation}\t{trace or '-'}\n")


def connect():
    # One connection per client, opened now, so that its ends are known.
    local.cache = redis.Redis(host=CACHE, port=6379, single_connection_client=CALLS is not None)
    local.db = psycopg2.connect(host=DB, dbname="shop", user="shop")
    local.db.autocommit = True
    if CALLS:
        local.cache_ends = ends(local.cache.connection._sock)
        with socket.fromfd(local.db.fileno(), socket.AF_INET, socket.SOCK_STREAM) as sock:
            local.db_ends = ends(sock)


def connections():
    if not hasattr(local, "cache"):
        connect()
    return local.cache, local.db


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = NODELAY  # socketserver sets TCP_NODELAY in setup()

    def reply(self, body):
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def trace(self):
        parent = self.headers.get("traceparent", "")
        parts = parent.split("-")
        return parts[1] if len(parts) == 4 else None

    def served(self):
        """Notes the request being served (it came in on this connection)."""
        if CALLS:
            (peer, peer_port), (here, here_port) = self.client_address[:2], self.connection.getsockname()[:2]
            note(f"{peer}:{peer_port}>{here}:{here_port}", self.command, self.trace())

    def cache_call(self, operation, call):
        note(getattr(local, "cache_ends", None), operation, self.trace())
        return call()

    def query(self, db, operation, sql, arguments):
        trace = self.trace()
        if CALLS and trace:
            sql += f" /*traceparent='00-{trace}-{random.getrandbits(64):016x}-01'*/"
        note(getattr(local, "db_ends", None), operation, trace)
        with db.cursor() as cursor:
            cursor.execute(sql, arguments)
            return cursor.fetchone() if operation == "SELECT" else None

    def work(self, serve):
        """Serves the request: here, or with Nq by the next free worker of the pool."""
        if not QUEUED:
            return serve()
        job = {"done": threading.Event(), "trace": self.trace(), "queued": time.monotonic()}
        jobs.put((serve, job))
        job["done"].wait()
        if "error" in job:
            raise job["error"]

    def do_GET(self):
        self.served()
        self.work(self.get_item)

    def get_item(self):
        cache, db = connections()
        item = int(self.path.rsplit("/", 1)[-1])
        name = self.cache_call("GET", lambda: cache.get(f"item:{item}"))
        if name is None:
            row = self.query(db, "SELECT", "SELECT name FROM items WHERE id = %s", (item,))
            name = (row[0] if row else "none").encode()
            self.cache_call("SET", lambda: cache.set(f"item:{item}", name, ex=5))
        if WORK:
            time.sleep(WORK)
        self.reply(name.decode())

    def do_POST(self):
        self.served()
        self.work(self.post_order)

    def post_order(self):
        cache, db = connections()
        item = int(self.path.rsplit("/", 1)[-1])
        length = int(self.headers.get("Content-Length", 0))
        self.rfile.read(length)
        self.query(db, "INSERT", "INSERT INTO orders (item) VALUES (%s)", (item,))
        count = self.cache_call("INCRBY", lambda: cache.incr("orders"))  # redis-py sends INCRBY
        if WORK:
            time.sleep(WORK)
        self.reply(str(count))

    def log_message(self, *args):
        pass


def start_workers(count, work):
    """Starts `count` threads that each connect to Redis and PostgreSQL, then run `work`;
    returns once every one is connected, so that no request pays for a connection."""
    ready = threading.Barrier(count + 1)

    def worker():
        connect()
        local.cache.ping()  # redis-py connects lazily: connect now, not in a request
        ready.wait()
        work()

    for _ in range(count):
        threading.Thread(target=worker, daemon=True).start()
    ready.wait()


class PooledServer(HTTPServer):
    """Hands each accepted connection to the next free worker of the pool."""

    def __init__(self, address, handler, workers):
        super().__init__(address, handler)
        self.accepted = queue.Queue()
        start_workers(workers, self.work)

    def work(self):
        while True:
            request, client = self.accepted.get()
            try:
                self.finish_request(request, client)
            except Exception:
                self.handle_error(request, client)
            finally:
                self.shutdown_request(request)

    def process_request(self, request, client):
        self.accepted.put((request, client))


class QueuedServer(ThreadingHTTPServer):
    """A thread per connection reads its requests; a pool of workers serves them."""
    request_queue_size = 1024  # nginx may open a connection per request in flight

    def __init__(self, address, handler, workers):
        super().__init__(address, handler)
        start_workers(workers, self.work)

    def work(self):
        while True:
            serve, job = jobs.get()
            start = time.monotonic()
            try:
                serve()
            except Exception as error:
                job["error"] = error
            finally:
                if POOL_LOG:
                    end = time.monotonic()
                    with calls_lock:
                        POOL_LOG.write(f"{job['trace'] or '-'}\t{start - job['queued']:.6f}\t"
                                       f"{end - start:.6f}\t{start:.6f}\n")
                job["done"].set()


jobs = queue.Queue()
host, port = LISTEN.split(":")
if QUEUED:
    QueuedServer((host, int(port)), Handler, WORKERS).serve_forever()
elif WORKERS > 0:
    PooledServer((host, int(port)), Handler, WORKERS).serve_forever()
else:
    ThreadingHTTPServer((host, int(port)), Handler).serve_forever()
