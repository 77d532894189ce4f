"""Storage, exactly (``neardup.core._storage``): what each input target expands to and is named,
the messages of a target that cannot be read or written, outputs kept apart from inputs and from
an index (links, globs, URLs, odd names), and what an output and standard input leave behind."""

import atexit
import hashlib
import io
import os
import sys
from types import SimpleNamespace

import fsspec
import pytest

from neardup.core import _storage
from neardup.core.engine import (
    STDIO,
    CorpusError,
    ParameterError,
    atomic_output,
    check_apart,
    check_output,
    check_target,
    expand_inputs,
)


@pytest.fixture
def mem():
    """A memory filesystem folder of this module's own (memory:// is one per process)."""
    fs = fsspec.filesystem("memory")
    fs.pipe("/cio/d/a.jsonl", b'{"id": "a", "text": "x"}\n')
    fs.pipe("/cio/d/b.jsonl.gz", b"")
    fs.pipe("/cio/d/notes.csv", b"q,a\n")
    fs.pipe("/cio/d/UP.JSONL", b"")
    yield fs
    fs.rm("/cio", recursive=True)


def corpus_error(call, *args, **kwargs):
    with pytest.raises(CorpusError) as caught:
        call(*args, **kwargs)
    return caught.value


def parameter_error(*args, **kwargs):
    with pytest.raises(ParameterError) as caught:
        check_apart(*args, **kwargs)
    return str(caught.value)


# -- what inputs expand to -------------------------------------------------------------------


def test_each_kind_of_target_gives_its_files_names_labels_formats_and_sizes(mem, tmp_path):
    def found(*targets, corpus=True):
        return [(s.name, s.label, s.fmt, s.size) for s in expand_inputs(targets, corpus=corpus)]

    # A directory: names below the argument as given, labels relative to it; the corpus files
    # by their lower-cased names.
    assert found("memory://cio/d") == [
        ("memory://cio/d/UP.JSONL", "UP.JSONL", ".jsonl", 0),
        ("memory://cio/d/a.jsonl", "a.jsonl", ".jsonl", 25),
        ("memory://cio/d/b.jsonl.gz", "b.jsonl.gz", ".jsonl.gz", 0),
    ]
    # Protected sets: any file of a protected kind, by its lower-cased name; a corpus name keeps
    # its format, any other name has none.
    assert found("memory://cio/d", corpus=False) == [
        ("memory://cio/d/UP.JSONL", "UP.JSONL", ".jsonl", 0),
        ("memory://cio/d/a.jsonl", "a.jsonl", ".jsonl", 25),
        ("memory://cio/d/b.jsonl.gz", "b.jsonl.gz", ".jsonl.gz", 0),
        ("memory://cio/d/notes.csv", "notes.csv", "", 4),
    ]
    # A glob: names and labels below its static part.
    assert found("memory://cio/*/*.jsonl") == [
        ("memory://cio/d/a.jsonl", "d/a.jsonl", ".jsonl", 25)
    ]
    # A file named on its own: its name as given, its base name as label.
    assert found("memory://cio/d/notes.csv", corpus=False) == [
        ("memory://cio/d/notes.csv", "notes.csv", "", 4)
    ]
    # Standard input, then a file: every target is read, in order.
    sys_stdin = sys.stdin
    try:
        sys.stdin = io.TextIOWrapper(io.BytesIO(b""))
        sources = expand_inputs([STDIO, "memory://cio/d/a.jsonl"])
    finally:
        sys.stdin = sys_stdin
    os.unlink(sources[0].path)
    assert [(s.name, s.label) for s in sources] == [
        ("-", "stdin"), ("memory://cio/d/a.jsonl", "a.jsonl")]  # fmt: skip


def test_a_corpus_target_must_be_a_corpus_file_however_it_was_found(mem):
    for target in ("memory://cio/d/notes.csv", "memory://cio/d/*.csv"):
        error = corpus_error(expand_inputs, [target])
        assert (error.path, error.line) == ("memory://cio/d/notes.csv", None)
        assert error.reason.startswith("unknown corpus format; inputs are one of .jsonl, ")


