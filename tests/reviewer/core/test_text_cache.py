"""Parses of texts read at every review are remembered, long texts never (bounded memory)."""

from __future__ import annotations

from dsh_github_reviewer.core.text_cache import short_text_cache


def test_short_texts_are_computed_once_and_long_ones_every_time():
    calls: list[str | None] = []

    @short_text_cache(max_chars=5, maxsize=8)
    def first_word(text: str | None, upper: bool = False) -> str:
        calls.append(text)
        word = (text or "").split(" ", 1)[0]
        return word.upper() if upper else word

    assert [first_word("ab c") for _ in range(3)] == ["ab"] * 3
    assert first_word("ab c", True) == "AB"
    assert [first_word("abcdef g") for _ in range(2)] == ["abcdef"] * 2
    assert first_word(None) == ""
    assert calls == ["ab c", "ab c", "abcdef g", "abcdef g", None]
