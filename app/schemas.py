"""Request and response models of the HTTP API (shared/spec/API.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["ConfigResponse", "SignaturesRequest", "SignaturesResponse"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class SignaturesRequest(_Strict):
    """``POST /v1/signatures``."""

    texts: list[str]


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
