"""The text being read: spans taken by the rules that understood them, and what is left over."""

from __future__ import annotations

import re
from dataclasses import dataclass

from services.scheduler.domain.describe._lexicon import PARTICLES, STOP_WORDS

__all__ = ["Reading", "Text"]

#: What a taken character reads as for later rules: no letter, digit or space, so no pattern runs across it.
_TAKEN = "\x00"
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+_'/-]*|[\u3400-\u4dbf\u4e00-\u9fff]+")


@dataclass(frozen=True, slots=True)
class Reading:
    """Words the reader matched and what it took them to mean."""

    phrase: str
    meaning: str


class Text:
    """The original text, and a copy where every span a rule took is blanked out."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._left = list(text)

    def take(self, pattern: re.Pattern[str]) -> list[re.Match[str]]:
        """Every match of ``pattern`` in what is not taken yet; each match's span is taken."""
        found = [m for m in pattern.finditer("".join(self._left)) if m.end() > m.start()]
        for m in found:
            self._left[m.start() : m.end()] = _TAKEN * (m.end() - m.start())
        return found

    def phrase(self, match: re.Match[str]) -> str:
        """The original words of a match."""
        return self.text[match.start() : match.end()].strip()

    def leftover(self) -> list[str]:
        """Words no rule took, less stop words and Chinese particles, in text order."""
        out: list[str] = []
        for m in _TOKEN.finditer("".join(self._left)):
            word = m.group().rstrip(".-'/")
            if word.isascii():
                if word and word.casefold() not in STOP_WORDS:
                    out.append(word)
            else:
                out.extend(_without_particles(word))
        return out


def _without_particles(run: str) -> list[str]:
    """The pieces of a run of Chinese characters left when its particles (longest first) are removed."""
    pieces, current, i = [], "", 0
    while i < len(run):
        particle = next((p for p in PARTICLES if run.startswith(p, i)), None)
        if particle is None:
            current += run[i]
            i += 1
            continue
        if current:
            pieces.append(current)
        current, i = "", i + len(particle)
    return [*pieces, current] if current else pieces
