"""``/v1/config`` and ``/v1/signatures``."""

from __future__ import annotations

from fastapi import APIRouter

from app.bodies import StrictJSONRoute
from app.deps import ServiceDep, SettingsDep, require
from app.schemas import ERRORS, ConfigResponse, SignaturesRequest, SignaturesResponse
from core.lsh import lsh_threshold

router = APIRouter(prefix="/v1", tags=["signatures"], route_class=StrictJSONRoute, responses=ERRORS)


@router.get("/config", dependencies=[require("read")])
async def config(settings: SettingsDep) -> ConfigResponse:
    """The index parameters."""
    return ConfigResponse(
        num_perm=settings.num_perm,
        bands=settings.bands,
        rows=settings.rows,
        threshold=settings.threshold,
        k=settings.k,
        seed=settings.seed,
        ngram=settings.ngram,
        lsh_threshold=lsh_threshold(settings.bands, settings.rows),
    )


@router.post("/signatures", dependencies=[require("read")])
async def signatures(body: SignaturesRequest, service: ServiceDep) -> SignaturesResponse:
    """``core.minhash.signatures`` of the texts, computed in the process pool."""
    sigs = await service.signatures(body.texts)
    return SignaturesResponse(signatures=sigs.tolist())
