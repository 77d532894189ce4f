"""Request and response models of the HTTP API (docs/api.md).

Requests are strict (no coercion of numbers to strings) and forbid unknown fields; ids and texts
must be valid Unicode that encodes as UTF-8.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from neardup.core.engine import ID_PATTERN, id_problem

__all__ = [
    "ERRORS",
    "ClusterOut",
    "ClustersResponse",
    "ConfigResponse",
    "ContaminationRequest",
    "ContaminationResponse",
    "ContaminationResult",
    "DecontaminatedDoc",
    "DecontaminationRequest",
    "DecontaminationResponse",
    "DocId",
    "DocumentIn",
    "DocumentOut",
    "DocumentResult",
    "DocumentsRequest",
    "DocumentsResponse",
    "DroppedDoc",
    "ErrorOut",
    "Hit",
    "Match",
    "ProtectedSetOut",
    "QueryMatch",
    "QueryRequest",
    "QueryResponse",
    "QueryResult",
    "ReplaceRequest",
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


def _addressable(value: str) -> str:
    """An id core allows (``id_problem``: the batch engines' rule too); not ``.`` or ``..``,
    since URLs drop those path segments (percent-encoded too, in browsers)."""
    problem = id_problem(value)
    if problem is not None:
        raise ValueError(f"the id {problem}")
    return value


#: 1 to 256 characters, none of them a control character (Unicode category Cc), and not ``.``
#: or ``..``; any other id is reachable in every path, percent-encoded (docs/api.md, "Ids").
DocId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=256,
        pattern=ID_PATTERN,
        examples=["deb/libfontenc1", "py/pip-26.3.dist-info/LICENSE.txt"],
    ),
    AfterValidator(_encodable),
    AfterValidator(_addressable),
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

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"texts": ["any text", "another text"]}]}
    )

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
    tokenizer: Literal["words", "multilingual"] = Field(
        description="how texts are cut into words (shingles and n-grams): `words`, or "
        "`multilingual` (normalized text; whole words with their marks; a word per grapheme "
        "cluster in scripts written without spaces)"
    )
    tokenizer_version: str = Field(
        description="the tokenizer with its version, as the store locks it: `words`, or "
        "`multilingual-3@17.0.0` (revision 3, tables at Unicode 17.0.0)"
    )
    window_version: str = Field(
        description="how contamination n-grams are made: `words` (`ngram` consecutive words), "
        "or `weighted-3` under `multilingual` (the shortest run of words weighing `ngram` "
        "English words, each word weighed by its script; a short text of a script written "
        "without spaces protected whole: docs/algorithm.md section 5)"
    )
    lsh_threshold: float = Field(description="(1/bands) ** (1/rows): where the S-curve is steepest")
    index_served: bool = Field(
        default=False,
        description="whether the service answers for a persistent index (`neardup serve "
        "--index`, else the data directory's with the embedded store; its location is not "
        "shown: a URL may hold credentials)",
    )
    query_threshold_min: float = Field(
        description="the smallest `threshold` /v1/query takes: the bands' reach, the similarity "
        "at which a pair becomes a candidate with probability 1/2, "
        "(1 - 2 ** (-1/bands)) ** (1/rows), or the service's threshold if lower; below it a "
        "query is 422 (most pairs there are never candidates, so an answer would look empty)"
    )


class DocumentIn(_Strict):
    """A document to register. Ids are compared as exact strings (no Unicode normalisation)."""

    id: DocId
    text: Text
    meta: Meta = Field(default_factory=dict)


class ReplaceRequest(_Strict):
    """``PUT /v1/documents/{id}``: the document's new text (and meta)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"text": "the corrected text ...", "meta": {"revision": 2}}]
        }
    )

    text: Text
    meta: Meta | None = Field(default=None, description="omitted: the stored meta is kept")


