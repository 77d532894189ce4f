"""Hypothesis strategies, in one place."""

from hypothesis import strategies as st

#: Words from a small alphabet so that random texts share shingles.
word = st.sampled_from(["alpha", "beta", "gamma", "delta", "Ünï", "σας", "日本", "x_y", "42", "ǅ"])
separator = st.sampled_from([" ", ", ", ".\n", " -- ", "\t", "!? ", "\u00a0", "\u200b"])


@st.composite
def texts(draw: st.DrawFn, max_words: int = 40) -> str:
    """Texts of 0..max_words words with assorted punctuation, case and scripts."""
    n = draw(st.integers(0, max_words))
    parts = []
    for _ in range(n):
        w = draw(word)
        parts.append(w.upper() if draw(st.booleans()) else w)
        parts.append(draw(separator))
    return draw(st.sampled_from(["", " ", "("])) + "".join(parts)


#: Any text, including odd code points (no lone surrogates: they cannot be UTF-8 encoded).
any_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=200)

#: Document ids.
ids = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=1, max_size=6)

#: Characters where tokenising is easy to get wrong: case mappings that change length ("İ",
#: "ẞ"), that leave ASCII-land or enter it (Kelvin sign), Greek sigma (final sigma depends on
#: the neighbours), combining marks, non-ASCII spaces and punctuation, 2-, 3- and 4-byte UTF-8,
#: emoji with joiners, digits of other scripts, and ASCII.
tricky_char = st.sampled_from(
    list("ΣσςΑΒİıIiẞßK\u212a\u0307\u0301ǅǄǆﬃŉΐ·'’.:—…«»\u00a0\u2009\u3000\u200b\u2028")
    + list("日本語한국어مرحباЖжЁё𝔘𝔫𝔦𝟘٣੩🙂👩\u200d💻🇫🇷_- \n\tabcXYZ019")
)

#: Texts drawn from ``tricky_char`` and from every Unicode category but lone surrogates.
tricky_text = st.lists(
    st.one_of(tricky_char, st.characters(exclude_categories=["Cs"])), max_size=120
).map("".join)
