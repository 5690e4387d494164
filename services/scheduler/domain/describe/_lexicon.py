"""The words the reader knows besides models and GPUs, in English and Chinese: counts, slices, training or
inference, urgency, frameworks, and the words it may drop without understanding them."""

from __future__ import annotations

import re

from services.scheduler.domain.describe._families import bounded

__all__ = [
    "COUNT_PATTERNS",
    "CUDA_WORDS",
    "FRAMEWORK",
    "GPU_WORD",
    "HIGH_WORDS",
    "INFERENCE_WORDS",
    "LOW_WORDS",
    "MEMORY",
    "PARTICLES",
    "SIZE_ONLY",
    "SLICE_WORDS",
    "SMALL_SLICE",
    "STOP_WORDS",
    "TRAINING_WORDS",
    "number",
]

_I = re.IGNORECASE
_EN_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "single": 1, "a single": 1, "two": 2, "three": 3, "four": 4, "five": 5,
    "six": 6, "seven": 7, "eight": 8, "sixteen": 16,
}  # fmt: skip
_ZH_DIGITS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_EN_NUM = r"(?P<n>\d{1,3}|a single|an?|one|two|three|four|five|six|seven|eight|sixteen)"
_ZH_NUM = r"(?P<n>\d{1,3}|[一二两三四五六七八九十]{1,3})"
_GPU = r"(?:gpus?|graphics\s+cards?|cards?|devices?)"


def number(word: str) -> int | None:
    """``4``, ``four``, ``a``, ``四``, ``两``, ``十六`` as a number; None when it is none."""
    w = word.strip().lower()
    if w.isdigit():
        return int(w)
    if w in _EN_NUMBERS:
        return _EN_NUMBERS[w]
    if w in _ZH_DIGITS:
        return _ZH_DIGITS[w]
    tens, sep, ones = w.partition("十")
    if not sep or (tens and tens not in _ZH_DIGITS) or (ones and ones not in _ZH_DIGITS):
        return None
    return (_ZH_DIGITS[tens] if tens else 1) * 10 + (_ZH_DIGITS[ones] if ones else 0)


def _words(*words: str) -> re.Pattern[str]:
    """Any of ``words`` (longest first), as whole words where Latin."""
    ordered = sorted(words, key=lambda w: -len(w))
    return re.compile("|".join(bounded(w) if w.isascii() else w for w in ordered), _I)


#: Counts, each with its number as group ``n``: "2 GPUs", "a GPU", "4x", "x4", "两张卡", "4张", "八卡".
COUNT_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(bounded(rf"{_EN_NUM}\s+(?:whole\s+)?{_GPU}"), _I),
    re.compile(bounded(rf"{_EN_NUM}\s*[x×*]") + r"(?=\s*[A-Za-z])", _I),
    re.compile(r"(?<![A-Za-z0-9])[x×*]\s?(?P<n>\d{1,2})(?![A-Za-z0-9])", _I),
    re.compile(
        bounded(r"(?P<n>\d{1,3}|two|three|four|five|six|seven|eight|sixteen)") + r"(?=\s+[A-Za-z]\d)", _I
    ),
    re.compile(rf"{_ZH_NUM}\s*(?:张|块|个|台)\s*(?:gpu|显卡|卡)?", _I),
    re.compile(rf"{_ZH_NUM}\s*(?:卡|显卡)", _I),
)
#: A whole GPU asked for without a count.
GPU_WORD = re.compile(bounded(_GPU) + r"|显卡|GPU|卡", _I)
#: A MIG slice, small or of any size: "a small slice", "tiny MIG slice", "MIG instance", "切片".
SLICE_WORDS = re.compile(
    bounded(
        r"(?:an?\s+)?(?:(?:small|tiny|little)\s+)?(?:mig\s+(?:slice|instance|partition)s?|slices?|mig)"
        r"(?:\s+of\s+an?\s+gpu)?"
    )
    + "|"
    + bounded(r"(?:part|fraction)\s+of\s+an?\s+gpu|partial\s+gpu|shared\s+gpu")
    + r"|小切片|一小块|切片|分片|mig实例",
    _I,
)
SMALL_SLICE = ("small", "tiny", "小")
TRAINING_WORDS = _words(
    "train", "trains", "training", "fine-tune", "fine tune", "finetune", "fine-tuning", "fine tuning",
    "finetuning", "pretrain", "pre-train", "pretraining", "训练", "微调", "预训练", "精调",
)  # fmt: skip
INFERENCE_WORDS = _words(
    "inference", "infer", "serve", "serving", "deploy", "deployment", "predict", "prediction", "can run",
    "run", "running", "host", "推理", "部署", "能跑", "可以跑", "跑得动", "运行", "跑",
)  # fmt: skip
LOW_WORDS = _words(
    "no rush", "no hurry", "not urgent", "cheap", "cheaper", "cheapest", "low priority", "spot", "whenever",
    "budget", "不急", "不着急", "便宜", "低优先级", "省钱", "最便宜",
)  # fmt: skip
HIGH_WORDS = _words(
    "urgent", "urgently", "asap", "as soon as possible", "high priority", "right now", "immediately",
    "紧急", "尽快", "加急", "马上", "高优先级", "急",
)  # fmt: skip
#: A framework, with an optional version as group ``ver``.
FRAMEWORK = re.compile(
    bounded(r"(?P<fw>pytorch|torch|tensorflow|tf|jax|cuda)(?:[\s-]*v?(?P<ver>\d+(?:\.\d+)+))?"), _I
)
CUDA_WORDS = ("cuda",)
#: A bare parameter count: "a 7B model", "13 billion parameters".
SIZE_ONLY = re.compile(
    bounded(r"(?P<b>\d+(?:\.\d+)?)\s*(?:b|billion)(?:\s*(?:parameters?|params?))?(?:\s*(?:models?|llms?))?"),
    _I,
)
#: Memory asked for directly: "40GB of memory", "24 GB VRAM", "需要40G显存".
MEMORY = re.compile(
    r"(?<![A-Za-z0-9])(?P<gb>\d{1,4})\s*(?:gb|g)(?![A-Za-z0-9])\s*(?:of\s+)?(?:gpu\s+)?(?:memory|vram|显存|内存)",
    _I,
)


def _list(text: str) -> list[str]:
    return text.split()


STOP_WORDS = frozenset(
    _list("""
    a an the i me my we us our you it its is are be to of for on in at with and or some any that this
    which who can could would should will want wants need needs needed like please give get got find
    allocate assign request reserve provide something model models job jobs task workload
    instance machine server box using use via by from just enough big large small one about so able
    """)
)
#: Chinese words the reader drops without meaning: particles and "give me", "allocate", "can", "run".
PARTICLES = tuple(
    sorted(
        _list("""给我 帮我 请 麻烦 分配 一个 一台 需要 我要 我想 想要 可以 一下 模型 的 能 跑 我 要 想 用 来
        吗 吧 了 个 和 在 上 做 块 张 台 把 给 帮 呢 啊 一些 些"""),
        key=lambda w: -len(w),
    )
)
