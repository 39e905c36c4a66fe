"""The Thrift pair's servers: `python3 servers.py users ADDRESS` serves Users on :9091
with the compact protocol, unframed (buffered transport); `python3 servers.py posts
ADDRESS` serves Posts on :9090 with the binary protocol on the framed transport."""
import os
import sys

sys.path.insert(0, os.environ["THRIFT_STUBS"])
from social import Posts, Users  # noqa: E402
from social.ttypes import NotFound  # noqa: E402
from thrift.protocol import TBinaryProtocol, TCompactProtocol  # noqa: E402
from thrift.server import TServer  # noqa: E402
from thrift.transport import TSocket, TTransport  # noqa: E402

role, address = sys.argv[1], sys.argv[2]


class UsersHandler:
    def getUser(self, id):
        if id % 10 == 0:
            raise NotFound(what=f"user {id}")
        return f"user-{id}"

    def log(self, line):
        pass


class PostsHandler:
    def timeline(self, user, count):
        return [f"post {user}.{n}" for n in range(count)]


if role == "users":
    processor = Users.Processor(UsersHandler())
    socket = TSocket.TServerSocket(host=address, port=9091)
    transport = TTransport.TBufferedTransportFactory()
    protocol = TCompactProtocol.TCompactProtocolFactory()
else:
    processor = Posts.Processor(PostsHandler())
    socket = TSocket.TServerSocket(host=address, port=9090)
    transport = TTransport.TFramedTransportFactory()
    protocol = TBinaryProtocol.TBinaryProtocolFactory()
TServer.TThreadedServer(processor, socket, transport, protocol).serve()
