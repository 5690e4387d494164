"""Reading "describe what you need" into a creation draft, rule by rule; what no rule took is reported."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from services.scheduler.domain.advice import memory_need_gb
from services.scheduler.domain.catalog import ImageCatalog
from services.scheduler.domain.creation import CreationDraft, CreationOptions, apply_step
from services.scheduler.domain.describe import _lexicon as words
from services.scheduler.domain.describe._families import MODEL_FAMILIES, FamilyMatch, read_family
from services.scheduler.domain.describe._gpus import (
    MAX_GPUS,
    GpuFacts,
    Pick,
    gpu_mentions,
    pick_gpu,
    pick_slice,
    variants_of,
)
from services.scheduler.domain.describe._text import Reading, Text
from services.scheduler.domain.errors import ValidationError
from services.scheduler.domain.queue_preview import PRIORITY_CLASSES, PriorityClassName

__all__ = ["Description", "describe"]

Mode = Literal["training", "inference"]
_MIG_PROFILE = re.compile(r"(?<![A-Za-z0-9])[1-7]g\.\d{1,3}gb(?![A-Za-z0-9])", re.IGNORECASE)
_FAMILIES = tuple((f, f.compiled()) for f in MODEL_FAMILIES)


@dataclass(frozen=True, slots=True)
class Description:
    """What the reader made of a text: the draft, each phrase it read, the words it did not understand,
    and notes on what it decided without a phrase of its own (defaults, steps left empty)."""

    draft: CreationDraft
    reading: tuple[Reading, ...]
    not_understood: tuple[str, ...]
    notes: tuple[str, ...]


@dataclass
class _Heard:
    """What the rules found, before the draft is built from it."""

    reading: list[Reading] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)  # where each reading's phrase starts in the text
    notes: list[str] = field(default_factory=list)
    family: tuple[int, FamilyMatch] | None = None  # the reading's index, and the match
    anchor: int | None = None  # the reading the memory need came from, which the choice's reason joins
    image_note: bool = False
    choice_at: int | None = None  # the slice or GPU reading, which the reason joins when no need was read
    params_b: float | None = None
    memory_gb: float | None = None
    count: int | None = None
    pool: list[GpuFacts] | None = None
    profile: str | None = None
    slice_said: bool = False
    small_slice: bool = False
    mode: Mode | None = None
    priority: PriorityClassName | None = None
    image: dict[str, str] | None = None

    def read(self, match: re.Match[str], meaning: str) -> int:
        self.reading.append(Reading(phrase=match.group().strip(), meaning=meaning))
        self.starts.append(match.start())
        return len(self.reading) - 1

    def in_text_order(self) -> tuple[Reading, ...]:
        return tuple(r for _, r in sorted(zip(self.starts, self.reading, strict=True), key=lambda sr: sr[0]))


def _read_models(text: Text, heard: _Heard) -> None:
    for profile in text.take(_MIG_PROFILE):
        heard.profile = heard.profile or profile.group().lower()
        heard.read(profile, f"MIG profile {profile.group().lower()}")
    for m in text.take(words.MEMORY):
        index = heard.read(m, f"{m.group('gb')} GB of GPU memory")
        if heard.memory_gb is None:
            heard.memory_gb, heard.anchor = float(m.group("gb")), index
    for family, pattern in _FAMILIES:
        for m in text.take(pattern):
            found = read_family(family, m)
            if found.params_b is None:
                heard.read(m, f"{family.name}, but which size? name one such as 7B or 70B")
                heard.notes.append(
                    f"{family.name} has many sizes: say which, and resources will be sized for it"
                )
            elif heard.family is None:
                index = heard.read(m, f"{found.label}, {found.params_b:g} B parameters")
                heard.family = (index, found)
                heard.anchor = index if heard.memory_gb is None else heard.anchor
            else:
                heard.read(m, f"{found.label}; sized for {heard.family[1].label}, named first")
    for m in text.take(words.SIZE_ONLY):
        index = heard.read(m, f"a model of {m.group('b')} B parameters")
        if heard.params_b is None and heard.anchor is None:
            heard.params_b, heard.anchor = float(m.group("b")), index


def _read_counts(text: Text, heard: _Heard) -> None:
    for pattern in words.COUNT_PATTERNS:
        for m in text.take(pattern):
            n = words.number(m.group("n"))
            if n is None or not 1 <= n <= MAX_GPUS:
                heard.read(
                    m, f"{m.group('n')} GPUs: not a count one request may ask for (1 to {MAX_GPUS}); not used"
                )
                continue
            if heard.count is None:
                heard.count = n
                heard.read(m, f"{n} GPU{'s' if n > 1 else ''}")
            elif n != heard.count:
                heard.read(m, f"{n} GPUs; kept {heard.count}, said first")


def _read_gpus(text: Text, heard: _Heard, gpus: Sequence[GpuFacts]) -> None:
    for pattern, names in gpu_mentions(tuple(gpus)):
        for m in text.take(pattern):
            if names.startswith("family:"):
                groups = m.groupdict()
                pool = variants_of(gpus, family=names[7:], mem=groups.get("mem"), form=groups.get("form"))
            else:
                pool = [g for g in gpus if g.name == names]
            if not pool:
                heard.read(m, "no catalogue GPU is this one")
            elif heard.pool is None:
                heard.pool = pool
                heard.choice_at = heard.read(m, f"GPU model {' or '.join(g.name for g in pool)}")
            else:
                heard.read(m, f"GPU model {pool[0].name}; kept {heard.pool[0].name}, said first")


def _slices(text: Text, heard: _Heard) -> None:
    for m in text.take(words.SLICE_WORDS):
        heard.slice_said = True
        small = any(s in m.group().lower() for s in words.SMALL_SLICE)
        heard.small_slice = heard.small_slice or small
        index = heard.read(m, "the smallest MIG slice" if small else "a MIG slice of a GPU")
        heard.choice_at = index if heard.choice_at is None else heard.choice_at


def _modes(text: Text, heard: _Heard) -> None:
    trained = text.take(words.TRAINING_WORDS)
    served = text.take(words.INFERENCE_WORDS)
    for m in trained:
        heard.read(m, "training: a job, sized for training")
    for m in served:
        meaning = "inference: an instance, sized for inference"
        heard.read(m, meaning if not trained else "run; training was said, so sized for training")
    heard.mode = "training" if trained else "inference" if served else None


def _priority(text: Text, heard: _Heard) -> None:
    low, high = text.take(words.LOW_WORDS), text.take(words.HIGH_WORDS)
    for m in low:
        heard.read(m, "low priority class: urgency 0, preemptible, billed as spot")
    for m in high:
        heard.read(m, "high priority class: urgency 1.0")
    if low and high:
        heard.notes.append("both urgent and not: priority left at the normal class")
    elif low or high:
        heard.priority = "low" if low else "high"


def _version_key(version: str) -> tuple[int, ...]:
    """``2.10`` after ``2.9``; a part that is no number (an operator's ``2.4-cu124``) counts as -1."""
    return tuple(int(p) if p.isdigit() else -1 for p in re.split(r"[.-]", version))


def _framework(text: Text, heard: _Heard, catalog: ImageCatalog) -> None:
    for m in text.take(words.FRAMEWORK):
        fw = {"torch": "pytorch", "tf": "tensorflow"}.get(m.group("fw").lower(), m.group("fw").lower())
        image = next((i for i in catalog.images.values() if fw in (i.name, i.framework.lower())), None)
        if image is None:
            heard.read(m, f"{fw}, which no catalogue image offers")
            continue
        version = m.group("ver") or max(image.versions, key=_version_key)
        if version not in image.versions:
            heard.read(m, f"{image.framework} {version}: not offered ({', '.join(image.versions)})")
            heard.notes.append(f"image left empty: {image.name} has no version {version}")
            heard.image_note = True
        elif heard.image is None:
            heard.image = {"name": image.name, "version": version}
            said = "" if m.group("ver") else ", the newest offered"
            heard.read(m, f"image {image.name}:{version}{said}")


def _gpu_word(text: Text, heard: _Heard) -> None:
    for m in text.take(words.GPU_WORD):
        heard.read(m, "whole GPUs" if heard.count and heard.count > 1 else "a whole GPU")


def _need(heard: _Heard) -> tuple[float | None, str]:
    """GB of GPU memory needed, and the words saying where it comes from."""
    mode: Mode = heard.mode or "inference"
    if heard.memory_gb is not None:
        return heard.memory_gb, f"{heard.memory_gb:g} GB asked for"
    if heard.family is not None:
        found = heard.family[1]
        need = memory_need_gb(model_size_b=found.params_b, memory_gb=found.need_override(mode), mode=mode)
        return need, f"{mode} needs about {need:.1f} GB of GPU memory"
    if heard.params_b is not None:
        need = memory_need_gb(model_size_b=heard.params_b, memory_gb=None, mode=mode)
        return need, f"{mode} of {heard.params_b:g} B parameters needs about {need:.1f} GB"
    return None, ""


def _explain(heard: _Heard, why: str, pick: Pick) -> None:
    """The memory need and the choice, added to the model's reading (or noted, when no model was read)."""
    text = "; ".join(p for p in (why, pick.reason) if p)
    anchor = heard.anchor if heard.anchor is not None else heard.choice_at
    if anchor is not None:
        old = heard.reading[anchor]
        heard.reading[anchor] = Reading(phrase=old.phrase, meaning=f"{old.meaning}: {text}")
    else:
        heard.notes.append(text)


def _resources(heard: _Heard, gpus: Sequence[GpuFacts], in_fleet: frozenset[str]) -> dict[str, Any] | None:
    need, why = _need(heard)
    if need is not None and heard.mode is None:
        heard.notes.append("neither training nor inference said: sized for inference")
    pool = heard.pool or list(gpus)
    if heard.profile is not None or heard.slice_said:
        pick = pick_slice(
            pool,
            need_gb=need,
            profile=heard.profile,
            small=heard.small_slice,
            named=heard.pool is not None,
            in_fleet=in_fleet,
        )
        _explain(heard, why, pick)
        if pick.profile is None:
            heard.notes.append("resources left empty: no MIG profile fits what was said")
            return None
        if heard.count not in (None, 1):
            heard.notes.append(f"a MIG request is one instance: the count {heard.count} was not used")
        return {"kind": "mig", "profile": pick.profile, "model": pick.model}
    if heard.pool is None and need is None:
        heard.notes.append("resources left empty: no model family, memory need or GPU model was named")
        return None
    pick = pick_gpu(pool, need_gb=need, count=heard.count, in_fleet=in_fleet)
    _explain(heard, why, pick)
    if pick.model is None:
        heard.notes.append("resources left empty: " + pick.reason)
        return None
    return {"kind": "gpu", "model": pick.model, "count": pick.count}


def _options(heard: _Heard) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if heard.mode is not None:
        options["kind"] = "job" if heard.mode == "training" else "instance"
    if heard.priority is not None:
        cls = PRIORITY_CLASSES[heard.priority]
        options |= {"urgency": cls.urgency, "preemptible": cls.preemptible}
    # Validated as a draft's options are: the reader sets nothing a submission would refuse.
    CreationOptions.model_validate(options)
    return options


def _fill(
    draft: CreationDraft,
    heard: _Heard,
    *,
    step: Literal["image", "resources"],
    payload: dict[str, Any] | None,
    catalog: ImageCatalog,
) -> CreationDraft:
    """The draft with ``step`` filled through the draft's own validation; a value it refuses (an operator's
    catalogue the reader's table disagrees with) leaves the step empty, noted, rather than failing."""
    if payload is None:
        return draft
    try:
        return apply_step(draft, step=step, payload=payload, catalog=catalog)
    except ValidationError as exc:
        heard.notes.append(f"{step} left empty: {exc.field}: {exc.message}")
        return draft


def describe(
    text: str, *, catalog: ImageCatalog, gpus: Sequence[GpuFacts], in_fleet: frozenset[str] = frozenset()
) -> Description:
    """Read ``text`` (English or Chinese) into a draft filled as far as it was understood.

    ``gpus``: the GPU catalogue; ``in_fleet``: the models the fleet's GPUs have, preferred where one fits.
    Nothing is guessed: a step nothing in the text speaks to stays empty, and the notes say so.
    """
    read, heard = Text(text), _Heard()
    _read_models(read, heard)
    _read_counts(read, heard)
    _read_gpus(read, heard, gpus)
    for rule in (_slices, _modes, _priority, _gpu_word):
        rule(read, heard)
    _framework(read, heard, catalog)
    draft = CreationDraft(options=_options(heard))
    draft = _fill(draft, heard, step="resources", payload=_resources(heard, gpus, in_fleet), catalog=catalog)
    draft = _fill(draft, heard, step="image", payload=heard.image, catalog=catalog)
    if heard.image is None and not heard.image_note:
        heard.notes.append("image left empty: no framework (PyTorch, TensorFlow, JAX, CUDA) was named")
    heard.notes.append("network left empty: choose a VPC, subnet and security group")
    return Description(
        draft=draft,
        reading=heard.in_text_order(),
        not_understood=tuple(dict.fromkeys(read.leftover())),
        notes=tuple(heard.notes),
    )
