#!/usr/bin/env python3
"""One live snapshot request on a sprofil socket (docs/live.md's protocol: a 24-byte message,
then the answer's payload): prints the answer's bytes and the exchange's wall time in ms.
Usage: bench/live_snapshot.py SOCKET"""
import socket
import struct
import sys
import time

HEADER = struct.Struct("<4sIIIQ")  # magic, version, op or status, reserved, length


def read_exactly(s, n):
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(min(n - len(out), 1 << 20))
        if not chunk:
            raise SystemExit(f"answer cut short at {len(out)} of {n} bytes")
        out += chunk
    return out


def main():
    start = time.monotonic()
    try:
        length = exchange(sys.argv[1])
    except OSError as e:  # the process ended: its socket is gone
        raise SystemExit(f"{sys.argv[1]}: {e.strerror or e}")
    print(length, round((time.monotonic() - start) * 1000, 1))


def exchange(path):
    """One snapshot's exchange on socket `path`: the answer's payload bytes."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(path)
        s.sendall(HEADER.pack(b"SPLQ", 1, 1, 0, 0))
        magic, _, status, _, length = HEADER.unpack(read_exactly(s, HEADER.size))
        if magic != b"SPLA" or status != 0:
            raise SystemExit(f"bad answer: {magic!r} status {status}")
        read_exactly(s, length)
    return length


if __name__ == "__main__":
    main()