class DocumentsRequest(_Strict):
    """``POST /v1/documents``."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "documents": [
                        {
                            "id": "deb/libfontenc1",
                            "text": "Copyright 1998 The Open Group ...",
                            "meta": {"source": "debian"},
                        },
                    ],
                    "if_new": False,
                }
            ]
        }
    )

    documents: list[DocumentIn] = Field(
        description="ids must be unique within one batch: a repeated id is 422"
    )
    if_new: bool = Field(
        default=False,
        description="register only documents without a confirmed match: one with a match "
        "(registered before, or earlier in this batch and registered by it) is not stored and is "
        "answered `duplicate` with its matches. Atomic: of two racing copies exactly one is "
        "registered",
    )


class Match(BaseModel):
    """A confirmed near duplicate registered before the document."""

    id: str
    estimate: float


class DocumentResult(BaseModel):
    """The outcome for one registered document."""

    id: str
    cluster: str = Field(
        description="its cluster's root after the batch (for `duplicate`: its best match's)"
    )
    status: Literal["created", "unchanged", "duplicate", "replaced"] = Field(
        description="`created`; `unchanged` (same id and text registered already); `duplicate` "
        "(`if_new` only: not registered, it has matches); `replaced` (PUT, a new text)"
    )
    match_count: int = Field(description="every confirmed match registered before it")
    matches: list[Match] = Field(
        description="the best MAX_MATCHES of them, by estimate descending then id"
    )


class DocumentsResponse(BaseModel):
    """Results in request order."""

    results: list[DocumentResult]
    truncated: bool = Field(
        default=False,
        description="a list was cut to keep the answer within its bound (docs/api.md, "
        '"Bounded answers"); every count is complete',
    )


class QueryRequest(_Strict):
    """``POST /v1/query``: read-only."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"texts": ["Copyright 1998 The Open Group ..."], "threshold": 0.8, "limit": 10}
            ]
        }
    )

    texts: list[Text]
    threshold: float | None = Field(
        default=None,
        gt=0.0,
        le=1.0,
        description="default: the service's THRESHOLD; at least /v1/config's "
        "`query_threshold_min` (the bands' reach), else 422",
    )
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
    truncated: bool = Field(
        default=False,
        description="a list was cut to keep the answer within its bound (docs/api.md, "
        '"Bounded answers"); every count is complete',
    )


class DocumentOut(BaseModel):
    """``GET /v1/documents/{id}``."""

    id: str
    cluster: str
    meta: dict[str, Any] | None = Field(
        description="as registered; null for a document of the served index (it has none)"
    )
    indexed: bool = Field(
        default=False,
        description="a document of the persistent index the service serves read only "
        "(`neardup serve --index`), not one registered through the service",
    )


class ClusterOut(BaseModel):
    """One cluster: its root (smallest id), size and sorted members."""

    root: str
    size: int
    members: list[str] = Field(description="sorted; those after `after`, as many as fit")
    members_next: str | None = Field(
        default=None,
        description="more members follow: pass it as `after` to GET /v1/clusters/{root}",
    )


class ClustersResponse(BaseModel):
    """A page of clusters ordered by root, and the cursor of the next page."""

    clusters: list[ClusterOut]
    next: str | None
    truncated: bool = Field(
        default=False,
        description="a list was cut to keep the answer within its bound (docs/api.md, "
        '"Bounded answers"); every count is complete',
    )


class ProtectedSetOut(BaseModel):
    """A protected set's metadata (its contents are never returned)."""

    name: str
    items: int
    ngrams: int


class ContaminationRequest(_Strict):
    """``POST /v1/contamination``."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"texts": ["Tom found a shiny red shell by the river ..."], "sets": ["evals.v1"]}
            ]
        }
    )

    texts: list[Text]
    sets: list[str] | None = Field(
        default=None, description="protected set names to check against (default: every set)"
    )


class Hit(BaseModel):
    """A protected item sharing an n-gram with the text, and the first shared n-gram."""

    set: str
    item: str
    ngram: int | None = Field(
        description="the first shared n-gram, as its position in the answer's `ngrams` (each "
        "n-gram is sent once); only for keys with the protect scope (or no keys)"
    )


class ContaminationResult(BaseModel):
    """One text's verdict."""

    status: Literal["contaminated", "clean", "unchecked"] = Field(
        description="`unchecked` when no protected set was checked (none stored, or `sets` was "
        "empty): not a verdict of clean"
    )
    contaminated: bool
    hit_count: int = Field(description="every protected item sharing an n-gram with the text")
    hits: list[Hit] = Field(description="the first MAX_MATCHES of them, in set order")


