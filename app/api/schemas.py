"""Request and response models of the HTTP API (docs/api.md).

Requests are strict (no coercion of numbers to strings) and forbid unknown fields; ids and texts
must be valid Unicode that encodes as UTF-8.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

__all__ = [
    "ERRORS",
    "ClusterOut",
    "ClustersResponse",
    "ConfigResponse",
    "ContaminationRequest",
    "ContaminationResponse",
    "ContaminationResult",
    "DocumentIn",
    "DocumentOut",
    "DocumentResult",
    "DocumentsRequest",
    "DocumentsResponse",
    "ErrorOut",
    "Hit",
    "Match",
    "ProtectedSetOut",
    "QueryMatch",
    "QueryRequest",
    "QueryResponse",
    "QueryResult",
    "SignaturesRequest",
    "SignaturesResponse",
]


def _encodable(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"not valid Unicode (a lone surrogate at character {exc.start})") from None
    return value


#: How deep ``meta`` may nest: deeper values were accepted, then failed on every read.
META_DEPTH = 32


def _storable_meta(value: dict[str, Any]) -> dict[str, Any]:
    """``meta`` that can always be served back: UTF-8 encodable, at most META_DEPTH deep."""
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if depth > META_DEPTH:
            raise ValueError(f"nests deeper than {META_DEPTH} levels")
        if isinstance(item, dict):
            for key, inner in item.items():
                _encodable(key)
                todo.append((inner, depth + 1))
        elif isinstance(item, list):
            todo.extend((inner, depth + 1) for inner in item)
        elif isinstance(item, str):
            _encodable(item)
    return value


def _integral(value: Any) -> Any:
    """An integral float (``2.0``) as an int: JSON Schema counts it as an integer."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


Text = Annotated[str, AfterValidator(_encodable)]
#: A positive strict integer that also takes integral floats (``10.0``), as JSON Schema's
#: ``integer`` does. (Field before the validator: the other order puts "ge", not "minimum", in
#: the OpenAPI schema.)
Count = Annotated[int, Field(ge=1), BeforeValidator(_integral)]
Meta = Annotated[dict[str, Any], AfterValidator(_storable_meta)]
#: 1 to 256 characters, none of them a control character (Unicode category Cc).
DocId = Annotated[
    str,
    Field(min_length=1, max_length=256, pattern=r"^[^\x00-\x1F\x7F-\x9F]+$"),
    AfterValidator(_encodable),
]


class ErrorOut(BaseModel):
    """Every error: a human-readable ``detail`` (a list of problems for 422)."""

    detail: Any


#: The error responses every versioned route can give, for the OpenAPI schema.
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut, "description": text}
    for code, text in [
        (400, "malformed body"),
        (401, "no or unknown API key"),
        (403, "the key lacks the scope"),
        (404, "unknown resource"),
        (409, "conflict"),
        (413, "body, batch or text over a limit"),
        (415, "wrong content type"),
        (422, "validation"),
        (429, "over the contamination-check rate; retry after Retry-After"),
        (503, "overloaded or a worker died; retry after Retry-After"),
        (507, "over a storage limit (protected sets) or the disk is full; nothing was stored"),
    ]
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class SignaturesRequest(_Strict):
    """``POST /v1/signatures``."""

    texts: list[Text]


class SignaturesResponse(BaseModel):
    """One signature of ``num_perm`` integers per text, in request order."""

    signatures: list[list[int]]


class ConfigResponse(BaseModel):
    """``GET /v1/config``: the index parameters this service runs with."""

    num_perm: int
    bands: int
    rows: int
    threshold: float
    k: int
    seed: int
    ngram: int
    lsh_threshold: float


class DocumentIn(_Strict):
    """A document to register. Ids are compared as exact strings (no Unicode normalisation)."""

    id: DocId
    text: Text
    meta: Meta = Field(default_factory=dict)


class DocumentsRequest(_Strict):
    """``POST /v1/documents``."""

    documents: list[DocumentIn] = Field(
        description="ids must be unique within one batch: a repeated id is 422"
    )


class Match(BaseModel):
    """A confirmed near duplicate registered before the document."""

    id: str
    estimate: float


class DocumentResult(BaseModel):
    """The outcome for one registered document."""

    id: str
    cluster: str
    status: str
    match_count: int = Field(description="every confirmed match registered before it")
    matches: list[Match] = Field(
        description="the best MAX_MATCHES of them, by estimate descending then id"
    )


class DocumentsResponse(BaseModel):
    """Results in request order."""

    results: list[DocumentResult]


class QueryRequest(_Strict):
    """``POST /v1/query``: read-only."""

    texts: list[Text]
    threshold: float | None = Field(default=None, gt=0.0, le=1.0)
    limit: Count | None = None


class QueryMatch(BaseModel):
    """A registered near duplicate of a queried text."""

    id: str
    estimate: float
    cluster: str


class QueryResult(BaseModel):
    """Matches of one queried text."""

    match_count: int = Field(description="every registered near duplicate")
    matches: list[QueryMatch] = Field(
        description="the best of them (at most ``limit`` and MAX_MATCHES), by estimate then id"
    )


class QueryResponse(BaseModel):
    """Results in request order."""

    results: list[QueryResult]


class DocumentOut(BaseModel):
    """``GET /v1/documents/{id}``."""

    id: str
    cluster: str
    meta: dict[str, Any]


class ClusterOut(BaseModel):
    """One cluster: its root (smallest id), size and sorted members."""

    root: str
    size: int
    members: list[str]


class ClustersResponse(BaseModel):
    """A page of clusters ordered by root, and the cursor of the next page."""

    clusters: list[ClusterOut]
    next: str | None


class ProtectedSetOut(BaseModel):
    """A protected set's metadata (its contents are never returned)."""

    name: str
    items: int
    ngrams: int


class ContaminationRequest(_Strict):
    """``POST /v1/contamination``."""

    texts: list[Text]
    sets: list[str] | None = None


class Hit(BaseModel):
    """A protected item sharing an n-gram with the text, and the first shared n-gram."""

    set: str
    item: str
    ngram: str | None = Field(
        description="the first shared n-gram; only for keys with the protect scope (or no keys)"
    )


class ContaminationResult(BaseModel):
    """One text's verdict."""

    contaminated: bool
    hits: list[Hit]


class ContaminationResponse(BaseModel):
    """Results in request order."""

    results: list[ContaminationResult]
