"""The tiers of the gRPC shop, one per network namespace: `python3 services.py ROLE`.

gateway  /shop.Gateway/GetItem: Auth.Check, then Catalog.GetItem
         /shop.Gateway/PlaceOrder: Auth.Check, then Orders.Place
auth     /shop.Auth/Check: answers at once
catalog  /shop.Catalog/GetItem: memcached get; on a miss (entries live 3 s) a MariaDB
         SELECT, then memcached set
orders   /shop.Orders/Place: a MariaDB INSERT

The gateway keeps one channel to each service, shared by all its worker threads, so
concurrent calls multiplex as streams on one HTTP/2 connection, as gRPC clients do.
Each catalog and orders worker thread keeps its own memcached and MariaDB connection.
"""
import os
import sys
import threading
from concurrent import futures

import grpc

sys.path.insert(0, os.environ.get("SHOP_STUBS", "."))
import shop_pb2  # noqa: E402
import shop_pb2_grpc  # noqa: E402

ROLE = sys.argv[1]
ADDRESS = {name: os.environ[name.upper()] for name in
           ("gateway", "auth", "catalog", "orders", "cache", "db")}
local = threading.local()


def database():
    import pymysql
    if not hasattr(local, "db"):
        local.db = pymysql.connect(host=ADDRESS["db"], user="shop", password="shop",
                                   database="shop", autocommit=True)
    return local.db


def cache():
    from pymemcache.client.base import Client
    if not hasattr(local, "cache"):
        local.cache = Client((ADDRESS["cache"], 11211))
    return local.cache


class Gateway(shop_pb2_grpc.GatewayServicer):
    def __init__(self):
        self.auth = shop_pb2_grpc.AuthStub(grpc.insecure_channel(f"{ADDRESS['auth']}:50051"))
        self.catalog = shop_pb2_grpc.CatalogStub(
            grpc.insecure_channel(f"{ADDRESS['catalog']}:50051"))
        self.orders = shop_pb2_grpc.OrdersStub(
            grpc.insecure_channel(f"{ADDRESS['orders']}:50051"))

    def GetItem(self, request, context):
        self.auth.Check(shop_pb2.Token(user=request.user))
        return self.catalog.GetItem(request)

    def PlaceOrder(self, request, context):
        self.auth.Check(shop_pb2.Token(user=request.user))
        return self.orders.Place(request)


class Auth(shop_pb2_grpc.AuthServicer):
    def Check(self, request, context):
        return shop_pb2.Verdict(allowed=True)


class Catalog(shop_pb2_grpc.CatalogServicer):
    def GetItem(self, request, context):
        key = f"item:{request.item}"
        name = cache().get(key)
        if name is None:
            with database().cursor() as cursor:
                cursor.execute("SELECT name FROM items WHERE id = %s", (request.item,))
                row = cursor.fetchone()
            name = (row[0] if row else "none").encode()
            cache().set(key, name, expire=3)
        return shop_pb2.Item(item=request.item, name=name.decode())


class Orders(shop_pb2_grpc.OrdersServicer):
    def Place(self, request, context):
        with database().cursor() as cursor:
            cursor.execute("INSERT INTO orders (item) VALUES (%s)", (request.item,))
            order = cursor.lastrowid
        return shop_pb2.Order(order=order)


server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
servicer = {"gateway": Gateway, "auth": Auth, "catalog": Catalog, "orders": Orders}[ROLE]()
add = getattr(shop_pb2_grpc, f"add_{type(servicer).__name__}Servicer_to_server")
add(servicer, server)
server.add_insecure_port(f"{ADDRESS[ROLE]}:50051")
server.start()
server.wait_for_termination()