class ContaminationResponse(BaseModel):
    """Results in request order, and the sets every text was checked against."""

    checked_sets: list[str] = Field(
        description="the protected sets checked, by name; empty means nothing was checked"
    )
    results: list[ContaminationResult]
    ngrams: list[str] = Field(
        default_factory=list,
        description="every n-gram the hits name, once, in order of first mention (empty for "
        "keys without the protect scope)",
    )
    truncated: bool = Field(
        default=False,
        description="a list was cut to keep the answer within its bound (docs/api.md, "
        '"Bounded answers"); every count is complete',
    )


#: The most ``max_pieces`` a decontamination request may ask for (each piece is a document of
#: the answer).
MAX_PIECES = 100


class DecontaminationRequest(_Strict):
    """``POST /v1/decontamination``: documents through a decontamination mode, with a report."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "documents": [{"id": "web-1", "text": "... Tom found a shiny red shell ..."}],
                    "sets": ["evals.v1"],
                    "mode": "cut",
                }
            ]
        }
    )

    documents: list[DocumentIn]
    sets: list[str] | None = Field(
        default=None, description="protected set names to check against (default: every set)"
    )
    mode: Literal["drop", "cut", "annotate"] = Field(
        default="drop",
        description="drop a contaminated document; cut its matches out (GPT-3); annotate meta",
    )
    window: Annotated[
        int,
        Field(ge=0, description="cut: characters removed each side"),
        BeforeValidator(_integral),
    ] = 200
    min_piece: Annotated[
        int,
        Field(ge=0, description="cut: shorter pieces are dropped"),
        BeforeValidator(_integral),
    ] = 200
    max_pieces: Annotated[
        int,
        Field(ge=1, le=MAX_PIECES, description="cut: more pieces drop the document"),
        BeforeValidator(_integral),
    ] = 10
    item_cap: Annotated[
        int | None,
        Field(ge=1, description="ignore n-grams in more than this many items of a set"),
        BeforeValidator(_integral),
    ] = None
    clean_below: float = Field(
        default=0.2, ge=0, le=1, description="coverage below which an item is clean"
    )
    dirty_from: float = Field(
        default=0.8,
        ge=0,
        le=1,
        description="coverage from which an item is dirty; not below clean_below, else 422",
    )
    top: Annotated[
        int,
        Field(ge=0, le=1000, description="most-matched items per set"),
        BeforeValidator(_integral),
    ] = 10


class DecontaminatedDoc(BaseModel):
    """A document a mode keeps: as sent, annotated, or a cut piece (``meta.decontamination``:
    ids, counts and offsets, every list at most MAX_LISTED long; never protected text)."""

    id: str
    text: str
    meta: dict[str, Any]


class DroppedDoc(BaseModel):
    """A document dropped whole, and the rule that dropped it."""

    id: str
    rule: Literal["contaminated", "too many pieces", "nothing left"] = Field(
        description="`contaminated` (mode drop); cut: `too many pieces` (more than max_pieces), "
        "`nothing left` (no piece of min_piece characters)"
    )


class DecontaminationResponse(BaseModel):
    """The documents a mode keeps (cut pieces as ``ID#K``), those dropped whole (and the rule),
    and the report: per set (totals, subsets, capped n-grams, top items) and per matched item."""

    checked_sets: list[str]
    documents: list[DecontaminatedDoc]
    dropped: list[DroppedDoc]
    report: dict[str, Any] = Field(
        description="neardup contamination's report: items are named by id, every list capped "
        "and counted; n-grams (first shared, capped) only for keys with the protect scope (or "
        "no keys)"
    )
