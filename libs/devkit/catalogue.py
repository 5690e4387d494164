"""The topic catalogue as Markdown, generated from the registry: `python -m libs.devkit.catalogue`."""

from __future__ import annotations

from libs.common.events.registry import TOPIC_EVENTS
from libs.common.events.topics import TOPIC_ROLES

__all__ = ["render"]


def render() -> str:
    """A Markdown table: topic, key, producers, consumers, event types (with versions)."""
    lines = [
        "| topic | key | produced by | consumed by | event types |",
        "| --- | --- | --- | --- | --- |",
    ]
    for topic, classes in TOPIC_EVENTS.items():
        producer, consumers, key = TOPIC_ROLES[topic]
        types = "<br>".join(f"`{cls.event_type()}`" for cls in classes)
        lines.append(f"| `{topic}` | {key} | {producer} | {consumers} | {types} |")
    lines.append("")
    lines.append(
        "Every topic has a dead-letter twin `<topic>.dlq` (the failed message, with `dlq.error`, "
        "`dlq.attempts`, `dlq.consumer` and `dlq.source` headers)."
    )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
