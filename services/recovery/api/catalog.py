"""The fault catalog routes, and the catalog lookups the other routers share."""

from __future__ import annotations

from fastapi import APIRouter, Request

from libs.common.auth import Caller
from libs.common.http import NotFound, Unprocessable
from libs.common.http.errors import error_responses
from services.recovery.api.schemas import CatalogOut
from services.recovery.domain.catalog import FaultCatalog, FaultEntry

__all__ = ["catalog_of", "known_fault_type", "router"]

router = APIRouter(tags=["recovery"])


def catalog_of(request: Request) -> FaultCatalog:
    """The catalog the app loaded at start-up."""
    catalog: FaultCatalog = request.app.state.catalog
    return catalog


def known_fault_type(request: Request, fault_type: str | None) -> str | None:
    """The fault type filter as given; Unprocessable naming ``fault_type`` when the catalog lacks it."""
    if fault_type is not None and fault_type not in catalog_of(request).entries:
        raise Unprocessable(f"unknown fault type {fault_type!r}; see /v1/catalog/faults", field="fault_type")
    return fault_type


@router.get("/v1/catalog/faults")
async def list_faults(request: Request, _: Caller) -> CatalogOut:
    catalog = catalog_of(request)
    return CatalogOut(sources=dict(catalog.sources), faults=list(catalog.entries.values()))


@router.get("/v1/catalog/faults/{key}", responses=error_responses(404))
async def get_fault(request: Request, _: Caller, key: str) -> FaultEntry:
    entry = catalog_of(request).entries.get(key)
    if entry is None:
        raise NotFound(f"no fault type {key!r} in the catalog", field="key")
    return entry
