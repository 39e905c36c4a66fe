"""Seeds for the framer fuzz targets, cut from the shipped captures: every TCP
connection to PORT in a capture becomes one input in blackbox::fuzzing::framer's format
(control byte: 0 from the client, 1 from the server; two-byte length; payload).
Usage: python3 fuzz/seeds.py CAPTURE PORT OUT_DIR"""
import os
import struct
import sys

capture, port, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.makedirs(out, exist_ok=True)
data = open(capture, "rb").read()
assert struct.unpack("<I", data[:4])[0] == 0xA1B2C3D4, "little-endian microsecond pcap"
link = struct.unpack("<I", data[20:24])[0]
assert link == 1, "Ethernet"
conversations = {}
at = 24
while at + 16 <= len(data):
    _, _, caplen, _ = struct.unpack("<IIII", data[at:at + 16])
    frame = data[at + 16:at + 16 + caplen]
    at += 16 + caplen
    if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
        continue
    ip = frame[14:]
    ihl = (ip[0] & 15) * 4
    total = struct.unpack(">H", ip[2:4])[0]
    tcp = ip[ihl:total]
    sport, dport = struct.unpack(">HH", tcp[:4])
    payload = tcp[(tcp[12] >> 4) * 4:]
    if not payload or port not in (sport, dport):
        continue
    client = (ip[12:16], sport) if dport == port else (ip[16:20], dport)
    record = bytes([int(sport == port)]) + struct.pack("<H", len(payload)) + payload
    conversations.setdefault(client, []).append(record)
for index, records in enumerate(conversations.values()):
    with open(os.path.join(out, f"{os.path.basename(capture)}-{index}"), "wb") as f:
        f.write(b"".join(records)[:16384])
print(f"{len(conversations)} seeds in {out}")