def test_directory_and_glob_names_join_the_argument_as_given(tmp_path, monkeypatch):
    (tmp_path / "corpX").mkdir()
    (tmp_path / "corpX" / "a.jsonl").write_text("")
    (tmp_path / "b.jsonl").write_text("")
    # A trailing slash (and a name ending in X) is joined with one slash.
    [source] = expand_inputs([f"{tmp_path}/corpX/"])
    assert (source.name, source.label) == (f"{tmp_path}/corpX/a.jsonl", "a.jsonl")
    # A glob whose first component has the wildcard: names relative to where it is run.
    monkeypatch.chdir(tmp_path)
    assert [(s.name, s.label) for s in expand_inputs(["*.jsonl"])] == [("b.jsonl", "b.jsonl")]


def test_a_glob_at_the_root_of_a_filesystem_labels_by_path(mem):
    mem.pipe("/cio-top.jsonl", b"")
    try:
        [source] = expand_inputs(["memory://cio-t*.jsonl"])
        assert (source.label, source.path, source.fmt) == ("/cio-top.jsonl", "/cio-top.jsonl",
                                                           ".jsonl")  # fmt: skip
    finally:
        mem.rm("/cio-top.jsonl")


def test_targets_that_hold_nothing_say_so_exactly(mem, tmp_path):
    (tmp_path / "e").mkdir()
    cases = [
        ("memory://cio/d/*.parquet", True, "no file matches this pattern"),
        ("memory://cio/none.jsonl", True, "no such file or directory"),
        (str(tmp_path / "e"), True,
         "no corpus file (.jsonl, .jsonl.gz, .jsonl.zst, .parquet, .ndjson, .ndjson.gz, "
         ".ndjson.zst, .json.gz, .json.zst) in this directory"),
        (str(tmp_path / "e"), False,
         "no protected file (.jsonl, .ndjson, .json, .csv, .txt, (each also .gz or .zst), "
         ".parquet) in this directory"),
    ]  # fmt: skip
    for target, corpus, reason in cases:
        error = corpus_error(expand_inputs, [target], corpus=corpus)
        assert (error.path, error.line, error.reason) == (target, None, reason)
        assert str(error) == f"{target}: {reason}"


def test_an_empty_file_has_size_zero(tmp_path):
    (tmp_path / "e.jsonl").write_bytes(b"")
    assert [s.size for s in expand_inputs([str(tmp_path / "e.jsonl")])] == [0]


def test_a_source_opens_as_its_url_and_says_why_it_cannot(mem, tmp_path):
    (tmp_path / "a.jsonl").write_text("x")
    [local] = expand_inputs([str(tmp_path / "a.jsonl")])
    [memory] = expand_inputs(["memory://cio/d/a.jsonl"])
    assert local.url() == f"file://{tmp_path}/a.jsonl"
    assert memory.url() == "memory:///cio/d/a.jsonl"
    with local.open() as raw:
        assert raw.read() == b"x"
    os.unlink(tmp_path / "a.jsonl")
    error = corpus_error(local.open)
    assert str(error) == f"{tmp_path}/a.jsonl: cannot read: No such file or directory"
    assert (error.path, error.line) == (f"{tmp_path}/a.jsonl", None)


def test_a_url_scheme_whose_package_is_missing_is_named(monkeypatch):
    import fsspec.core

    def missing(target):
        raise ImportError("Install s3fs to access S3")

    monkeypatch.setattr(fsspec.core, "url_to_fs", missing)
    error = corpus_error(_storage.filesystem, "s3://b/a.jsonl")
    assert (error.path, error.line) == ("s3://b/a.jsonl", None)
    assert error.reason == "this URL scheme needs a package: Install s3fs to access S3"


@pytest.mark.parametrize(
    ("protocol", "local"),
    [
        (("file", "local"), True),
        ("file", True),
        (("local",), True),
        (("file",), True),
        ("memory", False),
        ("filecache", False),  # a cache over another filesystem, whose name holds "file"
        (("s3", "s3a"), False),
    ],
)
def test_a_filesystem_is_local_when_its_protocol_names_file_or_local(protocol, local):
    assert _storage._is_local(SimpleNamespace(protocol=protocol)) is local


