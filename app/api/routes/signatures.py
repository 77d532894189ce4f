"""``/v1/config`` and ``/v1/signatures``."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from neardup.app.api.answers import answer
from neardup.app.api.bodies import StrictJSONRoute
from neardup.app.api.deps import ServiceDep, SettingsDep, require
from neardup.app.api.schemas import ERRORS, ConfigResponse, SignaturesRequest, SignaturesResponse

router = APIRouter(prefix="/v1", tags=["signatures"], route_class=StrictJSONRoute, responses=ERRORS)


@router.get("/config", dependencies=[require("read")], response_model=ConfigResponse)
async def config(request: Request, settings: SettingsDep) -> Response:
    """The index parameters."""
    params = settings.params
    return await answer(request, lambda _: ConfigResponse(
        **params.as_dict(), rows=params.rows, lsh_threshold=params.lsh_threshold,
        query_threshold_min=params.query_floor, tokenizer_version=params.tokenizer_version,
        window_version=params.window_version, index_served=settings.index_url is not None,
    ))  # fmt: skip


@router.post("/signatures", dependencies=[require("read")], response_model=SignaturesResponse)
async def signatures(request: Request, body: SignaturesRequest, service: ServiceDep) -> Response:
    """``core.minhash.signatures`` of the texts, computed in the process pool; the answer (a
    fixed size a text: NUM_PERM numbers) built and serialised off the event loop."""
    sigs = await service.signatures(body.texts)
    return await answer(request, lambda _: {"signatures": sigs.tolist()})
