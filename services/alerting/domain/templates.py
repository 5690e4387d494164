"""Prometheus alert templates: the subset of Go's text/template that rule annotations use, without Go.

Supported: text with `{{ }}` actions (and `{{-`/`-}}` trimming, `{{/* comments */}}`), pipelines with
`|`, the variables Prometheus defines for alert templates (`$labels`, `$value`, `$externalLabels`,
`$externalURL`, `$` and their `.Labels`, `.Value`, ... spellings), label access as `$labels.name` or
`index $labels "name"`, string and number literals, and the functions `humanize`, `humanize1024`,
`humanizePercentage`, `humanizeDuration`, `printf`, `toUpper`, `toLower`, `title`, `index`.
Anything else (`if`, `range`, `query`, ...) is refused when the template is compiled, so a rule file
that uses it is refused at import rather than paging with a broken text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

__all__ = [
    "Template",
    "TemplateContext",
    "TemplateError",
    "compile_template",
    "expand",
    "go_float",
    "humanize",
    "humanize1024",
    "humanize_duration",
    "humanize_percentage",
]

_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.DOTALL)
_TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<raw>`[^`]*`)|(?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)'
    r"|(?P<var>\$[a-zA-Z0-9_]*(?:\.[a-zA-Z_][a-zA-Z0-9_]*)*)|(?P<field>(?:\.[a-zA-Z_][a-zA-Z0-9_]*)+|\.)"
    r"|(?P<pipe>\|)|(?P<ident>[a-zA-Z_][a-zA-Z0-9_]*)|(?P<other>\S+))"
)
_KEYWORDS = frozenset({"if", "else", "end", "range", "with", "define", "template", "block", "break"})
_FIELDS = {
    "Labels": "labels",
    "Value": "value",
    "ExternalLabels": "externalLabels",
    "ExternalURL": "externalURL",
}
_VARIABLES = frozenset({"$", *(f"${v}" for v in _FIELDS.values())})
_SMALL = ("m", "u", "n", "p", "f", "a", "z", "y")


class TemplateError(ValueError):
    """A template that Prometheus would refuse to parse, or that uses what this expander lacks."""


@dataclass(frozen=True, slots=True)
class TemplateContext:
    """What an alert template sees: the alert's labels and value, and the service's external labels."""

    labels: Mapping[str, str]
    value: float | None = None
    external_labels: Mapping[str, str] | None = None
    external_url: str = ""


def go_float(value: float) -> str:
    """A float as Go's `%v` prints it: shortest digits, exponent form from 1e+06 up and below 1e-04."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    text, point = "".join(map(str, digits)), len(digits) + int(exponent)
    head = "-" if sign else ""
    if point - 1 < -4 or point - 1 >= 6:
        mantissa = text[0] + (f".{text[1:]}" if len(text) > 1 else "")
        return f"{head}{mantissa}e{'-' if point - 1 < 0 else '+'}{abs(point - 1):02d}"
    if point <= 0:
        return f"{head}0.{'0' * -point}{text}"
    if point >= len(text):
        return f"{head}{text}{'0' * (point - len(text))}"
    return f"{head}{text[:point]}.{text[point:]}"


def _g4(value: float) -> str:
    """Go's `%.4g`."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return f"{value:.4g}"


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TemplateError(f"expected a number, got {_type(value)}")
    try:
        return float(value)
    except ValueError:
        raise TemplateError(f"strconv.ParseFloat: parsing {value!r}: invalid syntax") from None


def humanize(value: Any) -> str:
    """Prometheus's `humanize`: SI prefixes (k, M, G, ... and m, u, n, ... below 1), 4 significant digits."""
    v = _number(value)
    if v == 0 or not math.isfinite(v):
        return _g4(v)
    prefix = ""
    if abs(v) >= 1:
        for p in ("k", "M", "G", "T", "P", "E", "Z", "Y"):
            if abs(v) < 1000:
                break
            prefix, v = p, v / 1000
        return _g4(v) + prefix
    for p in _SMALL:
        if abs(v) >= 1:
            break
        prefix, v = p, v * 1000
    return _g4(v) + prefix


def humanize1024(value: Any) -> str:
    """Prometheus's `humanize1024`: binary prefixes (ki, Mi, Gi, ...), 4 significant digits."""
    v = _number(value)
    if abs(v) <= 1 or not math.isfinite(v):
        return _g4(v)
    prefix = ""
    for p in ("ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"):
        if abs(v) < 1024:
            break
        prefix, v = p, v / 1024
    return _g4(v) + prefix


def humanize_percentage(value: Any) -> str:
    """Prometheus's `humanizePercentage`: a ratio as a percentage, 4 significant digits."""
    return _g4(_number(value) * 100) + "%"


