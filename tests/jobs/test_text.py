"""Texts from outside, cleaned before they are stored or shown."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from armada_core.jobs.text import TRUNCATED, clean_text, key_in_path, shorten


def test_control_characters_go_tab_and_newline_stay() -> None:
    assert clean_text("a\x00b\x07c\td\ne\x1bf\x7fg\x85h", 100) == "abc\td\nefgh"
    assert clean_text("one\r\ntwo\rthree", 100) == "one\ntwo\nthree"


def test_a_long_text_is_cut_with_a_marker() -> None:
    out = clean_text("x" * 100_000, 4096)
    assert len(out) == 4096 and out.endswith(TRUNCATED)
    assert clean_text("x" * 10, 10) == "x" * 10


def test_text_that_is_not_utf8_is_replaced_not_refused() -> None:
    assert clean_text(b"ok \xff", 10) == "ok \ufffd"  # type: ignore[arg-type]


def test_unpaired_surrogates_are_removed() -> None:
    assert clean_text("a\ud800b", 10) == "ab"
    assert clean_text("a\ud800b", 10).encode("utf-8") == b"ab"


@settings(derandomize=True, deadline=None, max_examples=300)
@given(text=st.text(), limit=st.integers(0, 50))
def test_cleaned_text_is_bounded_and_storable(text: str, limit: int) -> None:
    out = clean_text(text, limit)
    assert len(out) <= max(limit, len(TRUNCATED))
    assert "\x00" not in out
    assert all(c in "\t\n" or not (ord(c) < 32 or 0x7F <= ord(c) <= 0x9F) for c in out)
    out.encode("utf-8")  # never raises


def test_shorten_names_a_value_without_echoing_all_of_it() -> None:
    assert shorten("abc") == "'abc'"
    long = shorten("y" * 10_000_000)
    assert len(long) < 150 and "10000000 characters" in long


def test_a_key_in_a_field_path_is_one_short_escaped_word() -> None:
    assert key_in_path("example.com/team") == "example.com/team"
    assert key_in_path("zone\x00") == "zone\\x00"
    assert key_in_path("k" * 10_000_000) == "k" * 60 + "..."
    assert key_in_path("\x01" * 100) == "\\x01" * 15 + "..."
