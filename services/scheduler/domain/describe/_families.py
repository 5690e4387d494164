"""Known model families: how people write them, their parameter counts, and memory needs where the
parameter rule of thumb (``advice.memory_need_gb``) understates them (vision and diffusion models, whose
activations at a usual batch outweigh their weights)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["MODEL_FAMILIES", "FamilyMatch", "ModelFamily", "bounded", "read_family"]


def bounded(pattern: str) -> str:
    """``pattern`` not inside a longer Latin word or number (``\\b`` fails beside Chinese characters)."""
    return rf"(?<![A-Za-z0-9]){pattern}(?![A-Za-z0-9])"


#: A version digit (``Llama 3``, ``Qwen2.5``, ``ChatGLM3``) that is not the start of a size (``7b``).
_VERSION = r"(?:\d(?:\.\d)?(?![\d.]|\s*b)[\s-]*)?"
_SIZE = r"(?:(?P<v>\d+(?:\.\d+)?)\s*b)?"


@dataclass(frozen=True, slots=True)
class ModelFamily:
    """A family and its variants (name -> billions of parameters); ``sized`` families take any ``<n>B``;
    ``default`` is the variant a bare family name means (None: the size must be said); ``memory_gb`` holds
    (training, inference) GB for variants whose need the parameter rule would understate."""

    name: str
    pattern: str
    variants: Mapping[str, float] = field(default_factory=dict)
    default: str | None = None
    sized: bool = False
    memory_gb: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    def compiled(self) -> re.Pattern[str]:
        """The family's pattern, case-insensitive, bounded."""
        return re.compile(bounded(self.pattern), re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class FamilyMatch:
    """What a mention of a family means: the variant, its parameters (billions) and any fixed need."""

    label: str
    params_b: float | None
    memory_gb: tuple[float, float] | None

    def need_override(self, mode: str) -> float | None:
        """The fixed GB need in ``mode`` (training or inference), if the table holds one."""
        if self.memory_gb is None:
            return None
        return self.memory_gb[0] if mode == "training" else self.memory_gb[1]


def _same(need: tuple[float, float], *names: str) -> dict[str, tuple[float, float]]:
    return dict.fromkeys(names, need)


MODEL_FAMILIES: tuple[ModelFamily, ...] = (
    ModelFamily("DistilBERT", r"distil[\s-]*bert", {"base": 0.066}, "base"),
    ModelFamily("RoBERTa", r"roberta(?:[\s-]*(?P<v>base|large))?", {"base": 0.125, "large": 0.355}, "base"),
    ModelFamily(
        "BERT",
        r"bert(?:[\s-]*(?P<v>base|large|tiny|mini|small))?",
        {"base": 0.11, "large": 0.34, "tiny": 0.0044, "mini": 0.011, "small": 0.029},
        "base",
    ),
    ModelFamily(
        "GPT-2",
        r"gpt[\s-]*2(?:[\s-]*(?P<v>small|medium|large|xl))?",
        {"small": 0.124, "medium": 0.355, "large": 0.774, "xl": 1.5},
        "small",
    ),
    ModelFamily(
        "T5",
        r"(?:flan[\s-]*)?t5(?:[\s-]*(?P<v>small|base|large|xl|xxl|3b|11b))?",
        {"small": 0.06, "base": 0.22, "large": 0.77, "xl": 3.0, "3b": 3.0, "xxl": 11.0, "11b": 11.0},
        "base",
    ),
    ModelFamily(
        "Llama", rf"(?:meta[\s-]*)?llama[\s-]*{_VERSION}(?:chat[\s-]*|instruct[\s-]*)?{_SIZE}", sized=True
    ),
    ModelFamily("Qwen", rf"(?:qwen|通义千问|千问)[\s-]*{_VERSION}{_SIZE}", sized=True),
    ModelFamily("ChatGLM", rf"chatglm[\s-]*{_VERSION}(?:(?P<v>6)\s*b)?", {"6": 6.2}, "6"),
    ModelFamily("Mixtral", r"mixtral(?:[\s-]*(?P<v>8\s*x\s*7)\s*b)?", {"8x7": 46.7}, "8x7"),
    ModelFamily("Mistral", r"mistral(?:[\s-]*(?P<v>7)\s*b)?", {"7": 7.2}, "7"),
    ModelFamily(
        "ResNet",
        r"resnet[\s-]*(?P<v>18|34|50|101|152)?",
        {"18": 0.0117, "34": 0.0218, "50": 0.0256, "101": 0.0445, "152": 0.0602},
        "50",
        memory_gb=_same((8.0, 2.0), "18", "34", "50") | _same((12.0, 2.0), "101", "152"),
    ),
    ModelFamily(
        "ViT",
        r"vit(?:[\s-]*(?P<v>base|large|huge|b|l|h)(?:[/-]?\d+)?)?",
        {"base": 0.086, "large": 0.307, "huge": 0.632, "b": 0.086, "l": 0.307, "h": 0.632},
        "base",
        memory_gb=_same((12.0, 2.0), "base", "b")
        | _same((24.0, 4.0), "large", "l")
        | _same((40.0, 6.0), "huge", "h"),
    ),
    ModelFamily(
        "Stable Diffusion",
        r"(?:stable[\s-]*diffusion|sd)(?:[\s-]*(?P<v>xl|1\.5|2\.1|2|3))?",
        {"1.5": 1.07, "2": 1.3, "2.1": 1.3, "xl": 3.5, "3": 2.0},
        "1.5",
        memory_gb={
            "1.5": (24.0, 6.0),
            "2": (24.0, 8.0),
            "2.1": (24.0, 8.0),
            "xl": (48.0, 12.0),
            "3": (48.0, 16.0),
        },
    ),
    ModelFamily(
        "Whisper",
        r"whisper(?:[\s-]*(?P<v>tiny|base|small|medium|large)(?:[\s-]*v\d)?)?",
        {"tiny": 0.039, "base": 0.074, "small": 0.244, "medium": 0.769, "large": 1.55},
        "large",
    ),
    ModelFamily(
        "YOLO",
        r"yolo[\s-]*(?:v?\d+)?(?P<v>n|s|m|l|x)?",
        {"n": 0.0032, "s": 0.0112, "m": 0.0259, "l": 0.0437, "x": 0.0682},
        "m",
        memory_gb=_same((8.0, 2.0), "n", "s", "m", "l", "x"),
    ),
)


def read_family(family: ModelFamily, match: re.Match[str]) -> FamilyMatch:
    """The variant a match of ``family`` names (``params_b`` None: a sized family said without a size)."""
    said = match.groupdict().get("v")
    key = re.sub(r"\s+", "", said).lower() if said else family.default
    if key is None:
        return FamilyMatch(label=family.name, params_b=None, memory_gb=None)
    if family.sized:
        return FamilyMatch(label=f"{family.name} {key}B", params_b=float(key), memory_gb=None)
    shown = key.upper() if key.isalpha() and len(key) <= 2 else key
    return FamilyMatch(
        label=f"{family.name}{' ' if ' ' in family.name else '-'}{shown}"
        if len(family.variants) > 1
        else family.name,
        params_b=family.variants[key],
        memory_gb=family.memory_gb.get(key),
    )
