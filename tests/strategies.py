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
