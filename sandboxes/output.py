"""Bounded capture of command output: keep the head and the tail, count what was dropped.

Why: a command in a sandbox may print 50 MB (or never stop); an agent can only read a few
thousand characters, and holding everything in memory first would let one command exhaust
the host. :class:`OutputCollector` keeps a fixed number of bytes from each end while the
stream flows, and :func:`render` turns them into safe text with the clipped size stated.
"""

from __future__ import annotations

import re

# C0 control characters other than tab and newline, plus DEL: terminals interpret them,
# tokenizers choke on them, and JSONL logs grow escapes; they are shown as U+FFFD.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# UTF-8 encodes a character in at most 4 bytes, so this many bytes per kept character
# guarantees the byte windows hold enough text for the character budget.
_BYTES_PER_CHAR = 4


def sanitize(data: bytes) -> str:
    """Decode bytes of unknown encoding into printable text.

    Invalid UTF-8 becomes U+FFFD, CRLF and lone CR (progress bars) become newlines, and other
    control characters become U+FFFD, so binary garbage can never corrupt an observation.
    """
    text = data.decode("utf-8", errors="replace")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("\ufffd", text)


class OutputCollector:
    """Consumes a byte stream, keeping at most ``2 * window`` bytes whatever its length."""

    def __init__(self, limit_chars: int) -> None:
        self.limit_chars = limit_chars
        self.window = max(1, limit_chars) * _BYTES_PER_CHAR // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.window - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.window:
                del self.tail[: len(self.tail) - self.window]

    @property
    def dropped(self) -> int:
        """Bytes that reached neither window."""
        return self.total - len(self.head) - len(self.tail)

    def render(self) -> tuple[str, int]:
        """Return ``(text, clipped_bytes)``: at most ``limit_chars`` characters plus a note."""
        if self.dropped == 0:
            return clip(bytes(self.head + self.tail), self.limit_chars)
        head_text = sanitize(bytes(self.head))
        tail_text = sanitize(bytes(self.tail))
        return _join(head_text, tail_text, self.total, self.limit_chars)


def clip(data: bytes, limit_chars: int) -> tuple[str, int]:
    """Clip a complete output to ``limit_chars`` characters, keeping its head and tail."""
    text = sanitize(data)
    if len(text) <= limit_chars:
        return text, 0
    return _join(text, text, len(data), limit_chars)


def _join(head_text: str, tail_text: str, total_bytes: int, limit_chars: int) -> tuple[str, int]:
    keep_head = limit_chars // 2
    keep_tail = limit_chars - keep_head
    head = head_text[:keep_head]
    tail = tail_text[-keep_tail:] if keep_tail else ""
    kept = len(head.encode("utf-8")) + len(tail.encode("utf-8"))
    clipped = max(0, total_bytes - kept)
    note = (
        f"\n[... output clipped: {clipped:,} of {total_bytes:,} bytes not shown; "
        "redirect to a file and read parts of it (head, tail, grep) to see more ...]\n"
    )
    return head + note + tail, clipped


class BoundedBuffer:
    """A sink that keeps at most ``limit`` bytes and records whether more arrived."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.overflow = False

    def __call__(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        self.data += chunk[: max(room, 0)]
        self.overflow = self.overflow or len(chunk) > room
