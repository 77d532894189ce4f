"""The errors core raises (``neardup.core.errors``): their exact messages, attributes and the
builtin each is caught as."""

import pytest

from neardup.core.errors import (
    CorpusError,
    DuplicateIdError,
    IndexChangedError,
    IndexConflictError,
    IndexDamagedError,
    IndexIdError,
    IndexMissingError,
    IndexParameterError,
    NeardupError,
    ParameterError,
    UnguardedMainError,
    WorkerError,
)


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        (("a",), "document id 'a' appear(s) more than once"),
        (("a", "b"), "document ids 'a', 'b' appear(s) more than once"),
        (tuple(f"{i:02}" for i in range(20)),
         "document ids " + ", ".join(f"'{i:02}'" for i in range(20)) + " appear(s) more than once"),
        (tuple(f"{i:02}" for i in range(21)),
         "document ids " + ", ".join(f"'{i:02}'" for i in range(20))
         + " and 1 more appear(s) more than once"),
        (tuple(f"{i:02}" for i in range(22)),
         "document ids " + ", ".join(f"'{i:02}'" for i in range(20))
         + " and 2 more appear(s) more than once"),
    ],
)  # fmt: skip
def test_repeated_ids_are_named_up_to_twenty(ids, message):
    error = DuplicateIdError(*ids)
    assert str(error) == message
    assert error.doc_ids == ids
    assert isinstance(error, NeardupError) and isinstance(error, ValueError)


def test_a_corpus_error_names_the_file_and_the_line_when_there_is_one():
    error = CorpusError("a.jsonl", 3, "bad")
    assert (str(error), error.path, error.line, error.reason) == (
        "a.jsonl:3: bad",
        "a.jsonl",
        3,
        "bad",
    )
    error = CorpusError("a.jsonl", None, "bad")
    assert (str(error), error.line) == ("a.jsonl: bad", None)
    assert str(CorpusError("a.jsonl", 0, "bad")) == "a.jsonl:0: bad"
    assert isinstance(error, ValueError)


@pytest.mark.parametrize(
    ("script", "where"),
    [("job.py", "'job.py'"), (None, "the main script"), ("", "the main script")],
)
def test_an_unguarded_main_names_the_script_and_the_guard(script, where):
    error = UnguardedMainError(script)
    assert str(error) == (
        f"the signature worker processes re-ran {where} from its top level and stopped: a script "
        'that uses workers > 1 must call neardup under `if __name__ == "__main__":` (spawned '
        "workers import the script; the guard keeps them from running it)"
    )
    assert error.script == script
    assert isinstance(error, WorkerError) and isinstance(error, RuntimeError)


def test_a_missing_index_names_its_location():
    error = IndexMissingError("memory://idx")
    assert (
        str(error)
        == "memory://idx: no index here (no committed version under memory://idx/_index/)"
    )
    assert error.url == "memory://idx"
    assert isinstance(error, FileNotFoundError)


@pytest.mark.parametrize(
    ("indexed", "given", "shown"),
    [
        (0.8, 0.7, "the index has 0.8, this run 0.7"),
        (None, "words", "the index has no value, this run 'words'"),
        ("words", None, "the index has 'words', this run no value"),
    ],
)
def test_a_parameter_locked_to_the_index_names_both_values(indexed, given, shown):
    error = IndexParameterError("memory://idx", "threshold", indexed, given)
    assert str(error) == (
        f"memory://idx: parameter threshold is locked to the index: {shown} (run with the "
        "index's value, or use another index)"
    )
    assert (error.url, error.name, error.indexed, error.given) == (
        "memory://idx", "threshold", indexed, given)  # fmt: skip
    assert isinstance(error, ParameterError)


TAIL = (
    " already in the index: ids must be unique across the index and the new inputs (--id-prefix "
    "names a dump's ids apart: --id-prefix 'cc-2024-10/{file}/')"
)


def test_ids_already_in_the_index_are_named_in_id_order_with_their_parts():
    error = IndexIdError("memory://idx", {"b": "p2", "a": "p1"})
    assert str(error) == "memory://idx: id 'a' (part p1), 'b' (part p2)" + TAIL
    assert (error.url, error.found, error.total) == ("memory://idx", {"b": "p2", "a": "p1"}, 2)
    # All of them given: the first SHOWN named, and how many more.
    found = {f"{i:02}": "p" for i in range(IndexIdError.SHOWN + 3)}
    error = IndexIdError("u", found)
    named = ", ".join(f"'{i:02}' (part p)" for i in range(20))
    assert (IndexIdError.SHOWN, error.total) == (20, 23)
    assert str(error) == f"u: id {named} and 3 more" + TAIL
    # The first SHOWN given, with the total.
    error = IndexIdError("u", {"a": "p"}, total=5)
    assert str(error) == "u: id 'a' (part p) and 4 more" + TAIL
    assert error.total == 5
    error = IndexIdError("u", {"a": "p"}, total=2)
    assert str(error) == "u: id 'a' (part p) and 1 more" + TAIL
    error = IndexIdError("u", {"a": "p"}, total=1)
    assert (str(error), error.total) == ("u: id 'a' (part p)" + TAIL, 1)


def test_a_damaged_index_names_the_file_on_one_line():
    error = IndexDamagedError("memory://idx", "part/a.parquet", "is  short:\n  3 rows\n")
    assert str(error) == "memory://idx: the index is damaged: part/a.parquet is short: 3 rows"
    assert (error.url, error.path, error.problem) == (
        "memory://idx", "part/a.parquet", "is short: 3 rows")  # fmt: skip


def test_a_lost_commit_race_names_the_version_the_outputs_are_valid_against():
    error = IndexConflictError("memory://idx", 7, ["p1", "p2"])
    assert str(error) == (
        "memory://idx: another run added version 7 (part p1, p2) while this run ran; nothing "
        "was added to the index; this run's outputs are written and valid against version 6; "
        "rerun to dedup against it"
    )
    assert (error.url, error.version, error.parts) == ("memory://idx", 7, ["p1", "p2"])
    assert "version 2 (no new part) while" in str(IndexConflictError("u", 2, []))
    assert isinstance(error, RuntimeError)


def test_a_lost_compaction_says_nothing_of_outputs_and_how_to_rerun():
    error = IndexConflictError("u", 4, ["p3"], compaction=True)
    assert str(error) == (
        "u: another run added version 4 (part p3) while this compaction ran; nothing was "
        "committed and the compaction's new parts are removed; the index is as that run left "
        "it; rerun `neardup index compact` to compact it"
    )
    assert (error.version, error.parts) == (4, ["p3"])


def test_a_file_removed_under_a_reader_names_both_versions():
    error = IndexChangedError("memory://idx", 3, 5, "part/a.parquet")
    assert str(error) == (
        "memory://idx: part/a.parquet of version 3, which this run reads, was removed by version "
        "5 (compacted while this run ran); nothing was added to the index; rerun"
    )
    assert (error.url, error.version, error.parts, error.path) == (
        "memory://idx", 5, [], "part/a.parquet")  # fmt: skip
    assert isinstance(error, IndexConflictError)
