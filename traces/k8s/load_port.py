"""Runs the shop's load.py (../shop/load.py, unchanged) against a web server on a port
other than 80: `load_port.py HOST:PORT SECONDS THREADS [LOG]`.

load.py opens its connections as `http.client.HTTPConnection(WEB, 80, ...)`; here that
class is replaced by one that connects to PORT when asked for port 80, so the clients,
their seeds and their log lines (`client>HOST:PORT ...`, from the socket's own view)
are load.py's own."""
import http.client
import os
import runpy
import sys

host, _, port = sys.argv[1].rpartition(":")
PORT = int(port)


class Connection(http.client.HTTPConnection):
    def __init__(self, host, port=None, *args, **kwargs):
        super().__init__(host, PORT if port in (None, 80) else port, *args, **kwargs)


http.client.HTTPConnection = Connection
load = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "shop", "load.py")
sys.argv = [load, host, *sys.argv[2:]]
runpy.run_path(load, run_name="__main__")
