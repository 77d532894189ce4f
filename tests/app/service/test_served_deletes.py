"""``neardup serve --index`` and deletion vectors: once a refresh serves a version that deletes
indexed documents (``neardup index delete``, ``--recrawled replace``), the service no longer
answers for them: not in queries, not by id, not in counts, not in a cluster it had linked them
into; an id a replace holds again is linked anew when a document here matches it."""

from __future__ import annotations

from typing import Any

from neardup.app.service import NewDoc
from neardup.core.engine import (
    DocIndex,
    batch_signatures,
    commit_index,
    delete_ids,
    run_info,
    text_digests,
    write_deletes,
    write_part,
)
from tests.app.service.test_served import _params, _run, started, threads, write_index

__all__ = ["threads"]  # the fixture, imported for the tests below


def _replace(url: str, docs: list[tuple[str, str]]) -> None:
    """What ``--recrawled replace`` commits: the ids deleted and their new rows, one version."""
    params = _params()
    index = DocIndex.open(url)
    ids, texts = [d[0] for d in docs], [d[1] for d in docs]
    part = write_part(index, params, ids, text_digests(texts), batch_signatures(texts, params),
                      run_info("local", "test", []))  # fmt: skip
    vectors, found = write_deletes(index, ids)
    assert found == sorted(ids)
    commit_index(index, params, [part], deletes=vectors)


async def _answers(service: Any) -> list:
    found = await service.query(["ant bee cat dog", "one two three four"], None, None)
    try:
        await service.document("x")
        x = "found"
    except Exception as exc:
        x = type(exc).__name__
    return [found, x, await service.cluster("b"), service.index.linked,
            service.stats()["indexed_documents"]]  # fmt: skip


def test_deleted_indexed_documents_are_not_answered_after_a_refresh(tmp_path, threads) -> None:
    url = str(tmp_path / "idx")
    write_index(url, [("x", "one two three four"), ("y", "eel fox gnu"), ("z", "ant bee cat dog")])

    async def run() -> list:
        out: list[Any] = []
        async with started(tmp_path / "data", index=url, index_refresh=0) as service:
            await service.register([NewDoc("b", "ant bee cat dog", {})])
            out.append(await _answers(service))
            assert delete_ids(url, ["x"]).deleted == ("x",)  # not linked here
            out.append(await service.refresh_index())
            out.append(await _answers(service))
            _replace(url, [("z", "ant bee cat dog")])  # linked: taken out, then linked anew
            out.append(await service.refresh_index())
            out.append(await _answers(service))
            assert delete_ids(url, ["z"]).deleted == ("z",)  # linked: taken out of b's cluster
            out.append(await service.refresh_index())
            out.append(await _answers(service))
        async with started(tmp_path / "data", index=url, index_refresh=0) as service:
            out.append(await _answers(service))  # a start reads the same
        return out

    both = [(2, [("b", 1.0, "b"), ("z", 1.0, "b")]), (1, [("x", 1.0, "x")])]
    alone = [(1, [("b", 1.0, "b")]), (0, [])]
    assert _run(run()) == [
        [both, "found", ["b", "z"], 1, 3],
        True,
        [[both[0], (0, [])], "NotFound", ["b", "z"], 1, 2],
        True,
        [[both[0], (0, [])], "NotFound", ["b", "z"], 1, 2],
        True,
        [alone, "NotFound", ["b"], 0, 1],
        [alone, "NotFound", ["b"], 0, 1],
    ]  # fmt: skip
