"""The Thrift pair's client: ROUNDS rounds of Users.getUser (every tenth id raises
NotFound), a oneway Users.log, and Posts.timeline, each service on one connection.
Usage: client.py USERS_ADDRESS POSTS_ADDRESS ROUNDS"""
import os
import sys

sys.path.insert(0, os.environ["THRIFT_STUBS"])
from social import Posts, Users  # noqa: E402
from social.ttypes import NotFound  # noqa: E402
from thrift.protocol import TBinaryProtocol, TCompactProtocol  # noqa: E402
from thrift.transport import TSocket, TTransport  # noqa: E402

users_address, posts_address, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
users_transport = TTransport.TBufferedTransport(TSocket.TSocket(users_address, 9091))
users = Users.Client(TCompactProtocol.TCompactProtocol(users_transport))
posts_transport = TTransport.TFramedTransport(TSocket.TSocket(posts_address, 9090))
posts = Posts.Client(TBinaryProtocol.TBinaryProtocol(posts_transport))
users_transport.open()
posts_transport.open()
missing = 0
for n in range(1, rounds + 1):
    try:
        users.getUser(n)
    except NotFound:
        missing += 1
    users.log(f"round {n}")
    posts.timeline(n, n % 7)
users_transport.close()
posts_transport.close()
print(f"client: {rounds} getUser ({missing} NotFound), {rounds} log, {rounds} timeline",
      file=sys.stderr)
