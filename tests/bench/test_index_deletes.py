"""``bench.index.deletes`` on a tiny index: the replace before (rewrite) and after (deletion
vectors) and ``index delete`` each measured, each undone (the next run sees the same index)."""

from __future__ import annotations


def test_a_tiny_deletes_run_measures_the_rewrite_and_the_vectors(tmp_path):
    from bench.index import deletes

    result = deletes.measure(3_000, 1_000, 30, 1, tmp_path)
    runs = result["runs"]
    assert result["ids"] == 30 and set(runs) == {"before", "after", "delete"}
    # before: the new part and 3 rewritten parts (data, key table, id table, marker each) and
    # the version
    assert runs["before"]["files"] == 4 * 4 + 1
    # after: the new part (4 files), a vector in each of the 3 parts, the version
    assert runs["after"]["files"] == 4 + 3 + 1
    assert runs["delete"]["files"] == 3 + 1
    assert runs["before"]["bytes"] > 10 * runs["after"]["bytes"]
    assert all(r["wall"] > 0 and r["cpu"] > 0 for r in runs.values())
    table = deletes.markdown(result, "cmd").splitlines()
    assert sum(line.startswith("| `") or line.startswith("| the same") for line in table) == 3
