"""GPU recommendation and duration prediction from the fleet and a tenant's history."""

from __future__ import annotations

from services.scheduler.domain.advice import HistoryJob, ModelFacts, memory_need_gb, predict, recommend

FLEET = {
    "A100": ModelFacts("A100", 80, 8.0, 16),
    "L4": ModelFacts("L4", 24, 2.0, 32),
    "H100": ModelFacts("H100", 80, 16.0, 8),
}


def jobs(model: str, hours: list[float], framework: str = "PyTorch") -> list[HistoryJob]:
    return [HistoryJob(model, 1, framework, h * 3600) for h in hours]


def test_memory_need_is_estimated_from_parameters_when_not_given() -> None:
    assert memory_need_gb(model_size_b=1.0, memory_gb=None, mode="training") == 16 * 1.2
    assert memory_need_gb(model_size_b=7.0, memory_gb=None, mode="inference") == 7 * 2 * 1.2
    assert memory_need_gb(model_size_b=7.0, memory_gb=40.0, mode="training") == 40.0


def test_cheapest_model_that_fits_the_memory_is_recommended_and_thin_history_is_flagged() -> None:
    small = recommend(fleet=FLEET, need_gb=10, framework=None, deadline_h=None, history=[], min_samples=3)
    assert (small.model, small.count) == ("L4", 1)
    assert small.history_too_thin
    assert any("history too thin" in r for r in small.reasons)
    big = recommend(fleet=FLEET, need_gb=60, framework=None, deadline_h=None, history=[], min_samples=3)
    assert (big.model, big.count) == ("A100", 1), "one A100 beats three L4s: fewest GPUs first"


def test_history_that_misses_the_deadline_moves_the_advice_to_a_model_that_met_it() -> None:
    history = jobs("L4", [10, 12, 11]) + jobs("A100", [2, 3, 2.5])
    advice = recommend(
        fleet=FLEET, need_gb=10, framework="PyTorch", deadline_h=4, history=history, min_samples=3
    )
    assert advice.model == "A100"
    assert not advice.history_too_thin
    assert advice.expected_duration_s == 2.5 * 3600


def test_prediction_uses_similar_jobs_and_widens_the_match_when_thin() -> None:
    history = jobs("A100", [1, 2, 3, 4]) + jobs("L4", [10], framework="JAX")
    exact = predict(history=history, framework="PyTorch", model="A100", min_samples=3)
    assert exact.p50_s == 2.5 * 3600
    assert exact.p90_s == 4 * 3600
    assert not exact.history_too_thin
    widened = predict(history=history, framework="JAX", model="L4", min_samples=3)
    assert widened.samples == 5
    assert "all your jobs" in widened.reasons[0]


def test_prediction_says_when_history_is_too_thin() -> None:
    thin = predict(history=jobs("A100", [1]), framework=None, model=None, min_samples=3)
    assert thin.history_too_thin
    assert thin.p50_s is None
