"""A small typed client for the neardup HTTP API, over httpx.

Long inputs are sent in batches. Idempotent calls (every call but protected-set uploads is safe
to repeat: registration is idempotent by id) are retried on 429/503 and connection errors with
exponential backoff, honouring Retry-After. Any other failure raises ``ClientError`` with the
status and the server's ``detail``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

import httpx

if TYPE_CHECKING:
    from neardup.core.minhash import Doc

__all__ = ["API_KEY_ENV", "CHANGED", "Changed", "Client", "ClientError"]

#: The environment variable a Client (and ``neardup push``/``query``) takes its API key from.
API_KEY_ENV = "NEARDUP_API_KEY"

_RETRY_STATUS = {429, 502, 503, 504}

#: What ``register`` does with an id already registered with another text.
Changed = Literal["error", "skip", "replace"]
CHANGED: tuple[Changed, ...] = ("error", "skip", "replace")


class ClientError(Exception):
    """A request the service refused or could not answer.

    Attributes:
        status: the HTTP status, or None when the service could not be reached.
        detail: the service's explanation (its ``detail``), or the transport error.
        conflicts: for a 409, every id of the batch registered with another text.
    """

    def __init__(
        self,
        status: int | None,
        detail: Any,
        method: str,
        path: str,
        conflicts: Sequence[str] = (),
    ) -> None:
        where = f"{method} {path}"
        super().__init__(f"{where}: {status or 'no response'}: {detail}")
        self.status = status
        self.detail = detail
        self.conflicts = list(conflicts)


class Client:
    """The neardup API.

    Args:
        url: the service's base URL, e.g. ``http://127.0.0.1:8000``.
        api_key: sent as ``Authorization: Bearer KEY``; default: the environment's
            ``NEARDUP_API_KEY`` when set (none otherwise).
        batch_size: items per request for the batched calls.
        retries: attempts after the first for idempotent calls.
        timeout: seconds per request.
        backoff: seconds before the first retry, doubling after each.
        transport: an httpx transport (tests).
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        batch_size: int = 1000,
        retries: int = 5,
        timeout: float = 120.0,
        backoff: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if api_key is None:
            api_key = os.environ.get(API_KEY_ENV) or None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            base_url=url.rstrip("/"), headers=headers, timeout=timeout, transport=transport
        )
        self.batch_size = batch_size
        self.retries = retries
        self.backoff = backoff

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def _request(self, method: str, path: str, *, retry: bool = True, **kwargs: Any) -> Any:
        attempts = self.retries + 1 if retry else 1
        unanswered = False  # an earlier attempt may have reached the server without an answer
        for attempt in range(attempts):
            try:
                response = self._http.request(method, path, **kwargs)
            except httpx.TransportError as exc:
                if attempt + 1 == attempts:
                    raise ClientError(None, str(exc), method, path) from exc
                unanswered = True
                time.sleep(self.backoff * 2**attempt)
                continue
            if response.status_code in _RETRY_STATUS and attempt + 1 < attempts:
                time.sleep(_retry_after(response, self.backoff * 2**attempt))
                continue
            if method == "DELETE" and response.status_code == 404 and unanswered:
                return None  # the unanswered attempt deleted it: a retried DELETE is done
            if response.status_code >= 400:
                raise ClientError(
                    response.status_code, _detail(response), method, path, _conflicts(response)
                )
            return response.json() if response.content else None
        raise RuntimeError("unreachable: the loop returns or raises")

    def _batched(self, items: Sequence[Any]) -> Iterator[Sequence[Any]]:
        for lo in range(0, len(items), self.batch_size):
            yield items[lo : lo + self.batch_size]

    def signatures(self, texts: Sequence[str]) -> list[list[int]]:
        """``core.minhash.signatures`` of the texts, computed by the service."""
        out: list[list[int]] = []
        for chunk in self._batched(texts):
            out += self._request("POST", "/v1/signatures", json={"texts": list(chunk)})[
                "signatures"
            ]
        return out

    def register(
        self,
        documents: Iterable[Mapping[str, Any] | Doc],
        *,
        if_new: bool = False,
        changed: Changed = "error",
    ) -> list[dict[str, Any]]:
        """Register documents, batch by batch; results in order.

        A document is a ``neardup.Doc`` (what ``near_dedup`` and the corpus readers give) or a
        mapping ``{"id", "text", "meta"?}``. ``if_new``: documents with a confirmed match are
        not registered (status ``duplicate``). ``changed``: what to do with an id already
        registered with another text, which the service refuses (409) with its whole batch:
        ``"error"`` raises ClientError (its ``conflicts`` name them), ``"skip"`` leaves them
        as stored (status ``skipped``) and ``"replace"`` replaces their text (``replace``,
        status ``replaced``); the rest of the batch is registered either way.
        """
        if changed not in CHANGED:
            raise ValueError(f"changed={changed!r}: choose one of {', '.join(CHANGED)}")
        out: list[dict[str, Any]] = []
        for chunk in self._batched([_as_document(d) for d in documents]):
            out += self._register_batch(list(chunk), if_new, changed)
        return out

    def _register_batch(
        self, docs: list[dict[str, Any]], if_new: bool, changed: Changed
    ) -> list[dict[str, Any]]:
        done: dict[str, dict[str, Any]] = {}
        pending = docs
        while pending:  # every round registers the batch or takes at least one id out of it
            body: dict[str, Any] = {"documents": pending} | ({"if_new": True} if if_new else {})
            try:
                results = self._request("POST", "/v1/documents", json=body)["results"]
            except ClientError as exc:
                taken = set(exc.conflicts) & {d["id"] for d in pending}
                if exc.status != 409 or changed == "error" or not taken:
                    raise
                for d in pending:
                    if d["id"] not in taken:
                        continue
                    if changed == "skip":
                        done[d["id"]] = {"id": d["id"], "status": "skipped"}
                    else:
                        done[d["id"]] = self.replace(d["id"], d["text"], meta=d.get("meta"))
                pending = [d for d in pending if d["id"] not in taken]
                continue
            done.update((r["id"], r) for r in results)
            break
        return [done[d["id"]] for d in docs]

    def replace(
        self, doc_id: str, text: str, *, meta: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Replace a document's text (and meta, if given), or register it if unknown."""
        body: dict[str, Any] = {"text": text} | ({} if meta is None else {"meta": meta})
        return dict(self._request("PUT", f"/v1/documents/{_quote(doc_id)}", json=body))

    def query(
        self, texts: Sequence[str], *, threshold: float | None = None, limit: int | None = None
    ) -> list[list[dict[str, Any]]]:
        """Registered near duplicates of each text, without registering anything."""
        return [r["matches"] for r in self.query_results(texts, threshold=threshold, limit=limit)]

    def query_results(
        self, texts: Sequence[str], *, threshold: float | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Each text's whole answer: ``match_count`` (every match) and ``matches`` (listed)."""
        out: list[dict[str, Any]] = []
        for chunk in self._batched(texts):
            body: dict[str, Any] = {"texts": list(chunk)}
            if threshold is not None:
                body["threshold"] = threshold
            if limit is not None:
                body["limit"] = limit
            out += self._request("POST", "/v1/query", json=body)["results"]
        return out

    def document(self, doc_id: str) -> dict[str, Any]:
        """A registered document's id, cluster and meta."""
        return dict(self._request("GET", f"/v1/documents/{_quote(doc_id)}"))

    def delete(self, doc_id: str) -> None:
        """Delete a document (its cluster is recomputed)."""
        self._request("DELETE", f"/v1/documents/{_quote(doc_id)}")

    def cluster(self, root: str) -> dict[str, Any]:
        """The cluster rooted at ``root``: ``{"root", "size", "members"}``."""
        return dict(self._request("GET", f"/v1/clusters/{_quote(root)}"))

    def clusters(self, *, min_size: int = 2, page: int = 1000) -> Iterator[dict[str, Any]]:
        """Every cluster of at least ``min_size`` members, by root, following the pages."""
        after: str | None = None
        while True:
            params: dict[str, Any] = {"min_size": min_size, "limit": page}
            if after is not None:
                params["after"] = after
            body = self._request("GET", "/v1/clusters", params=params)
            yield from body["clusters"]
            after = body["next"]
            if after is None:
                return

    def put_protected_set(
        self,
        name: str,
        content: bytes,
        *,
        jsonl: bool | None = None,
        format: str | None = None,
        allow_no_ngrams: bool = False,
    ) -> dict[str, Any]:
        """Upload (or replace) a protected set from a file's bytes, read as ``format`` (jsonl,
        json, csv, text: one item, or parquet); ``jsonl=True`` is ``format="jsonl"``,
        ``jsonl=False`` ``format="text"``. ``allow_no_ngrams``: store it even if it protects
        no n-gram (else the service refuses it, 422)."""
        if format is None:
            if jsonl is None:
                raise ValueError("say how to read the file: format='jsonl', 'json', 'csv', "
                                 "'text' or 'parquet'")  # fmt: skip
            format = "jsonl" if jsonl else "text"
        params: dict[str, str] = {"format": format}
        if allow_no_ngrams:
            params["allow_no_ngrams"] = "true"
        return dict(
            self._request(
                "PUT",
                f"/v1/protected-sets/{name}",
                content=content,
                params=params,
                headers={"content-type": "application/octet-stream"},
            )
        )

    def protected_sets(self) -> list[dict[str, Any]]:
        """Every protected set's name and counts."""
        return list(self._request("GET", "/v1/protected-sets"))

    def delete_protected_set(self, name: str) -> None:
        """Delete a protected set."""
        self._request("DELETE", f"/v1/protected-sets/{name}")

    def contamination(
        self, texts: Sequence[str], *, sets: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        """Per text: whether it is contaminated, and the protected items it shares n-grams with
        (each hit's ``ngram`` as text: the answer names it by its position in ``ngrams``)."""
        out: list[dict[str, Any]] = []
        for chunk in self._batched(texts):
            body: dict[str, Any] = {"texts": list(chunk)}
            if sets is not None:
                body["sets"] = list(sets)
            answer = self._request("POST", "/v1/contamination", json=body)
            ngrams = answer.get("ngrams", [])
            for result in answer["results"]:
                for hit in result["hits"]:
                    if hit["ngram"] is not None:
                        hit["ngram"] = ngrams[hit["ngram"]]
            out += answer["results"]
        return out

    def stats(self) -> dict[str, Any]:
        """The service's counts."""
        return dict(self._request("GET", "/v1/stats"))


def _as_document(doc: Mapping[str, Any] | Doc) -> dict[str, Any]:
    """A Doc or a mapping as the JSON object the API takes; anything else is refused here."""
    if isinstance(doc, Mapping):
        return dict(doc)
    if isinstance(doc, tuple) and hasattr(doc, "_asdict"):  # neardup.Doc, a NamedTuple
        return dict(doc._asdict())
    raise TypeError(
        f"a document is a neardup.Doc or a mapping with 'id' and 'text', not {type(doc).__name__}"
    )


def _conflicts(response: httpx.Response) -> list[str]:
    try:
        ids = response.json().get("conflicts")
    except (ValueError, AttributeError):
        return []
    return [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []


def _retry_after(response: httpx.Response, default: float) -> float:
    value = response.headers.get("retry-after", "")
    return float(value) if value.replace(".", "", 1).isdigit() else default


def _detail(response: httpx.Response) -> Any:
    try:
        return response.json().get("detail", response.text)
    except ValueError:
        return response.text


def _quote(doc_id: str) -> str:
    """An id as one path segment: every reserved character percent-encoded, ``/`` too."""
    return quote(doc_id, safe="")
