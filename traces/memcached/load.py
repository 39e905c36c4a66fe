"""Load for the memcached capture: a fixed, counted mix of text or binary commands
against a real memcached, over one long-lived connection.

Prints what it sent, so that the README and the test can state what the capture must
give. Standard library only: the protocols are written out by hand on purpose, so that
every command the capture holds is one this file names.
"""

import socket
import struct
import sys

HOST, PORT = sys.argv[1], 11211
PROTOCOL = sys.argv[2]  # text or binary
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 200

counts = {"text calls": 0, "text one-way": 0, "binary calls": 0, "binary quiet": 0}


def read_line(sock, buffer):
    while b"\r\n" not in buffer:
        buffer += sock.recv(65536)
    line, _, rest = buffer.partition(b"\r\n")
    return line, rest


def read_exactly(sock, buffer, n):
    while len(buffer) < n:
        buffer += sock.recv(65536)
    return buffer[:n], buffer[n:]


def text_call(sock, buffer, command):
    """Sends one text command and reads its whole reply."""
    sock.sendall(command)
    counts["text calls"] += 1
    line, buffer = read_line(sock, buffer)
    if line.startswith(b"VA "):
        _, buffer = read_exactly(sock, buffer, int(line.split()[1]) + 2)
    elif line.startswith(b"VALUE") or line.startswith(b"STAT"):
        while line != b"END":
            if line.startswith(b"VALUE"):
                _, buffer = read_exactly(sock, buffer, int(line.split()[3]) + 2)
            line, buffer = read_line(sock, buffer)
    return buffer


def text_one_way(sock, command):
    sock.sendall(command)
    counts["text one-way"] += 1


def binary(opcode, opaque, key=b"", extras=b"", value=b""):
    body = len(key) + len(extras) + len(value)
    header = struct.pack(">BBHBBHIIQ", 0x80, opcode, len(key), len(extras), 0, 0, body, opaque, 0)
    return header + extras + key + value


def binary_reply(sock, buffer):
    header, buffer = read_exactly(sock, buffer, 24)
    magic, opcode, _, _, _, status, body, opaque, _ = struct.unpack(">BBHBBHIIQ", header)
    assert magic == 0x81, header
    _, buffer = read_exactly(sock, buffer, body)
    return opcode, opaque, buffer


def text_load():
    text = socket.create_connection((HOST, PORT))
    text_buffer = b""
    text_buffer = text_call(text, text_buffer, b"stats\r\n")
    for i in range(ROUNDS):
        value = b"v" * (10 + i % 50)
        text_buffer = text_call(text, text_buffer, b"set t%d 0 0 %d\r\n%s\r\n" % (i, len(value), value))
        text_buffer = text_call(text, text_buffer, b"get t%d t%d nothere\r\n" % (i, max(i - 1, 0)))
        text_buffer = text_call(text, text_buffer, b"mg t%d v t\r\n" % i)
        text_buffer = text_call(text, text_buffer, b"ms m%d 3 T60\r\nabc\r\n" % i)
        if i % 5 == 0:
            text_one_way(text, b"delete t%d noreply\r\n" % i)
            text_one_way(text, b"ms q%d 1 q\r\nx\r\n" % i)
            text_buffer = text_call(text, text_buffer, b"mn\r\n")
    text.close()


def binary_load():
    conn = socket.create_connection((HOST, PORT))
    buffer = b""
    opaque = 0
    for i in range(ROUNDS):
        key = b"b%d" % i
        opaque += 1
        conn.sendall(binary(0x01, opaque, key, struct.pack(">II", 0, 0), b"x" * (i % 30 + 1)))
        counts["binary calls"] += 1
        _, got, buffer = binary_reply(conn, buffer)
        assert got == opaque
        opaque += 1
        conn.sendall(binary(0x00, opaque, key))
        counts["binary calls"] += 1
        _, got, buffer = binary_reply(conn, buffer)
        assert got == opaque
        if i % 4 == 0:
            # A quiet get of a missing key has no reply; the no-op after it has one.
            opaque += 1
            conn.sendall(binary(0x09, opaque, b"missing%d" % i))
            counts["binary quiet"] += 1
            opaque += 1
            conn.sendall(binary(0x0A, opaque))
            counts["binary calls"] += 1
            _, got, buffer = binary_reply(conn, buffer)
            assert got == opaque
    conn.close()


(text_load if PROTOCOL == "text" else binary_load)()
for what, n in counts.items():
    if n:
        print(f"{PROTOCOL} client: {what}: {n}")
