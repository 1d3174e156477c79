from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from runtime.core.output import HeadTailBuffer


def test_short_output_is_kept_whole() -> None:
    buffer = HeadTailBuffer(16)
    buffer.write(b"hello ")
    buffer.write(b"world")
    result = buffer.result()
    assert (result.text, result.total_bytes, result.truncated) == ("hello world", 11, False)


def test_long_output_keeps_head_and_tail_and_says_what_was_dropped() -> None:
    buffer = HeadTailBuffer(10)
    for chunk in (b"ABCDE", b"-" * 1000, b"VWXYZ"):
        buffer.write(chunk)
    result = buffer.result()
    assert result.truncated
    assert result.total_bytes == 1010
    assert result.text == "ABCDE\n[... 1000 bytes of output dropped ...]\nVWXYZ"


def test_character_split_at_the_cut_becomes_a_replacement_not_an_error() -> None:
    buffer = HeadTailBuffer(5)  # head 2 bytes, tail 3: the tail starts mid-character
    buffer.write("ééééé".encode())
    assert "\ufffd" in buffer.result().text


@given(st.lists(st.binary(max_size=300), max_size=40), st.integers(min_value=2, max_value=200))
def test_buffer_matches_head_and_tail_of_the_whole(chunks: list[bytes], limit: int) -> None:
    buffer = HeadTailBuffer(limit)
    for chunk in chunks:
        buffer.write(chunk)
    whole = b"".join(chunks)
    head, tail = limit // 2, limit - limit // 2
    assert buffer.total_bytes == len(whole)
    if len(whole) <= limit:
        assert buffer.dropped_bytes == 0
        assert buffer.result().text == whole.decode("utf-8", errors="replace")
    else:
        assert buffer.dropped_bytes == len(whole) - limit
        expected_tail = whole[-tail:]
        result = buffer.result()
        assert result.text.startswith(whole[:head].decode("utf-8", errors="replace"))
        assert result.text.endswith(expected_tail.decode("utf-8", errors="replace"))
