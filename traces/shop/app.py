"""The application tier of the shop: a small HTTP service behind nginx that reads
through a Redis cache to PostgreSQL. Each worker thread keeps its own connections,
so calls from concurrent requests overlap on the wire as they do in real systems.

GET  /item/<id>   cache GET; on a miss, SELECT from the database, then cache SET
POST /order/<id>  INSERT the order in the database, then cache INCR of the counter
"""
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg2
import redis

LISTEN, CACHE, DB = sys.argv[1], sys.argv[2], sys.argv[3]
local = threading.local()


def connections():
    if not hasattr(local, "cache"):
        local.cache = redis.Redis(host=CACHE, port=6379)
        local.db = psycopg2.connect(host=DB, dbname="shop", user="shop")
        local.db.autocommit = True
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


host, port = LISTEN.split(":")
ThreadingHTTPServer((host, int(port)), Handler).serve_forever()
