"""The application tier of the shop: a small HTTP service behind nginx that reads
through a Redis cache to PostgreSQL. Each worker thread keeps its own connections,
so calls from concurrent requests overlap on the wire as they do in real systems.

Two ways to run the workers (the fourth argument):
- 0 (the default): a thread per nginx connection, as Python's ThreadingHTTPServer
  does, connecting to Redis and PostgreSQL on its first request. When nginx opens and
  closes upstream connections under load, those first requests also carry the calls
  that open the sessions (redis-py's CLIENT SETINFO, ...).
- N > 0: a fixed pool of N worker threads, connected before any request, each serving
  one nginx connection at a time, as a pre-forked application server does. No request
  pays for opening a connection.

GET  /item/<id>   cache GET; on a miss, SELECT from the database, then cache SET
POST /order/<id>  INSERT the order in the database, then cache INCR of the counter
"""
import queue
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer

import psycopg2
import redis

LISTEN, CACHE, DB = sys.argv[1], sys.argv[2], sys.argv[3]
WORKERS = int(sys.argv[4]) if len(sys.argv) > 4 else 0
local = threading.local()


def connect():
    local.cache = redis.Redis(host=CACHE, port=6379)
    local.db = psycopg2.connect(host=DB, dbname="shop", user="shop")
    local.db.autocommit = True


def connections():
    if not hasattr(local, "cache"):
        connect()
    return local.cache, local.db


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, body):
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        cache, db = connections()
        item = int(self.path.rsplit("/", 1)[-1])
        name = cache.get(f"item:{item}")
        if name is None:
            with db.cursor() as cursor:
                cursor.execute("SELECT name FROM items WHERE id = %s", (item,))
                row = cursor.fetchone()
            name = (row[0] if row else "none").encode()
            cache.set(f"item:{item}", name, ex=5)
        self.reply(name.decode())

    def do_POST(self):
        cache, db = connections()
        item = int(self.path.rsplit("/", 1)[-1])
        length = int(self.headers.get("Content-Length", 0))
        self.rfile.read(length)
        with db.cursor() as cursor:
            cursor.execute("INSERT INTO orders (item) VALUES (%s)", (item,))
        count = cache.incr("orders")
        self.reply(str(count))

    def log_message(self, *args):
        pass


class PooledServer(HTTPServer):
    """Hands each accepted connection to the next free worker of the pool."""

    def __init__(self, address, handler, workers):
        super().__init__(address, handler)
        self.accepted = queue.Queue()
        ready = threading.Barrier(workers + 1)
        for _ in range(workers):
            threading.Thread(target=self.work, args=(ready,), daemon=True).start()
        ready.wait()

    def work(self, ready):
        connect()
        local.cache.ping()  # redis-py connects lazily: connect now, not in a request
        ready.wait()
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


host, port = LISTEN.split(":")
if WORKERS > 0:
    PooledServer((host, int(port)), Handler, WORKERS).serve_forever()
else:
    ThreadingHTTPServer((host, int(port)), Handler).serve_forever()
