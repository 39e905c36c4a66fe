"""Runs one of the gRPC shop's programs (../grpc/services.py or ../grpc/load.py) with
request ids carried and logged: `traced.py SCRIPT ARGS...`, the program unchanged.

- Every gRPC call carries its request's id as `x-request-id` metadata: a call made
  while a thread serves a call carries the id that call brought; a call made outside
  any (load.py's) starts a new request with a new id (`PREFIX-N`, PREFIX from $TRACE_PREFIX).
- memcached and MariaDB cannot carry ids, so each of their calls (and memcached's
  one-way `set` messages) is logged, with the id of the request the thread serves,
  to $CALL_LOG: one `client>server  operation  id` line per call, in the order each connection carried them (a worker thread owns
  its connections, so a connection carries one call at a time). truth.py matches
  these lines to the captured calls.
"""
import collections
import itertools
import os
import runpy
import sys
import threading

import grpc

local = threading.local()
prefix = os.environ.get("TRACE_PREFIX", "r")
numbers = itertools.count(1)
log_path = os.environ.get("CALL_LOG")
log = open(log_path, "a", buffering=1) if log_path else None
log_lock = threading.Lock()


def current():
    return getattr(local, "trace", None)


def write(sock, server, operation):
    if log is None or sock is None:
        return
    address, port = sock.getsockname()[:2]
    with log_lock:
        log.write(f"{address}:{port}>{server[0]}:{server[1]}\t{operation}\t{current() or '-'}\n")


class Details(collections.namedtuple(
        "Details", ("method", "timeout", "metadata", "credentials", "wait_for_ready",
                    "compression")), grpc.ClientCallDetails):
    pass


class CarryId(grpc.UnaryUnaryClientInterceptor):
    def intercept_unary_unary(self, continuation, details, request):
        trace = current() or f"{prefix}-{next(numbers)}"
        metadata = [m for m in (details.metadata or []) if m[0] != "x-request-id"]
        metadata.append(("x-request-id", trace))
        return continuation(Details(details.method, details.timeout, metadata,
                                    details.credentials,
                                    getattr(details, "wait_for_ready", None),
                                    getattr(details, "compression", None)), request)


class TakeId(grpc.ServerInterceptor):
    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        behaviour = handler.unary_unary

        def serve(request, context):
            local.trace = dict(context.invocation_metadata()).get("x-request-id")
            try:
                return behaviour(request, context)
            finally:
                local.trace = None
        return handler._replace(unary_unary=serve)


insecure_channel, server = grpc.insecure_channel, grpc.server
grpc.insecure_channel = lambda *a, **k: grpc.intercept_channel(insecure_channel(*a, **k), CarryId())
grpc.server = lambda *a, **k: server(*a, interceptors=[TakeId(), *k.pop("interceptors", [])], **k)

try:
    from pymemcache.client.base import Client

    def logging(method, operation):
        def logged(self, *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            finally:
                write(self.sock, self.server, operation)
        return logged
    # A `set` goes with noreply: a one-way message, logged all the same.
    Client.get, Client.set = logging(Client.get, "get"), logging(Client.set, "set")
except ImportError:
    pass

try:
    import pymysql.connections
    from pymysql.constants import COMMAND

    execute = pymysql.connections.Connection._execute_command

    def logged_execute(self, command, sql):
        result = execute(self, command, sql)
        if command == COMMAND.COM_QUERY:
            text = sql.decode(errors="replace") if isinstance(sql, bytes) else sql
            write(self._sock, (self.host, self.port), text.split(None, 1)[0].upper())
        return result
    pymysql.connections.Connection._execute_command = logged_execute
except ImportError:
    pass

script = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
