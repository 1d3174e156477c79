"""A file's metadata: what is written is checked against the limits (each refusal names
its limit), and what ``siesta-fs`` reads back decodes whatever bytes a command stored."""

from __future__ import annotations

import pytest

from runtime.sandbox.metadata import (
    InvalidMetadata,
    MetadataLimits,
    MetadataTooLarge,
    check,
    decode,
    pairs,
)

LIMITS = MetadataLimits(max_keys=3, max_bytes=64)


def test_metadata_within_the_limits_passes() -> None:
    check({"author": "mish", "a b": "x y ~"}, LIMITS)
    check({}, LIMITS)


@pytest.mark.parametrize(
    ("metadata", "limit", "setting"),
    [
        ({"a": "1", "b": "2", "c": "3", "d": "4"}, 3, "SIESTA_FILES__MAX_METADATA_KEYS"),
        ({"k": "v" * 60}, 64, "SIESTA_FILES__MAX_METADATA_BYTES"),  # 9 + 1 + 60 bytes
        ({"k" * 247: ""}, 246, "246 bytes"),
    ],
)
def test_metadata_past_a_limit_is_refused_naming_it(
    metadata: dict[str, str], limit: int, setting: str
) -> None:
    with pytest.raises(MetadataTooLarge) as refused:
        check(metadata, LIMITS)
    assert refused.value.fields["limit"] == limit
    assert setting in str(refused.value)


@pytest.mark.parametrize("metadata", [{"": "v"}, {"k": "line\n"}, {"é": "v"}, {"k": "\x7f"}])
def test_keys_and_values_are_printable_ascii(metadata: dict[str, str]) -> None:
    with pytest.raises(InvalidMetadata):
        check(metadata, LIMITS)


def test_what_siesta_fs_reads_is_decoded_and_bytes_that_are_not_utf8_left_out() -> None:
    assert decode(b"") == {}
    assert decode(b"author=mish&note=a%3Db%26c%25&tab=%09") == {
        "author": "mish",
        "note": "a=b&c%",
        "tab": "\t",
    }
    assert decode(b"good=1&bad=%FF") == {"good": "1"}


def test_setmeta_takes_key_value_pairs_in_key_order() -> None:
    assert pairs({"b": "2", "a": "1"}) == ["a", "1", "b", "2"]