def test_standard_input_is_spooled_to_a_named_jsonl_file_removed_at_exit(monkeypatch):
    registered = []
    monkeypatch.setattr(atexit, "register", lambda *call: registered.append(call))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'{"id": "a"}\n')))
    [source] = expand_inputs([STDIO])
    name = os.path.basename(source.path)
    assert name.startswith("neardup-stdin-") and name.endswith(".jsonl"), name
    assert registered == [(_storage._remove, source.path)]
    remove, path = registered[0]
    remove(path)
    assert not os.path.exists(path)
    remove(path)  # already gone: nothing raised


# -- what outputs may be ---------------------------------------------------------------------


def test_output_targets_are_checked_before_any_work(tmp_path, monkeypatch):
    assert check_output(STDIO) == ".jsonl"
    assert check_output(str(tmp_path / "o.parquet")) == ".parquet"
    assert check_output(str(tmp_path / "o.jsonl.zst")) == ".jsonl.zst"
    check_target(STDIO)
    check_target(str(tmp_path / "o.jsonl"))
    check_target("memory://cio-nowhere/o.jsonl")  # not local: the store is asked when written
    missing = str(tmp_path / "nope" / "o.jsonl")
    folder = tmp_path / "out.jsonl"
    folder.mkdir()
    for call in (check_output, check_target):
        error = corpus_error(call, missing)
        assert (error.path, error.line) == (missing, None)
        assert error.reason == f"no such directory: {tmp_path / 'nope'}"
        error = corpus_error(call, str(folder))
        assert str(error) == f"{folder}: is a directory; give a file name"
        assert (error.path, error.line) == (str(folder), None)
    error = corpus_error(check_output, str(tmp_path / "o.csv"))
    assert str(error) == (
        f"{tmp_path / 'o.csv'}: unknown output format; write one of .jsonl, .jsonl.gz, "
        ".jsonl.zst, .parquet"
    )
    monkeypatch.chdir(tmp_path)
    assert check_output("o.jsonl") == ".jsonl"


def test_an_output_records_its_size_and_sha256_past_one_read(tmp_path):
    data = os.urandom((1 << 20) + 7)
    with atomic_output(str(tmp_path / "o.bin")) as (handle, done):
        handle.write(data)
    assert (done.target, done.bytes, done.sha256) == (
        str(tmp_path / "o.bin"), len(data), hashlib.sha256(data).hexdigest())  # fmt: skip


def test_standard_output_gets_the_bytes_and_their_digest(monkeypatch):
    out = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", SimpleNamespace(buffer=out))
    with atomic_output(STDIO) as (handle, done):
        handle.write(b"row\n")
    assert out.getvalue() == b"row\n"
    assert (done.bytes, done.sha256) == (4, hashlib.sha256(b"row\n").hexdigest())


# -- outputs apart from inputs ---------------------------------------------------------------


def test_outputs_are_compared_by_what_they_are(tmp_path):
    data = tmp_path / "c.jsonl"
    data.write_text("")
    (tmp_path / "link.jsonl").symlink_to(data)
    os.link(data, tmp_path / "hard.jsonl")
    for other in ("link.jsonl", "hard.jsonl"):
        out = str(tmp_path / other)
        assert parameter_error([("INPUT", str(data))], [("--output", out)]) == (
            f"--output {out} is INPUT {data}: neardup never writes over its inputs; give the "
            "output another name"
        )
        assert parameter_error([], [("--output", str(data)), ("--removed", out)]) == (
            f"--output {data} and --removed {out} are the same file: give each output its own name"
        )
    # Two new files, and two URLs, are two outputs; one URL twice is one file.
    check_apart([], [("--output", str(tmp_path / "x.jsonl")), ("--removed", str(tmp_path / "y"))])
    check_apart([], [("--output", "memory://cio/o.jsonl"), ("--removed", "memory://cio/r.jsonl")])
    assert parameter_error(
        [], [("--output", "memory://cio/o.jsonl"), ("--removed", "memory://cio/o.jsonl")]
    ).startswith("--output memory://cio/o.jsonl and --removed memory://cio/o.jsonl are the same")


