from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from services.inventory.adapters.catalog_yaml import load_catalog
from services.inventory.domain.catalog import Catalog, parse_catalog
from services.inventory.domain.errors import MigNotSupportedError, UnknownModelError

REQUIRED = [
    "T4",
    "L4",
    "L40S",
    "A10",
    "A100-40GB",
    "A100-80GB",
    "H100-80GB-SXM",
    "H100-80GB-PCIe",
    "H200-141GB",
]


def test_catalog_lists_every_model_the_issue_requires(catalog: Catalog) -> None:
    assert set(REQUIRED) <= set(catalog.names)


def test_every_model_names_a_source_for_its_figures(catalog: Catalog) -> None:
    for model in catalog.models:
        assert catalog.sources[model.source].startswith("https://")


def test_lookup_accepts_aliases_and_any_case(catalog: Catalog) -> None:
    assert catalog.get("nvidia a100-sxm4-80gb").name == "A100-80GB"
    assert catalog.get(" h100-80gb ").name == "H100-80GB-SXM"


def test_unknown_model_raises_a_domain_error_listing_known_models(catalog: Catalog) -> None:
    with pytest.raises(UnknownModelError, match="B300") as caught:
        catalog.get("B300")
    assert "A100-80GB" in caught.value.known


def test_mig_is_supported_exactly_on_a100_h100_and_h200(catalog: Catalog) -> None:
    with_mig = {m.name for m in catalog.models if m.mig_supported}
    assert with_mig == {"A100-40GB", "A100-80GB", "H100-80GB-SXM", "H100-80GB-PCIe", "H200-141GB"}


@pytest.mark.parametrize(
    ("model", "profiles"),
    [
        ("A100-40GB", {"1g.5gb": 7, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1}),
        (
            "H100-80GB-SXM",
            {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
        ),
        ("H200-141GB", {"1g.18gb": 7, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1, "7g.141gb": 1}),
    ],
)
def test_mig_profiles_and_instance_limits_match_the_mig_user_guide(
    catalog: Catalog, model: str, profiles: dict[str, int]
) -> None:
    spec = catalog.get(model)
    for name, limit in profiles.items():
        assert spec.mig_profile(name).max_instances == limit


def test_full_mig_profile_holds_the_whole_gpu_memory(catalog: Catalog) -> None:
    for model in (m for m in catalog.models if m.mig_supported):
        largest = max(model.mig_profiles, key=lambda p: p.memory_slices)
        assert (largest.compute_slices, largest.memory_slices) == (7, 8)
        assert largest.memory_gb == model.memory_gb


def test_asking_a_non_mig_model_for_a_profile_is_refused(catalog: Catalog) -> None:
    with pytest.raises(MigNotSupportedError, match="L40S"):
        catalog.get("L40S").mig_profile("1g.10gb")


def test_tensor_and_nvlink_flags_follow_the_figures(catalog: Catalog) -> None:
    t4, h100 = catalog.get("T4"), catalog.get("H100-80GB-SXM")
    assert t4.tensor_cores
    assert not t4.nvlink
    assert t4.bf16_dense_tflops is None
    assert t4.dense_16bit_tflops == t4.fp16_dense_tflops
    assert h100.nvlink
    assert h100.dense_16bit_tflops == h100.bf16_dense_tflops


def test_catalog_refuses_a_placement_that_runs_past_the_last_memory_slice() -> None:
    data = yaml.safe_load(load_catalog().model_dump_json())
    data["models"][4]["mig_profiles"][0]["placements"] = [7]
    data["models"][4]["mig_profiles"][0]["memory_slices"] = 2
    with pytest.raises(ValidationError, match="runs past"):
        parse_catalog(data=data)


def test_catalog_loads_from_an_explicit_path(tmp_path: Path, catalog: Catalog) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text(catalog.model_dump_json(), encoding="utf-8")
    assert load_catalog(path=path) == catalog