def humanize_duration(value: Any) -> str:
    """Prometheus's `humanizeDuration`: seconds as `1d 2h 3m 4s`, or with a unit prefix below 1 s."""
    v = _number(value)
    if not math.isfinite(v):
        return _g4(v)
    if v == 0:
        return _g4(v) + "s"
    if abs(v) >= 1:
        sign, v = ("-", -v) if v < 0 else ("", v)
        whole = int(v)
        days, hours, minutes, seconds = whole // 86400, whole // 3600 % 24, whole // 60 % 60, whole % 60
        if days:
            return f"{sign}{days}d {hours}h {minutes}m {seconds}s"
        if hours:
            return f"{sign}{hours}h {minutes}m {seconds}s"
        if minutes:
            return f"{sign}{minutes}m {seconds}s"
        return f"{sign}{_g4(v)}s"
    prefix = ""
    for p in _SMALL:
        if abs(v) >= 1:
            break
        prefix, v = p, v * 1000
    return f"{_g4(v)}{prefix}s"


def _text(value: Any) -> str:
    """A value as Go's `%v` prints it in a template."""
    if value is None:
        return ""
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, Mapping):
        return "map[" + " ".join(f"{k}:{v}" for k, v in sorted(value.items())) + "]"
    return str(value)


def _type(value: Any) -> str:
    return "a label map" if isinstance(value, Mapping) else type(value).__name__


_VERB = re.compile(r"%([-+# 0]*\d*(?:\.\d+)?)([a-zA-Z%])")


def _printf(fmt: Any, *args: Any) -> str:
    """Go's `printf` for the verbs templates use: %s %v %q %d %f %e %g %x %%."""
    rest = list(args)

    def verb(found: re.Match[str]) -> str:
        flags, kind = found.group(1), found.group(2)
        if kind == "%":
            return "%"
        if not rest:
            return f"%!{kind}(MISSING)"
        arg = rest.pop(0)
        if kind in "sv":
            return f"%{flags}s" % _text(arg)
        if kind == "q":
            return '"' + _text(arg).replace("\\", "\\\\").replace('"', '\\"') + '"'
        if kind in "dx":
            return f"%{flags}{kind}" % int(_number(arg))
        if kind in "feEgG":
            number = _number(arg)
            return f"%{flags}{kind}" % number if math.isfinite(number) else _g4(number)
        raise TemplateError(f"printf verb %{kind} is not supported")

    return _VERB.sub(verb, str(fmt))


def _index(mapping: Any, key: Any) -> str:
    if not isinstance(mapping, Mapping):
        raise TemplateError(f"index of {_type(mapping)}")
    return str(mapping.get(str(key), ""))


_FUNCTIONS: dict[str, tuple[Callable[..., str], int | None]] = {
    "humanize": (humanize, 1),
    "humanize1024": (humanize1024, 1),
    "humanizePercentage": (humanize_percentage, 1),
    "humanizeDuration": (humanize_duration, 1),
    "toUpper": (lambda s: _text(s).upper(), 1),
    "toLower": (lambda s: _text(s).lower(), 1),
    "title": (lambda s: _text(s).title(), 1),
    "index": (_index, 2),
    "printf": (_printf, None),
}


@dataclass(frozen=True, slots=True)
class _Term:
    kind: str  # "lit", "var" or "func"
    value: Any
    path: tuple[str, ...] = ()


_Command = tuple[_Term, ...]
_Pipeline = tuple[_Command, ...]


def _literal(kind: str, text: str) -> _Term:
    if kind == "raw":
        return _Term("lit", text[1:-1])
    if kind == "str":
        return _Term("lit", re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m[1], m[1]), text[1:-1]))
    return _Term("lit", float(text) if re.search(r"[.eE]", text) else int(text))


def _variable(text: str) -> _Term:
    head, *path = text.split(".")
    if head not in _VARIABLES:
        raise TemplateError(f'undefined variable "{head}"')
    if head == "$":
        return _field("." + ".".join(path) if path else ".")
    return _Term("var", head[1:], tuple(path))


def _field(text: str) -> _Term:
    if text == ".":
        return _Term("var", "")
    first, *path = text[1:].split(".")
    if first not in _FIELDS:
        raise TemplateError(f"can't evaluate field {first} (known: {', '.join(sorted(_FIELDS))})")
    return _Term("var", _FIELDS[first], tuple(path))


def _tokens(action: str) -> list[tuple[str, str]]:
    found = [(m.lastgroup or "", m.group(m.lastgroup or 0)) for m in _TOKEN.finditer(action)]
    return [(kind, text) for kind, text in found if text.strip()]


