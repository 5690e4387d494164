"""Every event is frozen, versioned in name and type, documented, keyed, and on exactly one topic."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from types import ModuleType

import pytest

import libs.common.events as events_pkg
from libs.common.events import EVENT_TYPES, TOPIC_EVENTS, Event
from libs.common.events.topics import ALL_TOPICS

_TYPE = re.compile(r"^[a-z]+(\.[a-z_]+)+\.v(\d+)$")
_NAME = re.compile(r"^[A-Z][A-Za-z]+V(\d+)$")


def _family_modules() -> list[ModuleType]:
    skip = {"base", "envelope", "registry", "topics"}
    return [
        importlib.import_module(f"libs.common.events.{m.name}")
        for m in pkgutil.iter_modules(events_pkg.__path__)
        if m.name not in skip
    ]


def _defined_events() -> list[type[Event]]:
    found = []
    for module in _family_modules():
        for name, obj in vars(module).items():
            ours = inspect.isclass(obj) and obj.__module__ == module.__name__
            if ours and not name.startswith("_") and issubclass(obj, Event):
                found.append(obj)
    return found


ALL_EVENTS = _defined_events()


def test_every_defined_event_is_registered_on_exactly_one_topic() -> None:
    registered = [cls for classes in TOPIC_EVENTS.values() for cls in classes]
    assert sorted(c.__name__ for c in ALL_EVENTS) == sorted(c.__name__ for c in registered)
    assert len(registered) == len(set(registered)) == len(EVENT_TYPES)


def test_every_topic_of_the_registry_is_a_declared_topic() -> None:
    assert set(TOPIC_EVENTS) == set(ALL_TOPICS)


@pytest.mark.parametrize("cls", ALL_EVENTS, ids=lambda c: c.__name__)
def test_event_is_frozen_and_tolerant(cls: type[Event]) -> None:
    assert cls.model_config.get("frozen") is True
    assert cls.model_config.get("extra") == "ignore"


@pytest.mark.parametrize("cls", ALL_EVENTS, ids=lambda c: c.__name__)
def test_event_version_is_in_its_name_and_type(cls: type[Event]) -> None:
    type_match = _TYPE.match(cls.event_type())
    name_match = _NAME.match(cls.__name__)
    assert type_match, f"{cls.event_type()} is not <family>.<aggregate>.<what>.v<N>"
    assert name_match, f"{cls.__name__} does not end in V<N>"
    assert type_match.group(2) == name_match.group(1)


@pytest.mark.parametrize("cls", ALL_EVENTS, ids=lambda c: c.__name__)
def test_every_field_is_described(cls: type[Event]) -> None:
    undocumented = [n for n, f in cls.model_fields.items() if n != "type" and not f.description]
    assert not undocumented


@pytest.mark.parametrize("cls", ALL_EVENTS, ids=lambda c: c.__name__)
def test_event_says_which_aggregate_it_is_about(cls: type[Event]) -> None:
    assert any("subject" in vars(k) for k in cls.__mro__ if k is not Event and issubclass(k, Event))
