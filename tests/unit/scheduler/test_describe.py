"""The describe reader: English and Chinese text into a draft filled only with what it understood."""

from __future__ import annotations

from typing import Any

import pytest

from services.scheduler.adapters.catalog_loader import gpu_facts, load_default_catalog
from services.scheduler.domain.creation import CreationOptions
from services.scheduler.domain.describe import Description, describe
from services.scheduler.domain.model import GpuRequest, MigRequest
from services.scheduler.domain.queue_preview import PRIORITY_CLASSES

CATALOG = load_default_catalog()
GPUS = gpu_facts()
MEMORY = {g.name: g.memory_gb for g in GPUS}


def read(text: str, *, fleet: frozenset[str] = frozenset()) -> Description:
    return describe(text, catalog=CATALOG, gpus=GPUS, in_fleet=fleet)


def gpu(found: Description) -> GpuRequest:
    assert isinstance(found.draft.resources, GpuRequest), found
    return found.draft.resources


def phrases(found: Description) -> dict[str, str]:
    return {r.phrase: r.meaning for r in found.reading}


@pytest.mark.parametrize("text", ["give me a GPU that can run BERT", "给我分配一个能跑BERT的GPU"])
def test_a_gpu_that_can_run_bert_is_one_whole_gpu_sized_for_bert_inference_in_either_language(
    text: str,
) -> None:
    found = read(text)
    assert gpu(found) == GpuRequest(model="T4", count=1)  # the smallest catalogue GPU; BERT needs < 1 GB
    assert found.not_understood == ()
    bert = phrases(found)["BERT"]
    assert "inference needs about 0.3 GB" in bert
    assert "T4" in bert
    assert found.draft.options == {"kind": "instance"}
    assert found.draft.image is None
    assert found.draft.network is None


def test_a_gpu_model_in_the_fleet_is_preferred_when_it_fits() -> None:
    found = read("give me a GPU that can run BERT", fleet=frozenset({"A100-80GB"}))
    assert gpu(found) == GpuRequest(model="A100-80GB", count=1)
    assert "of the fleet's GPU models" in phrases(found)["BERT"]


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("2 GPUs for BERT", 2),
        ("4x A100 for BERT", 4),
        ("BERT on A100 x8", 8),
        ("一个GPU跑BERT", 1),
        ("两张卡跑BERT", 2),
        ("4张A100跑BERT", 4),
        ("八卡跑BERT", 8),
        ("十六卡训练BERT", 16),
        ("three H100 GPUs for BERT", 3),
    ],
)
def test_counts_in_digits_words_and_chinese_set_the_gpu_count(text: str, count: int) -> None:
    found = read(text)
    assert gpu(found).count == count
    assert found.not_understood == ()


@pytest.mark.parametrize(
    ("text", "model"),
    [
        ("run BERT on an H100 PCIe", "H100-80GB-PCIe"),
        ("run BERT on an A100 80GB", "A100-80GB"),
        ("run BERT on an A100-40GB", "A100-40GB"),
        ("run BERT on an L4", "L4"),
        ("run BERT on an L40S", "L40S"),
        ("run BERT on a Tesla T4", "T4"),
        ("run BERT on NVIDIA A100 80GB PCIe", "A100-80GB"),
        ("run BERT on an H200", "H200-141GB"),
    ],
)
def test_gpu_model_names_and_aliases_ask_for_the_catalogue_model(text: str, model: str) -> None:
    found = read(text)
    assert gpu(found).model == model
    assert found.not_understood == ()


def test_a_model_family_without_memory_picks_the_variant_that_holds_the_need() -> None:
    found = read("fine-tune llama-2 13b on 4x A100")
    # 13 B parameters trained need about 250 GB: 4 x 40 GB do not hold it, 4 x 80 GB do.
    assert gpu(found) == GpuRequest(model="A100-80GB", count=4)
    assert found.draft.options["kind"] == "job"


