"""DedupOptions: built once from the flags; an engine learns which options it must honour."""

import pytest

from neardup.app.cli.options import DedupOptions, DedupParams
from neardup.core.engine import KeepPolicy, ParameterError, Schema


def test_given_lists_the_options_set_away_from_their_defaults():
    plain = DedupOptions(inputs=("a.jsonl",), output="o.jsonl")
    assert plain.given() == {"inputs", "output"}
    options = DedupOptions(
        inputs=("a.jsonl",), output="o.jsonl", removed="r.jsonl",
        schema=Schema(text_field="body.content"),
        params=DedupParams(keep=KeepPolicy.parse("max:quality"), workers=4),
    )  # fmt: skip
    assert options.given() == {"inputs", "output", "removed", "schema.text_field", "params.keep",
                               "params.workers"}  # fmt: skip
    supported = {"inputs", "output", "params.workers"}
    assert options.unsupported(supported) == ["params.keep", "removed", "schema.text_field"]


def test_manifest_goes_beside_the_output_but_not_for_stdout():
    assert DedupOptions(inputs=("a",), output="o.jsonl").manifest_target == "o.jsonl.manifest.json"
    assert DedupOptions(inputs=("a",), output="-").manifest_target is None
    assert DedupOptions(inputs=("a",), output="-", manifest="m.json").manifest_target == "m.json"


def test_stdin_is_read_once_and_stdout_written_once():
    with pytest.raises(ParameterError, match="read once"):
        DedupOptions(inputs=("-",), output="o.jsonl", protected=("-",))
    with pytest.raises(ParameterError, match="both be standard output"):
        DedupOptions(inputs=("a",), output="-", removed="-")
