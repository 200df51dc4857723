"""In-memory snapshots for command jobs: the files of worker/trainer/snapshot/snapshot_store.h.

One file per writer, ``<dir>/snapshot-<name>.bin``, in the directory the worker keeps for the
job (``BATON_SNAPSHOT_DIR``), with two slots: a write goes into the slot that does not hold
the newest complete snapshot, and a slot's sequence number is odd while it is written, so a
process killed mid-copy leaves its previous snapshot readable. Layout (host byte order):

    header (64 bytes): b"BSNAPS01", u64 slot capacity
    slot headers (64 bytes each, two): u64 seq, i64 generation, i64 step, u64 bytes
    slot 0 data, slot 1 data (capacity bytes each)

The payload is opaque here (the built-in trainer's own encoding, or torch.save's bytes from
the Python helper). Standard library only.
"""

import mmap
import os
import struct
from typing import List, NamedTuple, Optional

_MAGIC = b"BSNAPS01"
_HEADER = 64
_SLOT_HEADER = 64
_SLOTS_START = _HEADER + 2 * _SLOT_HEADER
_PAGE = 4096
_SLOT = struct.Struct("=QqqQ")  # seq, generation, step, bytes
_PREFIX, _SUFFIX = "snapshot-", ".bin"


class SnapshotRef(NamedTuple):
    path: str
    slot: int
    seq: int
    generation: int
    step: int
    size: int


def _capacity_of(buf) -> Optional[int]:
    if len(buf) < _SLOTS_START or bytes(buf[0:8]) != _MAGIC:
        return None
    capacity = struct.unpack_from("=Q", buf, 8)[0]
    return capacity if capacity <= (len(buf) - _SLOTS_START) // 2 else None


class Writer:
    """Writes snapshots into <directory>/snapshot-<name>.bin; keeps what the file holds."""

    def __init__(self, directory: str, name: str):
        if not name or not all(c.isalnum() or c in "._-" for c in name):
            raise ValueError("snapshot writer name %r is not [A-Za-z0-9._-]+" % name)
        self.path = os.path.join(directory, _PREFIX + name + _SUFFIX)
        self._file = None
        self._map = None
        try:
            f = open(self.path, "r+b")
            size = os.fstat(f.fileno()).st_size
            m = mmap.mmap(f.fileno(), size) if size > 0 else None
            if m is not None and _capacity_of(m) is not None:
                self._file, self._map = f, m
                return
            if m is not None:
                m.close()
            f.close()
        except FileNotFoundError:
            pass
        self._create(0)

    def _create(self, capacity: int) -> None:
        tmp = self.path + ".tmp"
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        f = os.fdopen(fd, "r+b")
        try:
            os.posix_fallocate(fd, 0, _SLOTS_START + 2 * capacity)
            m = mmap.mmap(fd, _SLOTS_START + 2 * capacity)
        except OSError:
            f.close()
            os.unlink(tmp)
            raise
        m[0:_SLOTS_START] = bytes(_SLOTS_START)
        m[0:8] = _MAGIC
        struct.pack_into("=Q", m, 8, capacity)
        os.replace(tmp, self.path)
        if self._map is not None:
            self._map.close()
            self._file.close()
        self._file, self._map = f, m

    def write(self, generation: int, step: int, payload: bytes) -> None:
        m = self._map
        capacity = _capacity_of(m)
        if len(payload) > capacity:
            capacity = (len(payload) + len(payload) // 4 + _PAGE - 1) // _PAGE * _PAGE
            self._create(capacity)
            m = self._map
        seqs = [_SLOT.unpack_from(m, _HEADER + s * _SLOT_HEADER)[0] for s in (0, 1)]
        complete = [q != 0 and q % 2 == 0 for q in seqs]
        newest_is_0 = complete[0] and (not complete[1] or seqs[0] > seqs[1])
        slot = 1 if newest_is_0 else 0
        nxt = (max(seqs) | 1) + 1
        at = _HEADER + slot * _SLOT_HEADER
        struct.pack_into("=Q", m, at, nxt - 1)  # Odd: in progress.
        start = _SLOTS_START + slot * capacity
        m[start:start + len(payload)] = payload
        struct.pack_into("=qqQ", m, at + 8, generation, step, len(payload))
        struct.pack_into("=Q", m, at, nxt)

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._file.close()
            self._map = None


def list_snapshots(directory: str) -> List[SnapshotRef]:
    """Every complete snapshot in `directory`'s files, newest first by (generation, step)."""
    refs = []
    try:
        names = os.listdir(directory)
    except OSError:
        return refs
    for name in names:
        if not (name.startswith(_PREFIX) and name.endswith(_SUFFIX)):
            continue
        path = os.path.join(directory, name)
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < _SLOTS_START:
                    continue
                with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as m:
                    capacity = _capacity_of(m)
                    if capacity is None:
                        continue
                    for slot in (0, 1):
                        seq, gen, step, n = _SLOT.unpack_from(m, _HEADER + slot * _SLOT_HEADER)
                        if seq and seq % 2 == 0 and 0 < n <= capacity:
                            refs.append(SnapshotRef(path, slot, seq, gen, step, n))
        except OSError:
            continue
    refs.sort(key=lambda r: (r.generation, r.step, r.seq), reverse=True)
    return refs


def read(ref: SnapshotRef) -> Optional[bytes]:
    """The payload of `ref`, or None when it was rewritten (or the file replaced) since."""
    try:
        with open(ref.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as m:
                capacity = _capacity_of(m)
                at = _HEADER + ref.slot * _SLOT_HEADER
                if capacity is None or ref.size > capacity or \
                        struct.unpack_from("=Q", m, at)[0] != ref.seq:
                    return None
                start = _SLOTS_START + ref.slot * capacity
                payload = bytes(m[start:start + ref.size])
                if struct.unpack_from("=Q", m, at)[0] != ref.seq:
                    return None
                return payload
    except OSError:
        return None
