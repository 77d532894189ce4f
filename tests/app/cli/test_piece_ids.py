"""A cut piece's id ``ID#K`` never equals another row's id (issue 23): a run whose inputs hold
an id cut mode could give a piece of another row is refused in pass 1 (exit 2, naming both),
before anything is written; otherwise every id of the output is unique."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.app.cli.dedup import run_dedup
from neardup.app.cli.options import DedupOptions, DedupParams
from neardup.core.engine import (
    CorpusError,
    DecontMode,
    DecontParams,
    piece_collision,
    piece_source,
)
from tests.app.cli.test_cli import neardup

SHELL = "Tom found a shiny red shell by the river and carried it home to show his sister."
M = "Tom found a shiny red shell by the river and carried it home"


def text(i: int) -> str:
    """A contaminated text cut into two pieces (window 5): words of its own each side of M."""
    own = " ".join(f"w{i}x{j}" for j in range(12))
    return f"{own} {M} {own}"


def write(path, ids):
    rows = [{"id": doc_id, "text": text(i)} for i, doc_id in enumerate(ids)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


@st.composite
def id_sets(draw, min_size=0):
    """Random ids of a small alphabet, some of them another's id with ``#K`` (K a piece number
    or not one: 0, 01, x), in random order."""
    base = draw(st.lists(st.text(alphabet="ab#120", min_size=1, max_size=4), min_size=min_size,
                         max_size=5, unique=True))  # fmt: skip
    if not base:
        return []
    suffixes = st.sampled_from(["1", "2", "9", "10", "11", "0", "01", "x"])
    derived = draw(st.lists(st.tuples(st.sampled_from(base), suffixes), max_size=3))
    found = list(dict.fromkeys([*base, *(f"{b}#{k}" for b, k in derived)]))
    return draw(st.permutations(found))


def brute_collision(found: list[str], max_pieces: int) -> bool:
    known = set(found)
    return any(f"{s}#{k}" in known for s in found for k in range(1, max_pieces + 1))


@given(id_sets(), st.integers(1, 12))
def test_piece_collision_finds_exactly_the_ids_a_piece_could_take(found, max_pieces):
    collision = piece_collision(found, max_pieces)
    assert (collision is not None) == brute_collision(found, max_pieces)
    if collision is not None:
        piece, source = collision
        assert source in found and piece in found
        assert piece_source(piece, max_pieces) is not None
        assert piece_source(piece, max_pieces)[0] == source


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(id_sets(min_size=1))
def test_a_cut_run_writes_unique_ids_or_refuses_before_writing(tmp_path_factory, found):
    tmp = tmp_path_factory.mktemp("pieces")
    (tmp / "evals.jsonl").write_text(json.dumps({"id": "q1", "question": SHELL}) + "\n")
    write(tmp / "in.jsonl", found)
    options = DedupOptions(
        inputs=(str(tmp / "in.jsonl"),), output=str(tmp / "out.jsonl"),
        protected=(str(tmp / "evals.jsonl"),), quiet=True,
        params=DedupParams(decont=DecontParams(DecontMode.CUT, window=5, min_piece=1)),
    )  # fmt: skip
    if brute_collision(found, 10):
        with pytest.raises(CorpusError, match="is the id cut mode gives a piece of"):
            run_dedup(options)
        assert not (tmp / "out.jsonl").exists()
        return
    run_dedup(options)
    written = [json.loads(line)["id"] for line in (tmp / "out.jsonl").read_text().splitlines()]
    assert len(written) == 2 * len(found) and len(set(written)) == len(written)


@pytest.mark.parametrize("order", [["a", "b", "a#2"], ["a#2", "b", "a"]])
def test_an_input_id_equal_to_a_piece_id_is_exit_2_naming_both(tmp_path, order):
    write(tmp_path / "in.jsonl", order)
    (tmp_path / "evals.jsonl").write_text(json.dumps({"id": "q1", "question": SHELL}) + "\n")
    ran = neardup("dedup", "in.jsonl", "--protected", "evals.jsonl", "--output", "out.jsonl",
                  "--decontamination", "cut", "--cut-window", "5", "--min-piece", "1", "--quiet",
                  cwd=tmp_path)  # fmt: skip
    assert ran.returncode == 2, ran.stderr
    [line] = ran.stderr.splitlines()
    assert line == (
        "neardup dedup: error: in.jsonl:3: the id 'a#2' is the id cut mode gives a piece of "
        "'a': the output would hold two rows of one id; rename one of them"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evals.jsonl", "in.jsonl"]
    ran = neardup("dedup", "in.jsonl", "--protected", "evals.jsonl", "--output", "out.jsonl",
                  "--quiet", cwd=tmp_path)  # fmt: skip
    assert ran.returncode == 0, ran.stderr  # drop mode makes no piece ids
