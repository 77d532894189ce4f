"""Service settings, from ``NEARDUP_*`` environment variables or ``neardup serve`` flags."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from core.engine import MinhashParams

__all__ = ["Settings", "get_settings"]


class Settings(BaseSettings):
    """Everything the service can be told; names match core's keywords (``NEARDUP_NUM_PERM``)."""

    model_config = SettingsConfigDict(env_prefix="NEARDUP_", extra="forbid")

    data_dir: Path = Path("./data")
    # The index parameters: checked together by core's MinhashParams (see ``params``).
    num_perm: int = 128
    bands: int = 16
    threshold: float = 0.8
    k: int = 5
    seed: int = 0
    ngram: int = 13
    workers: int = Field(default_factory=lambda: os.cpu_count() or 1, ge=1)
    max_batch: int = Field(10_000, ge=1)
    max_body_bytes: int = Field(64 * 2**20, ge=1)
    store_text: bool = True
    api_keys_file: Path | None = None
    max_text_chars: int = Field(16 * 2**20, ge=1)
    max_inflight: int = Field(8, ge=1)
    max_buffered_bytes: int = Field(512 * 2**20, ge=1)
    max_matches: int = Field(100, ge=1)
    max_batch_memory: int = Field(4 * 2**30, ge=1)
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, lt=65536)

    @model_validator(mode="after")
    def _valid_params(self) -> Settings:
        self.params  # noqa: B018 - MinhashParams raises ParameterError (a ValueError) if invalid
        if self.max_buffered_bytes < self.max_body_bytes:
            raise ValueError(
                f"max_buffered_bytes ({self.max_buffered_bytes}) is below max_body_bytes "
                f"({self.max_body_bytes}): a body the limit allows could never be admitted; "
                "raise NEARDUP_MAX_BUFFERED_BYTES"
            )
        return self

    @property
    def params(self) -> MinhashParams:
        """The index parameters as core's validated ``MinhashParams``."""
        return MinhashParams(
            num_perm=self.num_perm,
            bands=self.bands,
            threshold=self.threshold,
            k=self.k,
            seed=self.seed,
            ngram=self.ngram,
        )


@lru_cache
def get_settings() -> Settings:
    """The settings of this process, read once (tests override the dependency)."""
    return Settings()
