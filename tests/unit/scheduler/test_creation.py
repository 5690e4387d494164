from typing import Any

import pytest

from services.scheduler.adapters.catalog_loader import load_default_catalog
from services.scheduler.domain.creation import (
    CreationDraft,
    apply_step,
    complete_draft,
    parse_spec,
    to_workload,
)
from services.scheduler.domain.errors import ValidationError
from services.scheduler.domain.model import GpuRequest, MigRequest
from tests.unit.scheduler.builders import NOW

CATALOG = load_default_catalog()
NETWORK = {
    "vpc_id": "vpc-1a2b",
    "subnet_id": "subnet-3c4d",
    "security_group_id": "sg-5e6f",
    "public_ip": True,
}


def spec(**overrides: Any) -> dict[str, Any]:
    base = {
        "image": {"name": "pytorch", "version": "2.3"},
        "resources": {"kind": "gpu", "model": "A100", "count": 2},
        "network": NETWORK,
    }
    return {**base, **overrides}


def test_catalog_offers_the_four_framework_families() -> None:
    assert {i.framework for i in CATALOG.images.values()} == {"PyTorch", "TensorFlow", "JAX", "CUDA"}


def test_valid_one_shot_request_becomes_a_submitted_workload() -> None:
    w = to_workload(parse_spec(spec(urgency=0.9), catalog=CATALOG), workload_id="w1", tenant="acme", now=NOW)
    assert (w.image, w.resources, w.urgency) == ("pytorch:2.3", GpuRequest(model="A100", count=2), 0.9)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"resources": {"kind": "gpu", "model": "A100", "count": 0}}, "resources.count"),
        ({"resources": {"kind": "mig", "profile": "big"}}, "resources.profile"),
        ({"image": {"name": "pytorch", "version": "0.1"}}, "image.version"),
        ({"image": {"name": "caffe", "version": "1"}}, "image.name"),
        ({"network": {**NETWORK, "subnet_id": "nope"}}, "network.subnet_id"),
        ({"urgency": 1.5}, "urgency"),
    ],
)
def test_invalid_field_is_named_in_the_error(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_spec(spec(**overrides), catalog=CATALOG)
    assert err.value.field == field


def test_draft_filled_step_by_step_completes_to_the_same_spec() -> None:
    draft = CreationDraft(options={"urgency": 0.7})
    draft = apply_step(draft, step="image", payload={"name": "jax", "version": "0.4.30"}, catalog=CATALOG)
    draft = apply_step(
        draft, step="resources", payload={"kind": "mig", "profile": "1g.10gb"}, catalog=CATALOG
    )
    draft = apply_step(draft, step="network", payload=NETWORK, catalog=CATALOG)
    done = complete_draft(draft, catalog=CATALOG)
    assert (done.resources, done.urgency, done.network.public_ip) == (
        MigRequest(profile="1g.10gb"),
        0.7,
        True,
    )


def test_draft_step_error_names_the_step_field() -> None:
    with pytest.raises(ValidationError) as err:
        apply_step(CreationDraft(), step="network", payload={**NETWORK, "vpc_id": "x"}, catalog=CATALOG)
    assert err.value.field == "network.vpc_id"


def test_incomplete_draft_names_the_missing_step() -> None:
    with pytest.raises(ValidationError) as err:
        complete_draft(CreationDraft(), catalog=CATALOG)
    assert err.value.field == "image"
