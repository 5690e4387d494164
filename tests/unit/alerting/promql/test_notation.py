"""The harness's reading of promtool's notation, tested: the oracle is only as good as its input."""

from __future__ import annotations

import math

import pytest

from services.alerting.domain.promql import is_stale
from tests.unit.alerting.promql.notation import expand_values, parse_series


def test_expanding_notation_gives_n_plus_one_values_and_n_gaps() -> None:
    assert expand_values("0+10x3") == [0.0, 10.0, 20.0, 30.0]
    assert expand_values("5-2x2 _x2 7 _ 1x2") == [5.0, 3.0, 1.0, None, None, 7.0, None, 1.0, 1.0, 1.0]


def test_steps_accumulate_as_promtool_adds_them() -> None:
    assert expand_values("0.1+0.1x2")[-1] == 0.1 + 0.1 + 0.1  # 0.30000000000000004, not 0.3


def test_stale_inf_and_nan_are_values() -> None:
    stale, inf, nan = expand_values("stale Inf NaN")
    assert stale is not None
    assert is_stale(stale)
    assert inf == math.inf
    assert nan is not None
    assert math.isnan(nan)
    assert not is_stale(nan)


def test_a_token_outside_the_notation_is_refused() -> None:
    with pytest.raises(ValueError, match="not promtool series notation"):
        expand_values("1 2 three")


def test_series_selectors_give_labels_with_the_name() -> None:
    assert parse_series('up{job="a", zone="x\\"y"}') == {"__name__": "up", "job": "a", "zone": 'x"y'}
    assert parse_series('{job="a"}') == {"job": "a"}
    assert parse_series("up") == {"__name__": "up"}
