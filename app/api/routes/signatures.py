"""``/v1/config`` and ``/v1/signatures``."""

from __future__ import annotations

from fastapi import APIRouter

from neardup.app.api.bodies import StrictJSONRoute
from neardup.app.api.deps import ServiceDep, SettingsDep, require
from neardup.app.api.schemas import ERRORS, ConfigResponse, SignaturesRequest, SignaturesResponse

router = APIRouter(prefix="/v1", tags=["signatures"], route_class=StrictJSONRoute, responses=ERRORS)


@router.get("/config", dependencies=[require("read")])
async def config(settings: SettingsDep) -> ConfigResponse:
    """The index parameters."""
    params = settings.params
    return ConfigResponse(
        **params.as_dict(), rows=params.rows, lsh_threshold=params.lsh_threshold,
        query_threshold_min=params.query_floor, tokenizer_version=params.tokenizer_version,
    )  # fmt: skip


@router.post("/signatures", dependencies=[require("read")])
async def signatures(body: SignaturesRequest, service: ServiceDep) -> SignaturesResponse:
    """``core.minhash.signatures`` of the texts, computed in the process pool."""
    sigs = await service.signatures(body.texts)
    return SignaturesResponse(signatures=sigs.tolist())
