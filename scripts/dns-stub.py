#!/usr/bin/env python3
"""A DNS server that knows one name, for scripts/check-static-binary.sh.

Answers UDP queries on ADDRESS:PORT: an `A` query for NAME with 127.0.0.1, any other query
for NAME with no answer (NOERROR: an `AAAA` asked beside the `A`), any other name NXDOMAIN.
Prints `ready` once listening and counts the queries it answered for NAME to stderr, so that
the check can tell a lookup that went through DNS from one answered elsewhere.

Usage: scripts/dns-stub.py ADDRESS PORT NAME
"""

import socket
import struct
import sys


def question(packet):
    """The queried name (lower case, dotted), its type, and where the question ends."""
    labels, at = [], 12
    while packet[at]:
        length = packet[at]
        labels.append(packet[at + 1 : at + 1 + length].decode("ascii").lower())
        at += 1 + length
    qtype = struct.unpack("!H", packet[at + 1 : at + 3])[0]
    return ".".join(labels), qtype, at + 5


def answer(packet, name):
    asked, qtype, end = question(packet)
    ident, flags = struct.unpack("!HH", packet[:4])
    known = asked == name
    # QR, the query's opcode and RD, RA; rcode 0 or 3 (NXDOMAIN).
    reply_flags = 0x8000 | (flags & 0x7900) | 0x0080 | (0 if known else 3)
    answers = b""
    if known and qtype == 1:
        # The name by pointer to the question (offset 12), type A, class IN, ttl 5, 4 bytes.
        answers = struct.pack("!HHHIH", 0xC00C, 1, 1, 5, 4) + socket.inet_aton("127.0.0.1")
    header = struct.pack("!HHHHHH", ident, reply_flags, 1, 1 if answers else 0, 0, 0)
    return header + packet[12:end] + answers, known


def main():
    address, port, name = sys.argv[1], int(sys.argv[2]), sys.argv[3].lower().rstrip(".")
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind((address, port))
    print("ready", flush=True)
    answered = 0
    while True:
        packet, client = server.recvfrom(512)
        try:
            reply, known = answer(packet, name)
        except (IndexError, struct.error, UnicodeDecodeError):
            continue
        server.sendto(reply, client)
        if known:
            answered += 1
            print(f"answered {answered} for {name}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
