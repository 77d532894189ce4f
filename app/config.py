"""Service settings, from ``NEARDUP_*`` environment variables or ``neardup serve`` flags."""

from __future__ import annotations

import ipaddress
import logging
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import unquote, unquote_plus

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from neardup.core.engine import MinhashParams, ParameterError

__all__ = [
    "ANSWER_SETTINGS",
    "BatchSettings",
    "Settings",
    "env_tokenizer",
    "get_settings",
    "redact",
    "url_secrets",
]

log = logging.getLogger("neardup")

#: The settings that change what a replica answers, beyond the index parameters (which
#: ``MinhashParams.index_params`` locks): recorded in the store by the first start and refused
#: when they differ afterwards, on every replica and every restart; ``neardup store-settings``
#: changes them for all replicas at once (docs/api.md, "A shared store and replicas").
ANSWER_SETTINGS = ("threshold", "ngram", "max_matches")

#: The index an embedded store's service serves when INDEX is not set, inside DATA_DIR.
DEFAULT_INDEX = "index"

#: The Host header names a loopback server answers to by default (DNS rebinding sends others).
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
_WILDCARDS = {"", "0.0.0.0", "::", "[::]"}
#: The spellings of a PostgreSQL URL accepted (SQLAlchemy's driver names included); each is
#: given to libpq as ``postgresql://``.
STORE_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg2")
#: What a URL's user and password may hold unencoded (RFC 3986 userinfo): anything else (an
#: ``@``, ``/``, ``?``, ``#``, a space ...) must be percent-encoded, or libpq would read part
#: of the password as a host, port or database name (and print it in its errors).
_USERINFO = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:%]*")
#: A PostgreSQL schema name neardup accepts: a plain lower-case identifier.
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


class BatchSettings(BaseSettings):
    """What the batch commands (``neardup dedup``, ``neardup contamination``) read from the
    environment; a flag wins. Only ``NEARDUP_TOKENIZER``, which docs/algorithm.md gives as
    ``--tokenizer``'s equivalent (the service reads it through ``Settings``)."""

    model_config = SettingsConfigDict(env_prefix="NEARDUP_", extra="ignore")

    tokenizer: Literal["words", "multilingual"] = "words"


def env_tokenizer() -> str:
    """``NEARDUP_TOKENIZER`` (``words`` if unset); ParameterError naming it if it is no
    tokenizer."""
    from pydantic import ValidationError

    try:
        return BatchSettings().tokenizer
    except ValidationError:
        given = os.environ.get("NEARDUP_TOKENIZER", "")
        raise ParameterError(
            f"NEARDUP_TOKENIZER={given!r}: tokenizer must be one of words, multilingual"
        ) from None


