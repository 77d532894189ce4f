"""A JSON request body read into its route's model, a piece at a time, in a worker thread.

The rule (docs/api.md, "Bounded requests"): no single call that holds the GIL grows with the
whole body. Core's ``read_json`` reads a long body a piece at a time (the top-level object a
member at a time, long arrays an item or a run of short items at a time), counting its values
(MAX_JSON_VALUES, MAX_JSON_CONTAINERS: 413 beyond) and refusing an unknown top-level field
before reading its value (422, as pydantic words it); a batch (``documents``, ``texts``) is
then validated an item at a time, the rest of the model once, with the batch's items already
validated. The 422's ``loc`` paths are pydantic's (``["body", "documents", 3, "text"]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, get_args

from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from neardup.core.engine import JSONError, read_json

__all__ = ["BATCH_FIELDS", "BodyLimits", "read_body", "strict_json"]

#: The top-level lists that are batches: at most MAX_BATCH items, validated one at a time.
BATCH_FIELDS = ("documents", "texts")
#: What each limit of ``read_json`` is called in the settings.
_SETTING = {"values": "MAX_JSON_VALUES", "containers": "MAX_JSON_CONTAINERS"}


@dataclass(frozen=True)
class BodyLimits:
    """The settings a JSON body is read under."""

    max_batch: int
    max_values: int
    max_containers: int


def strict_json(text: str, limits: BodyLimits | None = None, keys: Any = None) -> Any:
    """The JSON value of ``text``, strictly (core's ``read_json``: no NaN, Infinity or number
    beyond a float's range, no integer longer than Python reads, at most MAX_JSON_DEPTH levels,
    no duplicate key; a long text a piece at a time); JSONError saying what and where."""
    if limits is None:
        return read_json(text, finite=True, unique_keys=True)
    return read_json(
        text, finite=True, unique_keys=True, max_values=limits.max_values,
        max_containers=limits.max_containers, keys=keys,
        batches=dict.fromkeys(BATCH_FIELDS, limits.max_batch),
    )  # fmt: skip


def read_body(body: bytes, model: type[BaseModel], limits: BodyLimits) -> BaseModel:
    """``body`` as an instance of ``model``: HTTPException 400 (malformed), 413 (a batch over
    MAX_BATCH, too many values) or RequestValidationError (422) saying what and where."""
    value = _parse(body, model, limits)
    _check_batch(value, limits.max_batch)
    return _validated(model, value)


def _parse(body: bytes, model: type[BaseModel], limits: BodyLimits) -> Any:
    if not body.strip():
        raise HTTPException(400, "the request body is empty; send a JSON object")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HTTPException(400, f"the body is not valid UTF-8 (byte {exc.start})") from None
    try:
        return strict_json(text, limits, _known_keys(model))
    except JSONError as exc:  # bad syntax, NaN/Infinity, 1e999, duplicate keys, long integers
        if exc.kind == "key":
            raise _unknown_field(exc.field or "") from None
        if exc.kind == "items":  # told at the first item past MAX_BATCH, the rest unread
            detail = f"a batch holds at most {limits.max_batch} items, got more in '{exc.field}'"
            raise HTTPException(413, detail) from None
        if exc.kind == "values":
            setting = _SETTING.get(exc.field or "", "MAX_JSON_VALUES")
            detail = f"the body is over a limit: {exc.reason} ({setting})"
            raise HTTPException(413, detail) from None
        where = f" at line {exc.line} column {exc.column}" if exc.kind == "syntax" else ""
        raise HTTPException(400, f"invalid JSON{where}: {exc.reason}") from None


@cache
def _known_keys(model: type[BaseModel]) -> frozenset[str] | None:
    """The top-level keys ``model`` takes, if it refuses any other (None if it takes any)."""
    if model.model_config.get("extra") != "forbid":
        return None
    names = {f.alias or name for name, f in model.model_fields.items()}
    return frozenset(names | set(model.model_fields))


def _unknown_field(key: str) -> RequestValidationError:
    """The 422 pydantic gives an unknown field (told before its value is read)."""
    error = {"type": "extra_forbidden", "loc": ("body", key),
             "msg": "Extra inputs are not permitted", "input": None}  # fmt: skip
    return RequestValidationError([error])


def _check_batch(value: Any, max_batch: int) -> None:
    """413 for a batch field holding over ``max_batch`` items."""
    if not isinstance(value, dict):
        return
    for field in BATCH_FIELDS:
        items = value.get(field)
        if isinstance(items, list) and len(items) > max_batch:
            raise HTTPException(
                413, f"a batch holds at most {max_batch} items, got {len(items)} in '{field}'"
            )


def _validated(model: type[BaseModel], value: Any) -> BaseModel:
    """``value`` validated as ``model``, a batch's items one call each."""
    field = _batch_field(model)
    if field is None or not isinstance(value, dict) or not isinstance(value.get(field), list):
        return _whole(model, value)
    adapter = _item_adapter(model, field)
    items: list[Any] = []
    errors: list[Any] = []
    for i, item in enumerate(value[field]):
        try:
            items.append(adapter.validate_python(item))
        except ValidationError as exc:
            errors.extend(_located(exc, ("body", field, i)))
    if errors:  # then the other fields' errors, in pydantic's order (the batch comes first)
        try:
            model.model_validate({**value, field: []})
        except ValidationError as exc:
            errors.extend(_located(exc, ("body",)))
        raise RequestValidationError(errors)
    return _whole(model, {**value, field: items})  # validated items are taken as they are


def _whole(model: type[BaseModel], value: Any) -> BaseModel:
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise RequestValidationError(_located(exc, ("body",))) from None


def _located(exc: ValidationError, prefix: tuple[Any, ...]) -> list[Any]:
    return [{**e, "loc": (*prefix, *e["loc"])} for e in exc.errors(include_url=False)]


@cache
def _batch_field(model: type[BaseModel]) -> str | None:
    return next((f for f in BATCH_FIELDS if f in model.model_fields), None)


@cache
def _item_adapter(model: type[BaseModel], field: str) -> TypeAdapter[Any]:
    """What validates one item of ``model``'s batch ``field`` as the model would (strictly,
    when the model is strict)."""
    (item,) = get_args(model.model_fields[field].annotation)
    if isinstance(item, type) and issubclass(item, BaseModel):
        return TypeAdapter(item)
    return TypeAdapter(item, config=ConfigDict(strict=bool(model.model_config.get("strict"))))
