"""YAML from untrusted input: what it refuses, how it says so, and that it parses off the event loop."""

from __future__ import annotations

import asyncio

import pytest

from libs.common.yaml_safe import YamlLimits, YamlRefused, load, load_async


def billion_laughs(levels: int = 9) -> str:
    """Nine levels of nine aliases: a 700-byte document that expands to 9^9 strings."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, levels)]
    return "\n".join(lines) + "\n"


def refusal(text: str | bytes, limits: YamlLimits | None = None) -> YamlRefused:
    with pytest.raises(YamlRefused) as caught:
        load(text, limits=limits or YamlLimits())
    return caught.value


def test_a_billion_laughs_is_refused_at_the_alias_that_crosses_the_bound() -> None:
    error = refusal(billion_laughs())
    assert error.problem == "aliases expand to more than 100000 nodes"
    assert (error.line, error.column) == (6, 10)  # the first alias of level 5 (9^5 > 100,000)
    assert "line 6, column 10" in str(error)


def test_a_python_tag_is_refused_by_name_before_anything_is_built() -> None:
    error = refusal("rules:\n  - x: !!python/object/apply:os.system ['touch /tmp/pwned']\n")
    assert str(error) == (
        "tag !!python/object/apply:os.system is not allowed (only YAML's standard tags are)"
        " (line 2, column 8)"
    )
    assert "is not allowed" in str(refusal("x: !custom 1"))


def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    assert "refers to a node that contains it" in str(refusal("a: &a [1, *a]"))


@pytest.mark.parametrize(
    ("text", "limits", "problem"),
    [
        ("a: 1\n" * 10, YamlLimits(max_bytes=49), "document is 50 bytes, more than the 49 allowed"),
        (b"a: \xc3\xa9\n", YamlLimits(max_bytes=5), "document is 6 bytes, more than the 5 allowed"),
        ("a: é\n", YamlLimits(max_bytes=5), "document is 6 bytes, more than the 5 allowed"),
        ("[" * 65 + "]" * 65, YamlLimits(), "nested deeper than 64 levels"),
        ("a: &a 1\nb: [*a, *a, *a]", YamlLimits(max_aliases=2), "more than 2 aliases"),
    ],
)
def test_documents_past_a_limit_are_refused_naming_the_limit(
    text: str | bytes, limits: YamlLimits, problem: str
) -> None:
    assert refusal(text, limits).problem == problem


def test_malformed_yaml_names_the_problem_and_where() -> None:
    error = refusal("a: [1, 2\nb: 3\n")
    assert (error.line, error.column) == (2, 2)
    assert "flow sequence" in error.problem
    assert refusal("a: 1\n---\nb: 2\n").problem.startswith("expected a single document")


def test_ordinary_anchors_merge_keys_and_standard_tags_load() -> None:
    text = (
        "base: &base {zone: z1, pool: training}\n"
        "nodes:\n"
        "  - {<<: *base, hostname: a}\n"
        "  - {<<: *base, hostname: b, count: !!int '8'}\n"
    )
    document = load(text)
    assert document["nodes"] == [
        {"zone": "z1", "pool": "training", "hostname": "a"},
        {"zone": "z1", "pool": "training", "hostname": "b", "count": 8},
    ]
    assert load("") is None


async def test_parsing_runs_off_the_event_loop() -> None:
    turns = 0

    async def ticker() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    try:
        document = await load_async("items: [" + ", ".join(str(n) for n in range(20_000)) + "]")
        assert turns > 0  # the loop ran other work while the document parsed in a worker thread
    finally:
        task.cancel()
    assert len(document["items"]) == 20_000
    with pytest.raises(YamlRefused, match="aliases expand"):
        await load_async(billion_laughs())
