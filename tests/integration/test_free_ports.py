"""Ports for listeners a test or bench starts: free, consecutive, and never in the ephemeral range."""

from __future__ import annotations

import socket

import pytest

from libs.devkit import broker
from libs.devkit.broker import free_port, free_ports


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_a_run_of_free_ports_lies_below_the_range_outgoing_connections_use() -> None:
    first = free_ports(6)
    assert first >= 20000
    assert first + 6 <= broker._ephemeral_low()
    assert all(_bindable(port) for port in range(first, first + 6))
    assert free_port() < broker._ephemeral_low()


def test_a_taken_port_is_never_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = int(taken.getsockname()[1])
        monkeypatch.setattr(broker, "_ephemeral_low", lambda: port + 2)
        # Candidates: the taken port and the one after it (or the kernel's pick): never the taken one.
        assert {free_ports(1, low=port) for _ in range(20)}.isdisjoint({port})
        # Every run of two below the range includes the taken port.
        with pytest.raises(RuntimeError, match="no 2 consecutive free ports"):
            free_ports(2, low=port - 1)
