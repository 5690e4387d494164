"""A workload's later events are emitted in the trace of the request that submitted it."""

from __future__ import annotations

from libs.common.observability.tracing import current_traceparent, setup_tracing
from services.scheduler.service.trace import workload_trace

SUBMITTED = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_events_emitted_inside_a_workload_trace_carry_the_submissions_trace_id() -> None:
    setup_tracing(service_name="scheduler-test")
    with workload_trace(workload_id="wl-1", traceparent=SUBMITTED, name="scheduler.place"):
        inside = current_traceparent()
    assert inside is not None
    assert inside.split("-")[1] == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert inside != SUBMITTED  # a child span of the request, not the request itself


def test_a_workload_without_a_recorded_trace_leaves_the_current_context_alone() -> None:
    before = current_traceparent()
    with workload_trace(workload_id="wl-1", traceparent=None, name="scheduler.place"):
        assert current_traceparent() == before
