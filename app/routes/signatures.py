"""``/v1/config`` and ``/v1/signatures``."""

from __future__ import annotations

from fastapi import APIRouter

from app.deps import ServiceDep, SettingsDep
from app.schemas import ConfigResponse, SignaturesRequest, SignaturesResponse
from core.lsh import lsh_threshold

router = APIRouter(prefix="/v1", tags=["signatures"])


@router.get("/config")
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


@router.post("/signatures")
async def signatures(body: SignaturesRequest, service: ServiceDep) -> SignaturesResponse:
    """``core.minhash.signatures`` of the texts, computed in the process pool."""
    service.check_batch(len(body.texts))
    sigs = await service.pool.signatures(body.texts)
    return SignaturesResponse(signatures=sigs.tolist())
