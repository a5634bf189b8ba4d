"""Durable, append-only partition logs.

A partition is a directory of segment files ``<base-seq>-<base-offset>.log``. Each record
is ``length, crc32, sequence number, enqueued time, delivery-annotation position`` then
the encoded event. An event's offset is its byte position in the partition's logical
stream (segment base offset + position in the file), so offsets stay stable when old
segments are deleted by retention.

Appends go straight to the file descriptor with ``pwrite`` (no user-space buffer), so
once ``append`` returns the bytes are in the operating system and survive ``kill -9`` of
the emulator; ``fsync=True`` also makes them survive a power loss. On start-up each
segment is scanned and a torn or corrupt tail is truncated, so sequence numbers continue
exactly after the last complete record.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

_LOG = logging.getLogger(__name__)
_HEAD = struct.Struct(">II")  # body length, crc32 of (meta + body)
_META = struct.Struct(">qqI")  # sequence number, enqueued ms, delivery-annotation position
HEADER_SIZE = _HEAD.size + _META.size
_MAX_BODY = 64 * 1024 * 1024  # larger lengths can only come from a torn or corrupt header

# builder(sequence_number, offset, enqueued_ms) -> (event bytes, delivery-annotation position)
Builder = Callable[[int, int, int], tuple[bytes, int]]
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0)  # binary on Windows too
_datasync = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


def _pread(fd: int, size: int, offset: int) -> bytes:
    """Positioned read; falls back to seek+read where os.pread is missing (Windows).

    The log is only used from the event-loop thread, so seek+read cannot interleave.
    """
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    os.lseek(fd, offset, os.SEEK_SET)
    chunks, left = [], size
    while left > 0:
        chunk = os.read(fd, left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _pwrite(fd: int, data: bytes, offset: int) -> int:
    if hasattr(os, "pwrite"):
        return os.pwrite(fd, data, offset)
    os.lseek(fd, offset, os.SEEK_SET)
    return os.write(fd, data)


class StorageError(RuntimeError):
    """An append could not be made durable (disk full, I/O error)."""


@dataclass(frozen=True)
class Policy:
    """Storage settings. Retention applies per partition and never removes the newest segment."""

    segment_bytes: int = 8 * 1024 * 1024
    retention_bytes: int = 256 * 1024 * 1024
    retention_seconds: float = 24 * 3600.0
    fsync: bool = False


class Record(NamedTuple):
    """One stored event."""

    seq: int
    offset: int
    enqueued_ms: int
    body: bytes
    da_pos: int


class _Segment:
    """One segment file with its in-memory index (file position and time per record)."""

    def __init__(self, path: Path, base_seq: int, base_offset: int) -> None:
        self.path, self.base_seq, self.base_offset = path, base_seq, base_offset
        self.fd = os.open(path, _OPEN_FLAGS, 0o644)
        self.size = 0
        self.positions = array("q")
        self.times = array("q")

    @property
    def next_seq(self) -> int:
        return self.base_seq + len(self.positions)

    def end_of(self, index: int) -> int:
        """File position just after record ``index - 1`` (i.e. where record ``index`` starts)."""
        return self.positions[index] if index < len(self.positions) else self.size

    def load(self) -> bool:
        """Index the file; truncate a torn/corrupt tail. Return False if anything was cut."""
        data = _pread(self.fd, os.fstat(self.fd).st_size, 0)
        pos, expected = 0, self.base_seq
        while pos + HEADER_SIZE <= len(data):
            length, crc = _HEAD.unpack_from(data, pos)
            end = pos + HEADER_SIZE + length
            if length > _MAX_BODY or end > len(data):
                break
            if zlib.crc32(data[pos + _HEAD.size : end]) != crc:
                break
            seq, enqueued, _ = _META.unpack_from(data, pos + _HEAD.size)
            if seq != expected:
                break
            self.positions.append(pos)
            self.times.append(enqueued)
            pos, expected = end, expected + 1
        self.size = pos
        if pos != len(data):
            _LOG.warning(
                "truncating %s at byte %d (torn or corrupt tail of %d bytes)",
                self.path,
                pos,
                len(data) - pos,
            )
            os.ftruncate(self.fd, pos)
            return False
        return True

    def close(self) -> None:
        os.close(self.fd)


class PartitionLog:
    """The durable log of one partition."""

    def __init__(self, directory: Path, policy: Policy) -> None:
        self.directory, self.policy = Path(directory), policy
        self.directory.mkdir(parents=True, exist_ok=True)
        self.segments: list[_Segment] = []
        self._recover()
        self.last_time = max((s.times[-1] for s in self.segments if s.times), default=0)

    # ------------------------------------------------------------------ state

    @property
    def begin_seq(self) -> int:
        """Sequence number of the oldest retained event (next_seq when empty)."""
        return self.segments[0].base_seq

    @property
    def next_seq(self) -> int:
        """Sequence number the next appended event will get."""
        return self.segments[-1].next_seq

    @property
    def is_empty(self) -> bool:
        return self.begin_seq == self.next_seq

    @property
    def total_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def last(self) -> tuple[int, int, int] | None:
        """(sequence number, offset, enqueued ms) of the newest event, or None."""
        for seg in reversed(self.segments):
            if seg.positions:
                return seg.next_seq - 1, seg.base_offset + seg.positions[-1], seg.times[-1]
        return None

    # ------------------------------------------------------------------ recovery

    def _recover(self) -> None:
        found = []
        for path in self.directory.glob("*.log"):
            try:
                base_seq, base_offset = (int(p) for p in path.stem.split("-"))
            except ValueError:
                continue
            found.append((base_seq, base_offset, path))
        found.sort()
        intact = True
        for base_seq, base_offset, path in found:
            previous = self.segments[-1] if self.segments else None
            continuous = previous is None or (
                base_seq == previous.next_seq
                and base_offset == previous.base_offset + previous.size
            )
            if not intact or not continuous:
                # Everything after a cut or a gap would break sequence continuity.
                _LOG.warning("removing %s: it does not continue the log", path)
                path.unlink(missing_ok=True)
                continue
            seg = _Segment(path, base_seq, base_offset)
            intact = seg.load()
            self.segments.append(seg)
        if not self.segments:
            self.segments.append(self._new_segment(0, 0))

    def _new_segment(self, base_seq: int, base_offset: int) -> _Segment:
        seg = _Segment(
            self.directory / f"{base_seq:020d}-{base_offset:020d}.log", base_seq, base_offset
        )
        if self.policy.fsync:
            _fsync_dir(self.directory)
        return seg

    # ------------------------------------------------------------------ writing

    def append(self, builders: Sequence[Builder], now_ms: int) -> tuple[int, int]:
        """Append events atomically; return (first, last) sequence numbers.

        Enqueued times never go backwards within a partition, so time filters stay
        consistent with sequence order even if the wall clock steps back.
        """
        active = self.segments[-1]
        if active.size >= self.policy.segment_bytes:
            active = self._new_segment(active.next_seq, active.base_offset + active.size)
            self.segments.append(active)
        now_ms = max(now_ms, self.last_time)
        blob, positions = bytearray(), []
        pos, seq = active.size, active.next_seq
        for build in builders:
            body, da_pos = build(seq, active.base_offset + pos, now_ms)
            meta = _META.pack(seq, now_ms, da_pos)
            record = _HEAD.pack(len(body), zlib.crc32(body, zlib.crc32(meta))) + meta + body
            blob += record
            positions.append(pos)
            pos += len(record)
            seq += 1
        first = active.next_seq
        self._write(active, bytes(blob))
        active.positions.extend(positions)
        active.times.extend([now_ms] * len(positions))
        active.size = pos
        self.last_time = now_ms
        return first, seq - 1

    def _write(self, seg: _Segment, blob: bytes) -> None:
        written = 0
        try:
            while written < len(blob):
                written += _pwrite(seg.fd, blob[written:], seg.size + written)
            if self.policy.fsync:
                _datasync(seg.fd)
        except OSError as exc:
            try:  # leave no half record behind: the next start-up would cut it anyway
                os.ftruncate(seg.fd, seg.size)
            except OSError:
                pass
            raise StorageError(f"could not write to {seg.path}: {exc}") from exc

    # ------------------------------------------------------------------ reading

    def _segment_for(self, seq: int) -> _Segment:
        index = bisect_right([s.base_seq for s in self.segments], seq) - 1
        return self.segments[max(index, 0)]

    def read(self, seq: int, max_count: int, max_bytes: int = 4 * 1024 * 1024) -> list[Record]:
        """Read up to ``max_count`` events from ``seq`` (clamped to the oldest retained).

        One call reads from one segment with a single ``pread``.
        """
        seq = max(seq, self.begin_seq)
        if seq >= self.next_seq or max_count <= 0:
            return []
        seg = self._segment_for(seq)
        if seq >= seg.next_seq:  # only possible for an empty active segment
            return []
        i = seq - seg.base_seq
        j = min(len(seg.positions), i + max_count)
        start = seg.positions[i]
        while j > i + 1 and seg.end_of(j) - start > max_bytes:
            j = i + max(1, (j - i) // 2)
        data = _pread(seg.fd, seg.end_of(j) - start, start)
        records, pos = [], 0
        for k in range(i, j):
            length, _ = _HEAD.unpack_from(data, pos)
            rseq, enqueued, da_pos = _META.unpack_from(data, pos + _HEAD.size)
            body = data[pos + HEADER_SIZE : pos + HEADER_SIZE + length]
            records.append(Record(rseq, seg.base_offset + seg.positions[k], enqueued, body, da_pos))
            pos += HEADER_SIZE + length
        return records

    def seq_at_offset(self, offset: int, inclusive: bool) -> int:
        """First sequence number whose offset is > (or >=) ``offset``; next_seq if none."""
        for seg in self.segments:
            local = offset - seg.base_offset
            index = (
                bisect_left(seg.positions, local)
                if inclusive
                else bisect_right(seg.positions, local)
            )
            if index < len(seg.positions):
                return seg.base_seq + index
        return self.next_seq

    def seq_at_time(self, ms: int, inclusive: bool) -> int:
        """First sequence number enqueued after (or at) ``ms``; next_seq if none."""
        for seg in self.segments:
            index = bisect_left(seg.times, ms) if inclusive else bisect_right(seg.times, ms)
            if index < len(seg.times):
                return seg.base_seq + index
        return self.next_seq

    # ------------------------------------------------------------------ retention

    def enforce_retention(self, now_ms: int) -> int:
        """Delete the oldest whole segments beyond the size or age limit; return how many."""
        cutoff = now_ms - int(self.policy.retention_seconds * 1000)
        removed = 0
        while len(self.segments) > 1:
            oldest = self.segments[0]
            too_old = bool(oldest.times) and oldest.times[-1] < cutoff
            if not too_old and self.total_bytes <= self.policy.retention_bytes:
                break
            self.segments.pop(0)
            oldest.close()
            oldest.path.unlink(missing_ok=True)
            removed += 1
        return removed

    def close(self) -> None:
        for seg in self.segments:
            if self.policy.fsync:
                os.fsync(seg.fd)
            seg.close()
        self.segments = []


def _fsync_dir(directory: Path) -> None:
    """Make a new file's directory entry durable (POSIX; a no-op where unsupported)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
