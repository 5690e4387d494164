"""The gateway's pure rules: CSRF and Origin decisions, which headers cross, live stream queries."""

from __future__ import annotations

from typing import Any

import pytest

from services.gateway.domain.csrf import csrf_refusal, origin_of, origin_refusal
from services.gateway.domain.headers import request_headers, response_headers
from services.gateway.domain.live import MAX_GPUS, LiveRequest, LiveRequestError, rows_of

OWN = frozenset({"http://127.0.0.1:8000"})


@pytest.mark.parametrize("method", ["GET", "HEAD", "OPTIONS"])
def test_safe_methods_need_no_csrf_token(method: str) -> None:
    assert csrf_refusal(method=method, presented=None, expected="t0ken") is None


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "post"])
def test_unsafe_methods_without_the_token_are_refused(method: str) -> None:
    why = csrf_refusal(method=method, presented=None, expected="t0ken")
    assert why is not None
    assert "missing X-CSRF-Token" in why


def test_a_wrong_token_is_refused_and_the_right_one_passes() -> None:
    assert "does not match" in (csrf_refusal(method="POST", presented="other", expected="t0ken") or "")
    assert csrf_refusal(method="POST", presented="", expected="t0ken") is not None
    assert csrf_refusal(method="DELETE", presented="t0ken", expected="t0ken") is None


def test_origin_is_refused_only_when_present_and_foreign() -> None:
    assert origin_refusal(None, allowed=OWN) is None
    assert origin_refusal("http://127.0.0.1:8000", allowed=OWN) is None
    assert origin_refusal("HTTP://127.0.0.1:8000/", allowed=OWN) is None
    assert origin_refusal("http://evil.example", allowed=OWN) is not None
    assert origin_refusal("http://127.0.0.1:8001", allowed=OWN) is not None
    assert origin_refusal("https://127.0.0.1:8000", allowed=OWN) is not None
    assert origin_refusal("null", allowed=OWN) is not None


def test_origin_of_drops_default_ports_and_paths() -> None:
    assert origin_of("https://Console.Example.com:443/x?y") == "https://console.example.com"
    assert origin_of("http://a:80") == "http://a"
    assert origin_of("http://a:8080/") == "http://a:8080"
    assert origin_of("http://[::1]:8000/") == "http://[::1]:8000"


def test_the_browsers_credentials_and_hop_by_hop_headers_never_reach_a_service() -> None:
    sent = request_headers(
        [
            ("Cookie", "gpucloud_session=s"),
            ("Authorization", "Bearer stolen"),
            ("X-API-Key", "forged"),
            ("X-CSRF-Token", "c"),
            ("Host", "127.0.0.1:8000"),
            ("Connection", "keep-alive, X-Private"),
            ("X-Private", "p"),
            ("Transfer-Encoding", "chunked"),
            ("Upgrade", "h2c"),
            ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
            ("Idempotency-Key", "k-1"),
            ("Content-Type", "application/json"),
        ],
        api_key="the-session-key",
    )
    names = [name.lower() for name, _ in sent]
    assert {n.lower(): v for n, v in sent}["x-api-key"] == "the-session-key"
    assert names.count("x-api-key") == 1
    for gone in ("cookie", "authorization", "x-csrf-token", "host", "connection", "x-private", "upgrade"):
        assert gone not in names
    assert "transfer-encoding" not in names
    assert {"traceparent", "idempotency-key", "content-type"} <= set(names)


def test_a_services_cookies_and_hop_by_hop_headers_never_reach_the_browser() -> None:
    kept = response_headers(
        [
            ("Content-Type", "text/csv"),
            ("Content-Disposition", 'attachment; filename="bill.csv"'),
            ("Set-Cookie", "x=1"),
            ("Connection", "close"),
            ("Keep-Alive", "timeout=5"),
            ("Retry-After", "2"),
        ]
    )
    assert [n for n, _ in kept] == ["Content-Type", "Content-Disposition", "Retry-After"]


def test_a_live_query_names_gpus_and_flags() -> None:
    wants = LiveRequest.parse(gpus="GPU-a, GPU-b,,", alerts="1", incidents=None)
    assert wants == LiveRequest(gpus=frozenset({"GPU-a", "GPU-b"}), alerts=True, incidents=False)
    assert LiveRequest.parse(gpus=None, alerts="0", incidents="true").gpus == frozenset()


@pytest.mark.parametrize(
    ("gpus", "alerts", "field"),
    [
        ("GPU-a,<script>", None, "gpus"),
        (",".join(f"GPU-{i}" for i in range(MAX_GPUS + 1)), None, "gpus"),
        (None, "yes", "alerts"),
    ],
)
def test_a_bad_live_query_names_the_parameter(gpus: str | None, alerts: str | None, field: str) -> None:
    with pytest.raises(LiveRequestError) as caught:
        LiveRequest.parse(gpus=gpus, alerts=alerts, incidents=None)
    assert caught.value.field == field


def test_only_the_followed_gpus_rows_are_kept_untouched() -> None:
    rows: list[dict[str, Any]] = [{"gpu": "GPU-a", "sm_util_pct": 5.0}, {"gpu": "GPU-b"}, {"node": "no-gpu"}]
    assert rows_of(rows, frozenset({"GPU-a"})) == [{"gpu": "GPU-a", "sm_util_pct": 5.0}]
