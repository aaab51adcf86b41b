"""Reading a docker exec's output frames: whole, or an infrastructure error."""

from __future__ import annotations

import io
import struct

import pytest

from sandboxes.docker_exec import read_frames
from sandboxes.errors import InfraError


def test_an_output_stream_cut_inside_a_frame_is_an_infra_error() -> None:
    frame = struct.Struct(">BxxxL")
    stream = frame.pack(1, 6) + b"hello\n" + frame.pack(1, 10) + b"cut"
    frames = read_frames(io.BytesIO(stream))
    assert next(frames) == (1, b"hello\n")
    with pytest.raises(InfraError, match="cut a command's output stream short"):
        next(frames)
    with pytest.raises(InfraError):
        next(read_frames(io.BytesIO(frame.pack(1, 6)[:5])))  # inside a frame's header
    assert list(read_frames(io.BytesIO(stream[:14]))) == [(1, b"hello\n")]  # a clean end
