"""The pipe between an isolated agent's sandbox and its harness: frames of a 4-byte
big-endian length and that many bytes of UTF-8 JSON, one object each.

Imported on both sides, so only the standard library. The harness reads every frame of
the child as hostile: a length past the limit, bytes that are not JSON, JSON that is not
an object are each a ProtocolViolation before anything is looked at
(runtime/worker/isolation/harness.py checks each message's fields, types and order).
"""

from __future__ import annotations

import json
import os
import struct

HEADER = struct.Struct(">I")


class ProtocolViolation(Exception):
    """The other side sent something the protocol does not allow."""


class PeerGone(Exception):
    """The pipe closed: the other side exited or was killed."""


def pack(message: dict) -> bytes:
    body = json.dumps(message, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    return HEADER.pack(len(body)) + body


def write(fd: int, message: dict) -> None:
    data = memoryview(pack(message))
    while data:
        data = data[os.write(fd, data) :]


class Reader:
    """Incremental frame reader over a file descriptor: feed() what the fd has, then take
    whole messages from messages(). `limit` bounds one frame's body, checked on its
    header before the body is read, so a giant frame costs nothing to refuse."""

    def __init__(self, fd: int, *, limit: int):
        self.fd = fd
        self.limit = limit
        self._buffer = bytearray()

    def feed(self) -> None:
        """One read of what the fd holds now (it is readable). PeerGone at end of file."""
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            raise PeerGone("the pipe closed")
        self._buffer += chunk
        if len(self._buffer) >= HEADER.size:
            self._check_header()

    def _check_header(self) -> None:
        (size,) = HEADER.unpack_from(self._buffer)
        if size > self.limit:
            raise ProtocolViolation(f"a frame of {size} bytes is over the limit of {self.limit}")

    def next(self) -> dict | None:
        """The next whole message, or None until more arrives."""
        if len(self._buffer) < HEADER.size:
            return None
        self._check_header()
        (size,) = HEADER.unpack_from(self._buffer)
        end = HEADER.size + size
        if len(self._buffer) < end:
            return None
        body = bytes(self._buffer[HEADER.size : end])
        del self._buffer[:end]
        try:
            message = json.loads(body.decode("utf-8"), parse_constant=_no_constants)
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise ProtocolViolation(f"a frame is not UTF-8 JSON: {type(exc).__name__}") from None
        if not isinstance(message, dict):
            raise ProtocolViolation("a frame is not a JSON object")
        return message

    def read_blocking(self) -> dict:
        """For the child: block until one whole message has arrived."""
        while True:
            message = self.next()
            if message is not None:
                return message
            self.feed()


def _no_constants(name: str):
    raise ValueError(f"{name} is not JSON")
