"""Service settings, from ``NEARDUP_*`` environment variables or ``neardup serve`` flags."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "get_settings"]


class Settings(BaseSettings):
    """Everything the service can be told; names match core's keywords (``NEARDUP_NUM_PERM``)."""

    model_config = SettingsConfigDict(env_prefix="NEARDUP_", extra="forbid")

    data_dir: Path = Path("./data")
    num_perm: int = Field(128, ge=1)
    bands: int = Field(16, ge=1)
    threshold: float = Field(0.8, gt=0.0, le=1.0)
    k: int = Field(5, ge=1)
    seed: int = Field(0, ge=0, lt=2**64)
    ngram: int = Field(13, ge=1)
    workers: int = Field(default_factory=lambda: os.cpu_count() or 1, ge=1)
    max_batch: int = Field(10_000, ge=1)
    max_body_bytes: int = Field(64 * 2**20, ge=1)
    store_text: bool = True
    api_keys_file: Path | None = None
    max_text_chars: int = Field(16 * 2**20, ge=1)
    max_inflight: int = Field(8, ge=1)
    max_batch_memory: int = Field(4 * 2**30, ge=1)
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, lt=65536)

    @model_validator(mode="after")
    def _bands_divide_num_perm(self) -> Settings:
        if self.num_perm % self.bands:
            raise ValueError(
                f"num_perm ({self.num_perm}) must be a multiple of bands ({self.bands}): "
                "each band takes num_perm / bands rows"
            )
        return self

    @property
    def rows(self) -> int:
        """Rows per band: ``num_perm / bands``."""
        return self.num_perm // self.bands


@lru_cache
def get_settings() -> Settings:
    """The settings of this process, read once (tests override the dependency)."""
    return Settings()
