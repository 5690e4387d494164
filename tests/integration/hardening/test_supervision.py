"""`make run`'s supervisor, on a clock and processes of its own: backoff, its reset, and what it says.

The same supervisor on the real stack (a service killed with SIGKILL comes back ready) is in
tests/integration/test_devstack.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from libs.devkit.devstack import Backoff, Supervisor


@dataclass
class Fleet:
    """Processes that end when told to, a clock that moves when told to, and what the supervisor said."""

    now: float = 0.0
    status: dict[str, int | None] = field(default_factory=lambda: {"scheduler": None, "broker": None})
    launches: list[str] = field(default_factory=list)
    ready: bool = False
    refuse_launch: bool = False
    said: list[str] = field(default_factory=list)

    def launch(self, name: str) -> None:
        if self.refuse_launch:
            raise RuntimeError("port 9092 in use")
        self.launches.append(name)
        self.status[name] = None

    def supervisor(self) -> Supervisor:
        return Supervisor(
            names=list(self.status),
            exit_status=self.status.__getitem__,
            launch=self.launch,
            probes={"scheduler": lambda: self.ready},
            say=self.said.append,
            clock=lambda: self.now,
            backoff=Backoff(first_s=0.5, max_s=4.0, reset_after_s=60.0),
        )

    def crash_and_wait(self, supervisor: Supervisor, name: str, *, code: int = -9) -> float:
        """End ``name``, let the supervisor see it, then move the clock until it starts it again."""
        self.status[name] = code
        supervisor.tick()
        before, waited = len(self.launches), 0.0
        while len(self.launches) == before:
            self.now += 0.25
            waited += 0.25
            supervisor.tick()
            assert waited < 600, "never restarted"
        return waited


def test_a_crashed_process_is_restarted_after_a_doubling_delay_capped_at_the_maximum() -> None:
    fleet = Fleet()
    supervisor = fleet.supervisor()
    waits = [fleet.crash_and_wait(supervisor, "scheduler") for _ in range(6)]
    assert waits == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert fleet.launches == ["scheduler"] * 6
    assert fleet.said[0] == "scheduler exited with code -9; restarting in 0.5s (restart 1)"
    assert fleet.said[1] == "scheduler started again (restart 1)"
    assert "scheduler exited with code -9; restarting in 1.0s (restart 2)" in fleet.said
    assert "scheduler exited with code -9; restarting in 4.0s (restart 6)" in fleet.said


def test_the_delay_starts_over_once_the_process_stayed_up_a_while() -> None:
    fleet = Fleet()
    supervisor = fleet.supervisor()
    assert [fleet.crash_and_wait(supervisor, "scheduler") for _ in range(3)] == [0.5, 1.0, 2.0]
    fleet.now += 60.0  # up for the reset period
    assert fleet.crash_and_wait(supervisor, "scheduler") == 0.5
    assert fleet.said[-2] == "scheduler exited with code -9; restarting in 0.5s (restart 4)"


def test_ready_again_is_said_once_the_probe_passes_after_a_restart_and_not_before() -> None:
    fleet = Fleet()
    supervisor = fleet.supervisor()
    fleet.crash_and_wait(supervisor, "scheduler")
    supervisor.tick()
    assert not [line for line in fleet.said if "ready again" in line]
    fleet.ready = True
    supervisor.tick()
    supervisor.tick()
    assert [line for line in fleet.said if "ready again" in line] == ["scheduler is ready again (restart 1)"]


def test_a_failed_start_counts_as_a_crash_and_is_tried_again_later() -> None:
    fleet = Fleet(refuse_launch=True)
    supervisor = fleet.supervisor()
    fleet.status["broker"] = 0
    supervisor.tick()
    fleet.now += 0.5
    supervisor.tick()  # the restart is refused
    assert fleet.said == [
        "broker exited with code 0; restarting in 0.5s (restart 1)",
        "broker failed to start (port 9092 in use); restarting in 1.0s (restart 2)",
    ]
    fleet.refuse_launch = False
    fleet.now += 1.0
    supervisor.tick()
    assert fleet.launches == ["broker"]
    assert fleet.status["scheduler"] is None  # the other process was left alone throughout