def _command(tokens: list[tuple[str, str]]) -> _Command:
    terms: list[_Term] = []
    for position, (kind, text) in enumerate(tokens):
        if kind == "ident":
            if text in ("true", "false", "nil"):
                raise TemplateError(f"{text} is not supported here")
            if text in _KEYWORDS:
                raise TemplateError(f"{{{{{text}}}}} is not supported by this service's templates")
            if text not in _FUNCTIONS:
                raise TemplateError(f'function "{text}" not defined')
            if position:
                raise TemplateError(f"function {text!r} used as an argument needs parentheses (unsupported)")
            terms.append(_Term("func", text))
        elif kind in ("str", "raw", "num"):
            terms.append(_literal(kind, text))
        elif kind == "var":
            terms.append(_variable(text))
        elif kind == "field":
            terms.append(_field(text))
        else:
            raise TemplateError(f"unexpected {text!r} in action")
    if not terms:
        raise TemplateError("missing command in pipeline")
    if terms[0].kind != "func" and len(terms) > 1:
        raise TemplateError("only a function takes arguments")
    return tuple(terms)


def _pipeline(action: str) -> _Pipeline:
    commands: list[list[tuple[str, str]]] = [[]]
    for kind, text in _tokens(action):
        if kind == "pipe":
            commands.append([])
        elif text == ":=" or text == "=":
            raise TemplateError("declaring variables is not supported by this service's templates")
        else:
            commands[-1].append((kind, text))
    pipeline = tuple(_command(tokens) for tokens in commands)
    for stage, command in enumerate(pipeline):
        if stage and command[0].kind != "func":
            raise TemplateError("a pipeline stage after `|` must be a function")
        if command[0].kind == "func":
            _check_arity(command[0].value, len(command) - 1 + (1 if stage else 0))
    return pipeline


def _check_arity(name: str, given: int) -> None:
    """Go checks this when the template runs; knowing it sooner refuses the rule at import instead."""
    arity = _FUNCTIONS[name][1]
    if (arity is not None and given != arity) or (arity is None and given < 1):
        raise TemplateError(f"wrong number of args for {name}: want {arity or 'at least 1'} got {given}")


@dataclass(frozen=True, slots=True)
class Template:
    """A compiled template: literal text and pipelines."""

    parts: tuple[str | _Pipeline, ...]

    def render(self, context: TemplateContext) -> str:
        """The expanded text; a failure at run time raises TemplateError."""
        return "".join(p if isinstance(p, str) else _text(_run(p, context)) for p in self.parts)


def _lookup(term: _Term, context: TemplateContext) -> Any:
    roots: dict[str, Any] = {
        "labels": context.labels,
        "value": context.value,
        "externalLabels": context.external_labels or {},
        "externalURL": context.external_url,
    }
    value: Any = roots if term.value == "" else roots[term.value]
    for name in term.path:
        if not isinstance(value, Mapping):
            raise TemplateError(f"can't evaluate field {name} in {_type(value)}")
        value = value.get(name, "")
    return value


def _run(pipeline: _Pipeline, context: TemplateContext) -> Any:
    value: Any = None
    for stage, command in enumerate(pipeline):
        head, *rest = command
        if head.kind != "func":
            value = head.value if head.kind == "lit" else _lookup(head, context)
            continue
        args = [t.value if t.kind == "lit" else _lookup(t, context) for t in rest]
        if stage:
            args.append(value)
        value = _FUNCTIONS[head.value][0](*args)
    return value


@lru_cache(maxsize=4096)
def compile_template(text: str) -> Template:
    """Parse a template; TemplateError says what Prometheus (or this subset) would refuse."""
    parts: list[str | _Pipeline] = []
    position = 0
    for found in _ACTION.finditer(text):
        literal = text[position : found.start()]
        if found.group(1):
            literal = literal.rstrip()
        if literal:
            parts.append(literal)
        position = found.end()
        if found.group(3):
            while position < len(text) and text[position].isspace():
                position += 1
        body = found.group(2).strip()
        if not (body.startswith("/*") and body.endswith("*/")):
            parts.append(_pipeline(body))
    tail = text[position:]
    if "{{" in tail:
        raise TemplateError("unclosed action")
    if tail:
        parts.append(tail)
    return Template(tuple(parts))


def expand(text: str, context: TemplateContext) -> str:
    """Expand a template as Prometheus does, an error becoming the text `<error expanding template: ...>`."""
    if "{{" not in text:
        return text
    try:
        return compile_template(text).render(context)
    except (ValueError, TypeError, ArithmeticError) as error:  # TemplateError, or printf's %d of +Inf
        return f"<error expanding template: {error}>"