@pytest.mark.parametrize(
    ("text", "params_b", "mode"),
    [
        ("serve mistral 7b", 7.2, "inference"),
        ("train llama3 8b", 8.0, "training"),
        ("微调 Qwen2.5-7B", 7.0, "training"),
        ("推理 chatglm3-6b", 6.2, "inference"),
        ("inference with gpt-2 xl", 1.5, "inference"),
        ("train t5-large", 0.77, "training"),
        ("serve llama 2 70b", 70.0, "inference"),
    ],
)
def test_model_families_are_sized_by_their_parameters_for_training_or_inference(
    text: str, params_b: float, mode: str
) -> None:
    found = read(text)
    per_param = 16.0 if mode == "training" else 2.0
    need = params_b * per_param * 1.2  # advice.memory_need_gb's rule of thumb
    request = gpu(found)
    assert request.count * MEMORY[request.model] >= need
    # The smallest: no catalogue model holds the need on fewer GPUs of less memory.
    for g in GPUS:
        n = max(1, -(-need // g.memory_gb))
        assert (n, g.memory_gb) >= (request.count, MEMORY[request.model]) or g.name == request.model
    assert f"{mode} needs about {need:.1f} GB" in next(
        iter(r.meaning for r in found.reading if "B parameters" in r.meaning)
    )
    assert found.not_understood == ()


def test_vision_models_use_the_tables_memory_need_not_the_parameter_rule() -> None:
    found = read("train resnet50")
    assert "training needs about 8.0 GB" in phrases(found)["resnet50"]


def test_a_small_slice_is_the_smallest_mig_profile_and_a_named_profile_is_kept() -> None:
    small = read("a small slice for whisper tiny inference")
    assert small.draft.resources == MigRequest(profile="1g.5gb")
    named = read("1g.10gb on an A100 80GB")
    assert named.draft.resources == MigRequest(profile="1g.10gb", model="A100-80GB")
    assert named.not_understood == ()


def test_a_slice_of_no_known_size_is_left_empty_and_said_so() -> None:
    found = read("a slice please")
    assert found.draft.resources is None
    assert "what size" in phrases(found)["a slice"]
    assert any("resources left empty" in n for n in found.notes)


@pytest.mark.parametrize(
    ("text", "image"),
    [
        ("BERT with PyTorch", {"name": "pytorch", "version": "2.4"}),
        ("BERT with pytorch 2.2", {"name": "pytorch", "version": "2.2"}),
        ("BERT on TensorFlow", {"name": "tensorflow", "version": "2.16"}),
        ("用JAX跑BERT", {"name": "jax", "version": "0.4.30"}),
    ],
)
def test_frameworks_choose_a_catalogue_image(text: str, image: dict[str, str]) -> None:
    found = read(text)
    assert found.draft.image is not None
    assert found.draft.image.model_dump() == image
    assert found.not_understood == ()


def test_a_framework_version_the_catalogue_lacks_leaves_the_image_empty() -> None:
    found = read("BERT with pytorch 1.9")
    assert found.draft.image is None
    assert any("no version 1.9" in n for n in found.notes)


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        ("BERT, urgent", "high"),
        ("BERT asap", "high"),
        ("紧急 跑BERT", "high"),
        ("尽快跑BERT", "high"),
        ("BERT, no rush", "low"),
        ("cheap GPU for BERT", "low"),
        ("不急，跑BERT", "low"),
        ("便宜的卡跑BERT", "low"),
        ("BERT, not urgent", "low"),
    ],
)
def test_urgency_words_choose_the_high_or_low_priority_class(text: str, cls: str) -> None:
    c = PRIORITY_CLASSES[cls]  # type: ignore[index]
    found = read(text)
    assert found.draft.options["urgency"] == c.urgency
    assert found.draft.options["preemptible"] is c.preemptible
    assert found.not_understood == ()


def test_every_option_it_sets_is_one_a_submission_accepts() -> None:
    found = read("train llama 3 8b with pytorch, cheap, 2 A100 80GB")
    options: dict[str, Any] = found.draft.options
    CreationOptions.model_validate(options)
    assert options == {"kind": "job", "urgency": 0.0, "preemptible": True}


def test_nonsense_is_reported_and_nothing_is_guessed() -> None:
    found = read("asdf qwerty")
    assert found.not_understood == ("asdf", "qwerty")
    assert found.draft.resources is None
    assert found.draft.image is None
    assert found.draft.options == {}
    assert found.reading == ()
    assert any("resources left empty" in n for n in found.notes)


def test_unknown_words_are_reported_beside_what_was_understood() -> None:
    found = read("run BERT on a flux capacitor")
    assert found.not_understood == ("flux", "capacitor")
    assert gpu(found).model == "T4"


def test_leftover_chinese_characters_are_reported_without_particles() -> None:
    found = read("给我分配一个能跑BERT的量子计算机")
    assert found.not_understood == ("量子计算机",)


def test_gpus_alone_without_a_model_family_or_gpu_model_leave_resources_empty() -> None:
    found = read("give me 2 GPUs")
    assert found.draft.resources is None
    assert found.not_understood == ()
    assert any("no model family" in n for n in found.notes)


def test_a_family_with_many_sizes_and_no_size_said_is_not_sized() -> None:
    found = read("serve llama")
    assert found.draft.resources is None
    assert "which size" in phrases(found)["llama"]


def test_reading_is_in_text_order() -> None:
    found = read("fine-tune BERT on 2 H100 asap")
    assert [r.phrase for r in found.reading] == ["fine-tune", "BERT", "2", "H100", "asap"]


@pytest.mark.parametrize("said", ["999 GPUs", "0 GPUs"])
def test_a_count_no_request_may_ask_for_is_read_but_not_used(said: str) -> None:
    found = read(f"{said} for BERT")
    assert "not a count one request may ask for" in phrases(found)[said]
    assert gpu(found).count == 1


def test_a_need_no_64_gpus_hold_leaves_resources_empty() -> None:
    found = read("9999GB of memory")
    assert found.draft.resources is None
    assert any("no 64 GPUs of any model hold" in n for n in found.notes)


def test_words_not_understood_are_reported_once_in_text_order() -> None:
    assert read("zork BERT zork frob").not_understood == ("zork", "frob")


def test_when_no_64_gpus_of_the_fleet_hold_the_need_the_catalogue_is_used() -> None:
    found = read("train llama 70b", fleet=frozenset({"T4"}))
    # 70 B trained need about 1344 GB: 84 T4s is more than one request may ask for.
    assert gpu(found) == GpuRequest(model="H200-141GB", count=10)
    assert "in the GPU catalogue" in phrases(found)["llama 70b"]


def test_a_named_profile_smaller_than_the_need_is_kept_and_said_to_be_small() -> None:
    found = read("1g.5gb for llama 70b")
    assert found.draft.resources == MigRequest(profile="1g.5gb")
    assert "less than the 168.0 GB needed" in phrases(found)["llama 70b"]
