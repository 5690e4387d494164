from __future__ import annotations

from services.alerting.domain.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign, verify

SECRET = b"s3cret"
BODY = b'{"status":"firing"}'


def test_signature_header_is_sha256_hex_of_timestamp_and_body() -> None:
    headers = sign(secret=SECRET, body=BODY, timestamp=1_700_000_000)
    assert headers[TIMESTAMP_HEADER] == "1700000000"
    assert headers[SIGNATURE_HEADER].startswith("sha256=")
    assert len(headers[SIGNATURE_HEADER]) == len("sha256=") + 64


def test_receiver_accepts_an_untouched_recent_request_with_any_header_case() -> None:
    headers = {k.lower(): v for k, v in sign(secret=SECRET, body=BODY, timestamp=1000).items()}
    assert verify(secret=SECRET, body=BODY, headers=headers, now=1060)


def test_receiver_rejects_altered_body_wrong_secret_or_old_timestamp() -> None:
    headers = sign(secret=SECRET, body=BODY, timestamp=1000)
    assert not verify(secret=SECRET, body=BODY + b" ", headers=headers, now=1000)
    assert not verify(secret=b"other", body=BODY, headers=headers, now=1000)
    assert not verify(secret=SECRET, body=BODY, headers=headers, now=1301)


def test_receiver_rejects_a_replayed_signature_under_a_new_timestamp() -> None:
    headers = {**sign(secret=SECRET, body=BODY, timestamp=1000), TIMESTAMP_HEADER: "2000"}
    assert not verify(secret=SECRET, body=BODY, headers=headers, now=2000)
    assert not verify(secret=SECRET, body=BODY, headers={}, now=2000)
