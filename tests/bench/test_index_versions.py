"""``bench.index.versions`` at a tiny size: both layouts on both filesystems, an open's calls
counted, and an open of the grouped log listing a name per group (not per version)."""

from bench.index.versions import run


def test_a_tiny_run_counts_the_calls_of_an_open_in_both_layouts() -> None:
    rows = run([5, 2500], 1, ["file", "memory"])
    assert [(r["fs"], r["layout"], r["versions"]) for r in rows] == [
        (fs, layout, n) for fs in ("file", "memory") for layout in ("flat", "grouped")
        for n in (5, 2500)
    ]  # fmt: skip
    for r in rows:
        assert r["version"] == r["versions"] and r["open_s"] >= 0
        if r["layout"] == "flat":
            assert r["listed"] == r["versions"]  # the whole log
        else:  # _index/log/ (a name per group) and the newest group; no parts/ here
            assert r["listed"] == {5: 1 + 5, 2500: 3 + 501}[r["versions"]]
            assert r["requests"] == 4
