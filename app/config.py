"""Service settings, from ``NEARDUP_*`` environment variables or ``neardup serve`` flags."""

from __future__ import annotations

import ipaddress
import os
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from neardup.core.engine import MinhashParams

__all__ = ["Settings", "get_settings"]

#: The Host header names a loopback server answers to by default (DNS rebinding sends others).
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
_WILDCARDS = {"", "0.0.0.0", "::", "[::]"}


class Settings(BaseSettings):
    """Everything the service can be told; names match core's keywords (``NEARDUP_NUM_PERM``)."""

    model_config = SettingsConfigDict(env_prefix="NEARDUP_", extra="forbid")

    data_dir: Path = Path("./data")
    #: ``postgresql://USER@HOST:PORT/DB``: a store shared by replicas (DATA_DIR is then unused).
    store_url: str | None = None
    # The index parameters: checked together by core's MinhashParams (see ``params``).
    num_perm: int = 128
    bands: int = 16
    threshold: float = 0.8
    k: int = 5
    seed: int = 0
    ngram: int = 13
    #: ``words`` or ``multilingual`` (docs/algorithm.md section 1); a store is locked to it.
    tokenizer: Literal["words", "multilingual"] = "words"
    workers: int = Field(default_factory=lambda: os.cpu_count() or 1, ge=1)
    max_batch: int = Field(10_000, ge=1)
    max_body_bytes: int = Field(64 * 2**20, ge=1)
    store_text: bool = True
    api_keys_file: Path | None = None
    max_text_chars: int = Field(16 * 2**20, ge=1)
    max_inflight: int = Field(8, ge=1)
    max_buffered_bytes: int = Field(512 * 2**20, ge=1)
    #: Seconds a client has to send its request headers, and then as long for its body.
    client_timeout: float = Field(60.0, gt=0)
    max_matches: int = Field(100, ge=1)
    # A protected set costs about 35 bytes of memory a byte of its file (n-grams and labels).
    max_protected_sets: int = Field(100, ge=1)
    contamination_texts_per_minute: int = Field(10_000, ge=1)
    max_protected_bytes: int = Field(128 * 2**20, ge=1)
    max_batch_memory: int = Field(4 * 2**30, ge=1)
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, lt=65536)
    #: Host header names accepted, a comma list ("*": any); default: loopback names and HOST.
    allowed_hosts: Annotated[list[str] | None, NoDecode] = None

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            names = [name.strip() for name in value.split(",") if name.strip()]
            return names or None
        return value

    @field_validator("store_url")
    @classmethod
    def _postgres_url(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("postgresql://", "postgres://")):
            raise ValueError("store_url must be a postgresql:// (or postgres://) URL")
        return url or None

    @field_validator("allowed_hosts")
    @classmethod
    def _host_patterns(cls, names: list[str] | None) -> list[str] | None:
        for name in names or ():
            if "*" in name and name != "*" and (not name.startswith("*.") or "*" in name[1:]):
                raise ValueError(
                    f"allowed host {name!r}: a wildcard is '*' alone or a leading '*.' "
                    "(like '*.example.com')"
                )
        return names

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
    def host_names(self) -> list[str]:
        """The Host header names to accept (``*`` for any): ALLOWED_HOSTS, else the loopback
        names plus HOST when it is a name or a specific address."""
        if self.allowed_hosts is not None:
            return [_bracketed(name.lower()) for name in self.allowed_hosts]
        names = list(LOOPBACK_HOSTS)
        if self.host not in _WILDCARDS and _bracketed(self.host.lower()) not in names:
            names.append(_bracketed(self.host.lower()))
        return names

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
            tokenizer=self.tokenizer,
        )


def _bracketed(host: str) -> str:
    """An IPv6 address as a Host header writes it (``[::1]``); anything else unchanged."""
    try:
        return f"[{host}]" if ipaddress.ip_address(host).version == 6 else host
    except ValueError:
        return host


@lru_cache
def get_settings() -> Settings:
    """The settings of this process, read once (tests override the dependency)."""
    return Settings()
