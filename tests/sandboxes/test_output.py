from __future__ import annotations

from sandboxes.output import BoundedBuffer, OutputCollector, clip, sanitize


def test_sanitize_replaces_invalid_utf8_and_control_characters() -> None:
    text = sanitize(b"ok\x00\x1b[31mred\xff\xfe\r\nline\rbar\tend")
    assert "\x00" not in text and "\x1b" not in text
    assert text == "ok\ufffd\ufffd[31mred\ufffd\ufffd\nline\nbar\tend"


def test_short_output_is_untouched() -> None:
    assert clip(b"hello\n", 100) == ("hello\n", 0)


def test_clip_keeps_head_and_tail_and_states_the_clipped_size() -> None:
    data = b"H" * 500 + b"M" * 9000 + b"T" * 500
    text, clipped = clip(data, 1000)
    assert text.startswith("H" * 500) and text.endswith("T" * 500)
    assert "M" not in text
    assert clipped == 9000
    assert "9,000 of 10,000 bytes" in text


def test_collector_memory_stays_bounded_for_huge_streams() -> None:
    collector = OutputCollector(1000)
    collector.feed(b"start-")
    for _ in range(5000):
        collector.feed(b"x" * 10_000)
    collector.feed(b"-end")
    assert len(collector.head) + len(collector.tail) <= 2 * collector.window
    text, clipped = collector.render()
    assert text.startswith("start-") and text.endswith("-end")
    assert clipped == collector.total - 1000
    assert len(text) < 1200


def test_collector_matches_clip_when_nothing_was_dropped() -> None:
    data = "é".encode() * 700
    collector = OutputCollector(1000)
    collector.feed(data)
    assert collector.render() == clip(data, 1000)


def test_collector_never_splits_into_invalid_text_at_multibyte_boundaries() -> None:
    collector = OutputCollector(100)
    for _ in range(1000):
        collector.feed("日本語".encode())
    text, _ = collector.render()
    assert text.count("\ufffd") <= 2  # at most a cut character at each window edge


def test_bounded_buffer_reports_overflow() -> None:
    buffer = BoundedBuffer(4)
    buffer(b"abc")
    assert not buffer.overflow
    buffer(b"de")
    assert bytes(buffer.data) == b"abcd" and buffer.overflow