def test_every_input_is_checked_whatever_comes_before_it(tmp_path, mem):
    data = tmp_path / "c.jsonl"
    data.write_text("")
    assert parameter_error(
        [("INPUT", STDIO), ("INPUT", str(data))], [("--output", str(data))]
    ).startswith(f"--output {data} is INPUT {data}:")
    # A glob's matches, and a URL's files, are what is read.
    assert parameter_error(
        [("INPUT", str(tmp_path / "*.jsonl"))], [("--output", str(data))]
    ).startswith(f"--output {data} is INPUT {data}:")
    assert parameter_error(
        [("INPUT", "memory://cio/d")], [("--removed", "memory://cio/d/a.jsonl")]
    ).startswith("--removed memory://cio/d/a.jsonl is INPUT /cio/d/a.jsonl:")
    check_apart([("INPUT", "memory://cio/d")], [("--output", "memory://cio/o.jsonl")])


@pytest.mark.parametrize("folder", ["outX", "out "])
def test_an_output_folder_whose_name_ends_oddly_still_holds_its_inputs(tmp_path, folder):
    (tmp_path / folder).mkdir()
    data = tmp_path / folder / "c.jsonl"
    data.write_text("")
    out = str(tmp_path / folder)
    assert parameter_error([("INPUT", str(data))], [("--output", out)]).startswith(
        f"--output {out} holds INPUT {data}:"
    )
    # ... and a sibling whose name starts the same does not.
    check_apart([("INPUT", str(data))], [("--output", str(tmp_path / "out"))])


# -- outputs and inputs apart from the index -------------------------------------------------


def overlap(read, index):
    return (
        f"INPUT {read} and IDX {index} overlap: the index is not an input (its documents are "
        "deduped against, never read as new ones)"
    )


@pytest.mark.parametrize("name", ["idx", "idxX", "idx "])
def test_an_index_is_kept_apart_from_the_runs_files(tmp_path, monkeypatch, name):
    index = tmp_path / name
    (index / "part").mkdir(parents=True)
    (index / "part" / "a.jsonl").write_text("")
    (tmp_path / "c.jsonl").write_text("")
    idx = ("IDX", str(index))
    inside = str(index / "o.jsonl")
    for out in (inside, str(index)):
        assert parameter_error([], [("--output", out)], index=idx) == (
            f"--output {out} is inside IDX {index}: the index holds only its own files; write "
            "the output elsewhere"
        )
    for read in (str(index), str(index / "part"), str(index / "part" / "a.jsonl"), str(tmp_path)):
        assert parameter_error([("INPUT", read)], [], index=idx) == overlap(read, index)
    # Neighbours, other files and standard input (even run from inside the index) are apart.
    check_apart(
        [("INPUT", str(tmp_path / "c.jsonl")), ("INPUT", STDIO)],
        [("--output", str(tmp_path / "o.jsonl")), ("--removed", None)],
        index=idx,
    )
    check_apart([("INPUT", f"{index}2")], [("--output", f"{index}2.jsonl")], index=idx)
    monkeypatch.chdir(index)
    check_apart([("INPUT", STDIO)], [], index=idx)


def test_an_index_on_a_url_is_kept_apart_by_its_url(mem):
    idx = ("IDX", "memory://cio/idx")
    assert parameter_error([("INPUT", "memory://cio/idx/p/a.jsonl")], [], index=idx) == overlap(
        "memory://cio/idx/p/a.jsonl", "memory://cio/idx"
    )
    assert parameter_error([("INPUT", "memory://cio")], [], index=idx) == overlap(
        "memory://cio", "memory://cio/idx"
    )
    assert parameter_error([], [("--output", "memory://cio/idx/o.jsonl")], index=idx).startswith(
        "--output memory://cio/idx/o.jsonl is inside IDX memory://cio/idx:"
    )
    check_apart([("INPUT", "memory://cio/d")], [("--output", "memory://cio/o.jsonl")], index=idx)


@pytest.mark.parametrize("folder", ["holdX", "hold "])
def test_an_input_folder_whose_name_ends_oddly_still_holds_the_index(tmp_path, folder):
    index = tmp_path / folder / "idx"
    index.mkdir(parents=True)
    read = str(tmp_path / folder)
    assert parameter_error([("INPUT", read)], [], index=("IDX", str(index))) == overlap(read, index)
    check_apart([("INPUT", str(tmp_path / "hold"))], [], index=("IDX", str(index)))
