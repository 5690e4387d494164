"""Bounds on what tenants write: workload tags and names, project names, int64 amounts, export headers."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from libs.common.http import PROJECT_NAME_PATTERN, valid_project_name
from services.billing.api.exports import content_disposition
from services.billing.api.schemas import BudgetIn, TenantTagsIn
from services.scheduler.adapters.catalog_loader import load_default_catalog
from services.scheduler.api.schemas import DraftIn
from services.scheduler.domain import creation
from services.scheduler.domain.creation import parse_spec
from services.scheduler.domain.errors import ValidationError

CATALOG = load_default_catalog()
NETWORK = {"vpc_id": "vpc-main1", "subnet_id": "subnet-a001", "security_group_id": "sg-default"}
SPEC: dict[str, Any] = {
    "image": {"name": "pytorch", "version": "2.3"},
    "resources": {"kind": "gpu", "model": "A100", "count": 1},
    "network": NETWORK,
}


def _refused(**overrides: Any) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        parse_spec({**SPEC, **overrides}, catalog=CATALOG)
    return caught.value


def test_a_spec_with_bounded_tags_is_accepted() -> None:
    tags = {f"k{i}": "v" * 256 for i in range(64)} | {"project": "vision-2.a_b"}
    tags.pop("k0")
    spec = parse_spec({**SPEC, "tags": tags}, catalog=CATALOG)
    assert spec.tags == tags


def test_a_thousand_tag_keys_are_refused_naming_tags() -> None:
    error = _refused(tags={f"k{i}": "v" for i in range(1000)})
    assert error.field == "tags"
    assert "at most 64" in error.message


@pytest.mark.parametrize(
    ("tags", "field"),
    [
        ({"team": "x" * 10_000_000}, "tags.team"),
        ({"k" * 64: "v"}, "tags." + "k" * 64 + ".[key]"),
        ({"": "v"}, "tags..[key]"),
        ({"team": "a\x01b"}, "tags.team"),
        ({"team": "line\nbreak"}, "tags.team"),
        ({"te\x1bam": "x"}, "tags.te\x1bam.[key]"),
        ({"team": "\u202eevil"}, "tags.team"),
    ],
)
def test_oversized_or_unprintable_tags_are_refused_naming_the_tag(tags: dict[str, str], field: str) -> None:
    assert _refused(tags=tags).field == field


UNSAFE_PROJECTS = ["a\x01\x1bb", "\u202e\U0001f600", "", "x" * 64, "a b", "a/b", "(untagged)", "é"]


@pytest.mark.parametrize("project", UNSAFE_PROJECTS)
def test_a_project_tag_outside_the_safe_set_is_refused_naming_it(project: str) -> None:
    assert _refused(tags={"project": project}).field == "tags.project"


def test_constraints_image_and_model_names_are_bounded() -> None:
    assert _refused(constraints={f"k{i}": "v" for i in range(33)}).field == "constraints"
    assert _refused(image={"name": "p" * 129, "version": "2.3"}).field == "image.name"
    assert _refused(resources={"kind": "gpu", "model": "A" * 129, "count": 1}).field == "resources.model"
    assert (
        _refused(resources={"kind": "mig", "profile": "1g.10gb", "model": "A\x07"}).field == "resources.model"
    )


def test_the_draft_step_for_resources_bounds_the_model_name_too() -> None:
    with pytest.raises(ValidationError) as caught:
        creation.apply_step(
            creation.CreationDraft(),
            step="resources",
            payload={"kind": "gpu", "model": "A" * 1000, "count": 1},
            catalog=CATALOG,
        )
    assert caught.value.field == "resources.model"


def test_draft_options_are_validated_as_a_submission_would_be() -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        DraftIn.model_validate({"options": {"tags": {"project": "a\x01b"}}})
    assert caught.value.errors()[0]["loc"] == ("options", "tags", "project")
    assert DraftIn.model_validate({}).options.model_dump(exclude_unset=True) == {}


def test_the_domain_and_the_platform_agree_on_project_names() -> None:
    assert creation.PROJECT_NAME_PATTERN == PROJECT_NAME_PATTERN
    assert valid_project_name("nlp_2024.q1-a")
    assert not valid_project_name("a\x01b")
    assert not valid_project_name("é")


def test_billing_default_tags_are_bounded_and_their_project_is_a_name() -> None:
    for tags in ({"project": "a\x01b"}, {"project": "\u202e"}, {"k" * 64: "v"}, {"team": "v" * 257}):
        with pytest.raises(pydantic.ValidationError):
            TenantTagsIn(tags=tags)
    assert TenantTagsIn(tags={"project": "nlp", "team": "research"}).tags["project"] == "nlp"


def test_a_budget_limit_above_int64_is_refused() -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        BudgetIn(limit_micro=2**63)
    assert caught.value.errors()[0]["loc"] == ("limit_micro",)
    assert BudgetIn(limit_micro=2**63 - 1).limit_micro == 2**63 - 1


ODD_FILE_NAMES = ["a\x01\x1bb_2025-03-01.csv", "\u202e\U0001f600.csv", 'q"uo;te\\.csv', "ü.csv"]


@pytest.mark.parametrize("name", ODD_FILE_NAMES)
def test_the_export_header_fits_any_file_name(name: str) -> None:
    header = content_disposition(name)
    header.encode("latin-1")  # what a header must be; the old f-string header failed here
    assert header.isprintable()
    assert header.startswith('attachment; filename="')
    assert "filename*=UTF-8''" in header


def test_the_export_header_keeps_a_plain_name_readable() -> None:
    assert content_disposition("vision_2025-03-01_2025-03-02.csv") == (
        'attachment; filename="vision_2025-03-01_2025-03-02.csv"; '
        "filename*=UTF-8''vision_2025-03-01_2025-03-02.csv"
    )
