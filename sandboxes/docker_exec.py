"""One ``docker exec``'s I/O: its standard input sent, its output frames read whole.

Why not docker-py's own reader (``docker.utils.socket.frames_iter`` on the socket that
``exec_start(socket=True)`` returns): that socket lies beneath the HTTP response's buffered
reader, which reads ahead while parsing the response's headers and may already hold the
first frames of output (docker/docker-py#3332). A client that reads the response late — a
loaded host, a busy interpreter — then lost a short output whole, exit code 0, and a long
one's start, the frames after it misparsed. Here the frames are read from the buffered
reader, and a stream that ends inside a frame is an :class:`InfraError`, never a short
result.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from typing import Any, BinaryIO

from .errors import InfraError

# The header of a frame of an exec's output stream (see read_frames), and stderr's stream number.
_FRAME_HEADER = struct.Struct(">BxxxL")
_STDERR = 2


class ExecStream(threading.Thread):
    """Runs one started exec's I/O: sends its stdin, reads its output frames into sinks.

    On a thread so that the caller can bound the wait. The exec takes over ("hijacks") an
    HTTP connection of its own, which never returns to the client's pool: it is closed here
    when the output ends, and :meth:`cancel` ends a read that would block forever.
    """

    def __init__(
        self,
        api: Any,
        exec_id: str,
        sinks: tuple[Any, ...],
        *,
        merge: bool,
        stdin: bytes | None,
    ) -> None:
        super().__init__(daemon=True, name="aem-sandbox-exec")
        self.api, self.exec_id, self.sinks, self.merge, self.stdin = (
            api,
            exec_id,
            sinks,
            merge,
            stdin,
        )
        self.error: BaseException | None = None
        self._socket: Any = None

    def run(self) -> None:
        try:
            self._socket = self.api.exec_start(self.exec_id, socket=True)
            # Blocking: the caller bounds the wait, and a quiet command is not a dead engine.
            _raw_socket(self._socket).settimeout(None)
            if self.stdin is not None:
                self._send(self.stdin)
            for stream, chunk in read_frames(_response_reader(self._socket)):
                self.sinks[1 if stream == _STDERR and not self.merge else 0](chunk)
        except Exception as exc:  # reported to the caller's thread
            self.error = exc
        finally:
            self._release()

    def _send(self, data: bytes) -> None:
        """Write ``data`` and half-close the connection: the process then reads end of file.

        A process that exits early makes the engine drop the connection; the send error is
        then moot, its exit code and output say what happened.
        """
        raw = _raw_socket(self._socket)
        with contextlib.suppress(OSError):
            raw.sendall(data)
            raw.shutdown(socket.SHUT_WR)

    def cancel(self) -> None:
        """Shut the connection down, so that a blocked read returns (and the thread ends)."""
        sock = self._socket
        if sock is not None:
            with contextlib.suppress(OSError):
                _raw_socket(sock).shutdown(socket.SHUT_RDWR)

    def _release(self) -> None:
        """Close the HTTP response first (it holds a file on the socket), then the socket."""
        sock, self._socket = self._socket, None
        if sock is None:
            return
        raw, response = _raw_socket(sock), getattr(sock, "_response", None)
        with contextlib.suppress(Exception):
            if response is not None:
                response.close()
        with contextlib.suppress(OSError):
            raw.close()


def read_frames(reader: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """The (stream, payload) frames of a non-TTY exec's output, read from ``reader`` until
    the engine closes the stream; one that ends inside a frame lost output.

    Docker's stream format: each frame is an 8-byte header (the stream: 1 stdout, 2
    stderr; three zero bytes; the payload's length, big-endian) and the payload.
    """
    while header := reader.read(_FRAME_HEADER.size):
        if len(header) == _FRAME_HEADER.size:
            stream, size = _FRAME_HEADER.unpack(header)
            payload = reader.read(size)
            if payload is not None and len(payload) == size:
                yield stream, payload
                continue
        raise InfraError("engine", "the engine cut a command's output stream short")


def _response_reader(sock: Any) -> BinaryIO:
    """The buffered reader of the HTTP response that ``exec_start(socket=True)`` turned into
    ``sock``: it may hold the first frames already, so they are read from it, never ``sock``."""
    return sock._response.raw._fp.fp


def _raw_socket(sock: Any) -> Any:
    """The OS socket behind what ``exec_start(socket=True)`` returns (a ``SocketIO`` or it)."""
    return getattr(sock, "_sock", sock)
