#!/usr/bin/env python3
"""Writes the binary seed corpora of the fuzz targets (tools/fuzz/fuzz.bzl).

Usage: tools/fuzz/make_seed_corpus.py   (from anywhere; rewrites the files it owns)

Every seed is a small valid input (plus a few near-misses), deterministic, so the committed
files are exactly what this script writes. Text seeds (YAML, metric lines, proto text) and
the two JPEG seeds (written once with stb_image_write, 4x3 RGB and 2x2 grey at quality 50)
are committed as they are; inputs that once found a bug are committed by hand, named
`regression-*`, and this script never touches them.
"""

import io
import os
import struct
import zipfile
import zlib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
FORMATS = os.path.join(ROOT, "worker/trainer/data/formats/fuzz_corpus")
CHECKPOINT = os.path.join(ROOT, "worker/trainer/checkpoint/fuzz_corpus/checkpoint")
COORDINATOR = os.path.join(ROOT, "coordinator/control/fuzz_corpus/coordinator")

# coordinator_fuzz programs: each step is [opcode, worker] + operands, as Harness::Step reads
# them (coordinator/control/coordinator_fuzz.cc). Job 0 at its current generation is
# "0, 1"; a rank is "rank + 1".
def submit(min_workers, slots=1):
    return [1, 0, 1, min_workers, 0, slots - 1, 1, 1, 1]


def connect(worker, slots=2):
    return [0, worker, 1, slots, 0, 1, 1, 0, 1]


def reconcile(advance=1):
    return [5, 0, advance]


def port_reserved(worker):
    return [9, worker, 0, 1, 1, 0, 1]


def started(worker):
    return [9, worker, 0, 1, 1, 1, 1]


def metrics(worker, rank, step_byte):
    return [9, worker, 0, 1, rank + 1, 3, step_byte, 16]


def exited(worker, rank, code):
    return [9, worker, 0, 1, rank + 1, 2, code + 1, 1]


ONE_WORKER_RUN = (submit(1) + connect(0) + reconcile() + port_reserved(0) + started(0) +
                  metrics(0, 0, 5) + [8, 0, 1])
TWO_WORKER_RUN = (submit(2) + connect(0) + connect(1) + reconcile() + port_reserved(0) +
                  started(0) + started(1) + metrics(1, 1, 3))


def write(directory, name, data):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def idx(dims, data):
    return bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + data


def png(width, height, color_type, channels, bit_depth=8):
    raw = b"".join(
        b"\x00" + bytes((x * 40 + y * 90 + c * 13) % 256 for x in range(width) for c in range(channels))
        for y in range(height))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) +
            chunk(b"IEND", b""))


def sealed_checkpoint(members):
    """A ZIP of `members` sealed as checkpoint_file.h describes (CRC-32 trailer as comment)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, data in members:  # A fixed date keeps the bytes the same on every run.
            archive.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    body = bytearray(buffer.getvalue())
    assert body[-22:-18] == b"PK\x05\x06" and body[-2:] == b"\x00\x00"
    body[-2:] = struct.pack("<H", 20)
    trailer = b"BTNCKPT1" + struct.pack("<Q", len(body)) + struct.pack("<I", zlib.crc32(bytes(body)))
    return bytes(body) + trailer


def main():
    write(FORMATS + "/idx", "images_2x3x3", idx([2, 3, 3], bytes(range(18))))
    write(FORMATS + "/idx", "labels_4", idx([4], bytes([0, 9, 3, 1])))
    write(FORMATS + "/idx", "empty_4d", idx([0, 1, 2, 3], b""))
    write(FORMATS + "/cifar10", "one_record", bytes([1]) + bytes(i % 256 for i in range(3072)))
    write(FORMATS + "/cifar10", "two_records",
          bytes([9]) + bytes(3072) + bytes([0]) + bytes(255 - i % 256 for i in range(3072)))
    write(FORMATS + "/token_file", "one_token", struct.pack("<H", 50256))
    write(FORMATS + "/token_file", "ten_tokens", struct.pack("<10H", *range(0, 65530, 6553)))
    write(FORMATS + "/token_file", "odd_length", b"\x01\x02\x03")
    write(FORMATS + "/image", "rgb_4x3.png", png(4, 3, 2, 3))
    write(FORMATS + "/image", "gray_alpha_2x2.png", png(2, 2, 4, 2))
    write(FORMATS + "/image", "gray16_3x1.png", png(3, 1, 0, 2, bit_depth=16))
    # Checkpoint target inputs: "<file name>\n<contents>".
    write(CHECKPOINT, "sealed", b"ckpt-00000010-g2.pt\n" +
          sealed_checkpoint([("archive/data.pkl", b"\x80\x02}q\x00."), ("archive/version", b"3\n")]))
    write(CHECKPOINT, "legacy_name", b"ckpt-00000007.pt\n" + sealed_checkpoint([("a", b"")]))
    write(CHECKPOINT, "start_record",
          b"gen-00000003.start\nbaton-generation-start-v1\njob j-000001\ngeneration 3\n"
          b"resumed_step 120\n")
    write(COORDINATOR, "succeeds", bytes(ONE_WORKER_RUN + exited(0, 0, 0) + reconcile(2)))
    write(COORDINATOR, "fails_and_restarts",
          bytes(ONE_WORKER_RUN + exited(0, 0, 1) + reconcile(3) + reconcile(3) + port_reserved(0)))
    write(COORDINATOR, "coordinator_restart",
          bytes(TWO_WORKER_RUN + [6, 0] + reconcile(1) + connect(0) + connect(1) + reconcile(4)))
    write(COORDINATOR, "worker_lost",
          bytes(TWO_WORKER_RUN + [3, 1] + reconcile(4) + [4, 0] + reconcile(5)))
    write(CHECKPOINT, "temporary", b"ckpt-00000010-g2.pt.tmp.4242\npartial")


if __name__ == "__main__":
    main()