class Settings(BaseSettings):
    """Everything the service can be told; names match core's keywords (``NEARDUP_NUM_PERM``)."""

    # Inputs are never echoed in validation errors: STORE_URL may hold a password.
    model_config = SettingsConfigDict(
        env_prefix="NEARDUP_", extra="forbid", hide_input_in_errors=True
    )

    data_dir: Path = Path("./data")
    #: ``postgresql://USER@HOST:PORT/DB``: a store shared by replicas (DATA_DIR is then unused).
    store_url: str | None = None
    #: The PostgreSQL schema that holds the shared store's tables (docs/postgres.md).
    store_schema: str = "public"
    #: The persistent index the service answers for and writes its documents into
    #: (FLUSH_ROWS, FLUSH_SECONDS; a directory or an fsspec URL; docs/index.md), shared with
    #: ``neardup dedup --index``: its documents are matched, linked into clusters and known by
    #: id. None: ``DATA_DIR/index`` (created at the first start) with the embedded store; with
    #: a shared store (STORE_URL) none, as replicas must all read one index: set it to a
    #: location every replica reads, else each replica holds every document in memory.
    index: str | None = None
    #: Seconds between two readings of the served index's manifest: parts committed since
    #: (by ``neardup dedup --index``, or a compaction) are then served, and the service's
    #: documents linked to their rows. 0: never (they are seen at the next start).
    index_refresh: float = Field(60.0, ge=0)
    #: With INDEX, the service writes its own documents into it as a new part (the batch
    #: engines' commit) once this many were registered since the last flush (and at
    #: shutdown). 0: not by size. With FLUSH_SECONDS 0 too, the index is read only.
    flush_rows: int = Field(100_000, ge=0)
    #: ... and once this many seconds passed since the last flush with documents (or
    #: deletions) waiting. 0: not by age. On a shared store (STORE_URL) one replica at a time
    #: flushes (the others skip; docs/postgres.md).
    flush_seconds: float = Field(300.0, ge=0)
    #: With INDEX and flushing: the most live rows one background compaction of the index's
    #: parts rewrites (its child process peaks at ~750 bytes a row plus ~0.3 GB); parts
    #: larger than this are left alone. 0: the service never compacts.
    compact_rows: int = Field(1_000_000, ge=0)
    #: ... and how many parts of one size tier are merged into one (the tier's width: parts
    #: stay within COMPACT_PARTS - 1 per tier).
    compact_parts: int = Field(10, ge=2)
    #: Seconds a call to the shared store may take before it is abandoned (503, and not
    #: ready until a call succeeds); also how stale a follower may be before it is not ready.
    store_timeout: float = Field(10.0, gt=0)
    #: Seconds the shared store keeps its log of changes (and the deleted documents' rows the
    #: log names): older history is pruned, and a replica further behind than this reloads
    #: its whole state from the live documents instead of replaying the log.
    log_retention_seconds: float = Field(3600.0, gt=0)
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
    #: Values (numbers, strings, ..., arrays and objects) a JSON body may hold, counted as it
    #: is read (413 beyond): each costs 30 to 60 bytes of memory and time to validate. 16 Mi:
    #: a body at MAX_BODY_BYTES of numbers of 3 characters or more passes (10,000 documents
    #: with 1,000 numbers of meta each: 10 M).
    max_json_values: int = Field(16 * 2**20, ge=1)
    #: Arrays and objects a JSON body may hold (413 beyond): the garbage collector walks every
    #: one, holding the GIL (4 M small arrays: a second), so they are bounded apart.
    max_json_containers: int = Field(2**20, ge=1)
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
    #: Texts a key with the protect scope (or anyone, without keys) may check for
    #: contamination a minute.
    contamination_texts_per_minute: int = Field(10_000, ge=1)
    #: Words a key without the protect scope may have checked for contamination a minute, each
    #: text costing its words and at least NGRAM (one whole window): a verdict, about one bit of
    #: the protected sets, costs at least NGRAM words, so such a key learns at most about this
    #: / NGRAM bits a minute by probing (docs/api.md, "Residual risk").
    contamination_words_per_minute: int = Field(10_000, ge=1)
    #: The deprecated name of CONTAMINATION_WORDS_PER_MINUTE (checks were charged by n-grams
    #: before): its value is taken as words, with a warning; refused together with the new name.
    contamination_ngrams_per_minute: int | None = Field(None, ge=1)
    max_protected_bytes: int = Field(128 * 2**20, ge=1)
    max_batch_memory: int = Field(4 * 2**30, ge=1)
    #: While recovering at start, a progress line (documents read, rate, seconds left) at
    #: most this often.
    recovery_log_seconds: float = Field(5.0, ge=0)
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, lt=65536)
    #: Addresses of the reverse proxies whose X-Forwarded-Proto/-For are believed (a comma list,
    #: "*" any): behind a TLS proxy on another host, its address, so that /ui's cookie is Secure.
    #: Default: uvicorn's, the loopback proxy only (127.0.0.1).
    forwarded_allow_ips: str = "127.0.0.1"
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
        """A PostgreSQL URL in any accepted spelling, as ``postgresql://...``; the message of a
        refusal never quotes the URL (it may hold a password)."""
        if not url:
            return None
        scheme, sep, rest = url.strip().partition("://")
        if not sep or scheme.lower() not in STORE_SCHEMES:
            raise ValueError(
                "store_url must be a postgresql://USER:PASSWORD@HOST:PORT/DB URL "
                "(postgres:// and postgresql+psycopg:// are taken too)"
            )
        userinfo = rest.split("?", 1)[0].rpartition("@")[0]  # an @ in the query is no user
        if not _USERINFO.fullmatch(userinfo):
            raise ValueError(
                "store_url: its user or password holds a character that must be "
                "percent-encoded (such as @ / ? # or a space; in Python "
                "urllib.parse.quote(password, safe='')), or use PGPASSWORD or ~/.pgpass"
            )
        return f"postgresql://{rest}"

    @field_validator("store_schema")
    @classmethod
    def _schema_name(cls, name: str) -> str:
        if not _SCHEMA_NAME.fullmatch(name):
            raise ValueError(
                "store_schema must be a lower-case PostgreSQL identifier: a-z, 0-9 and _, "
                "not starting with a digit, at most 63 characters"
            )
        return name

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
        if self.contamination_ngrams_per_minute is not None:
            self._renamed_rate(self.contamination_ngrams_per_minute)
        if self.max_buffered_bytes < self.max_body_bytes:
            raise ValueError(
                f"max_buffered_bytes ({self.max_buffered_bytes}) is below max_body_bytes "
                f"({self.max_body_bytes}): a body the limit allows could never be admitted; "
                "raise NEARDUP_MAX_BUFFERED_BYTES"
            )
        return self

    @property
    def index_url(self) -> str | None:
        """The index served: INDEX, else the data directory's (``DATA_DIR/index``) with the
        embedded store, else None (a shared store's replicas need one INDEX they all read)."""
        if self.index is not None:
            return self.index
        return None if self.store_url is not None else str(self.data_dir / DEFAULT_INDEX)

    @property
    def flushes(self) -> bool:
        """Whether the service writes its documents into the index it serves: with an index
        (``index_url``) and FLUSH_ROWS or FLUSH_SECONDS set (on a shared store, one replica at
        a time)."""
        return self.index_url is not None and (self.flush_rows > 0 or self.flush_seconds > 0)

    @property
    def compacts(self) -> bool:
        """Whether the service compacts the index it flushes into (COMPACT_ROWS set)."""
        return self.flushes and self.compact_rows > 0

    def _renamed_rate(self, value: int) -> None:
        """CONTAMINATION_NGRAMS_PER_MINUTE, the deprecated name: its value as the words a
        minute (charging words is never looser than charging n-grams was), with a warning; a
        ValueError when the new name is set too."""
        if "contamination_words_per_minute" in self.model_fields_set:
            raise ValueError(
                "set only NEARDUP_CONTAMINATION_WORDS_PER_MINUTE (--contamination-words-per-"
                "minute): NEARDUP_CONTAMINATION_NGRAMS_PER_MINUTE is its deprecated name"
            )
        log.warning(
            "NEARDUP_CONTAMINATION_NGRAMS_PER_MINUTE (--contamination-ngrams-per-minute) is "
            "deprecated: checks are charged by words now; its value %d is taken as "
            "NEARDUP_CONTAMINATION_WORDS_PER_MINUTE, set that instead",
            value,
        )
        self.contamination_words_per_minute = value

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

    def answer_settings(self) -> dict[str, str]:
        """The ``ANSWER_SETTINGS`` as the store records them (their values as strings)."""
        return {name: str(getattr(self, name)) for name in ANSWER_SETTINGS}

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


def url_secrets(url: str) -> list[str]:
    """Every spelling of the password a PostgreSQL URL may hold (in its user part or a
    ``password=`` parameter; as written and percent-decoded), longest first."""
    found: set[str] = set()
    rest = url.partition("://")[2]
    userinfo = rest.rpartition("@")[0]
    candidates = [userinfo.partition(":")[2]] if ":" in userinfo else []
    first = rest.split("/", 1)[0]  # libpq's reading: the user part ends at the first @
    if "@" in first:
        candidates.append(first.split("@", 1)[0].partition(":")[2])
    for pair in re.split(r"[?&]", rest)[1:]:
        key, _, value = pair.partition("=")
        if unquote_plus(key).strip().lower() == "password":
            candidates.append(value)
    for value in candidates:
        found.update(v for v in (value, unquote(value), unquote_plus(value)) if v)
    return sorted(found, key=len, reverse=True)


def redact(text: str, url: str | None) -> str:
    """``text`` with every spelling of ``url``'s password replaced by ``***``."""
    if url:
        for secret in url_secrets(url):
            text = text.replace(secret, "***")
    return text


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
