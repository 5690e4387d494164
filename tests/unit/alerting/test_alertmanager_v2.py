"""Alertmanager's shapes over our silences and inhibition: matchers, states, filters, tenants, rule files."""

from __future__ import annotations

import pytest

from services.alerting.api.alertmanager_v2_schemas import (
    MatcherV2,
    PostableSilence,
    gettable_silence,
    matcher_from_v2,
)
from services.alerting.domain.alerts import Alert, fingerprint
from services.alerting.domain.inhibition import (
    DEFAULT_INHIBIT_RULES,
    InhibitRule,
    confine_rule,
    inhibit_rules_from_config,
    inhibited_by,
    is_inhibited,
    to_alertmanager,
)
from services.alerting.domain.matchers import Matcher, MatchOp
from services.alerting.domain.silences import (
    Silence,
    confine_to_tenant,
    parse_matcher_list,
    silence_matches_filter,
)
from tests.unit.alerting.builders import alert
from tests.unit.alerting.clock import at


def owned(name: str = "GpuMemoryHigh", *, gpu: str = "GPU-1", tenant: str | None = None) -> Alert:
    """An alert of node-a, labelled with its tenant when given."""
    labels = {**alert(name, gpu=gpu).labels, **({"tenant": tenant} if tenant else {})}
    return Alert(fingerprint=fingerprint(labels), labels=labels, annotations={}, starts_at=at(0))


SILENCE = Silence(
    id="s1",
    matchers=(Matcher(name="alertname", value="GpuHot"), Matcher(name="node", op=MatchOp.RE, value="a.*")),
    starts_at=at(100),
    ends_at=at(200),
    created_by="ops",
    comment="drain",
)


@pytest.mark.parametrize(
    ("is_regex", "is_equal", "op"),
    [
        (False, True, MatchOp.EQ),
        (False, False, MatchOp.NE),
        (True, True, MatchOp.RE),
        (True, False, MatchOp.NRE),
    ],
)
def test_an_alertmanager_matcher_maps_both_ways_onto_ours(
    is_regex: bool, is_equal: bool, op: MatchOp
) -> None:
    ours = matcher_from_v2(MatcherV2(name="gpu", value="G.*", is_regex=is_regex, is_equal=is_equal))
    assert ours.op is op
    back = gettable_silence(SILENCE.model_copy(update={"matchers": (ours,)}), now=at(150)).matchers[0]
    assert (back.is_regex, back.is_equal) == (is_regex, is_equal)


def test_a_silence_reports_pending_active_and_expired_as_alertmanager_does() -> None:
    states = [gettable_silence(SILENCE, now=at(t)).status.state for t in (99, 100, 199.9, 200)]
    assert states == ["pending", "active", "active", "expired"]
    assert gettable_silence(SILENCE, now=at(250)).updated_at == SILENCE.ends_at


def test_a_postable_silence_reads_amtools_camel_case_body() -> None:
    body = PostableSilence.model_validate_json(
        '{"matchers":[{"name":"alertname","value":"X","isRegex":false}],"startsAt":"2026-01-01T00:00:00Z",'
        '"endsAt":"2026-01-01T01:00:00Z","createdBy":"me","comment":"c","id":"old"}'
    )
    assert (body.id, body.matchers[0].is_equal, body.created_by) == ("old", True, "me")


def test_filters_parse_quoted_unquoted_braced_and_refuse_garbage() -> None:
    assert parse_matcher_list('alertname="A,B"') == (Matcher(name="alertname", value="A,B"),)
    assert parse_matcher_list("{node=~n.*, gpu!=x}") == (
        Matcher(name="node", op=MatchOp.RE, value="n.*"),
        Matcher(name="gpu", op=MatchOp.NE, value="x"),
    )
    for bad, problem in (
        ("=x", "bad matcher format"),
        ("node", "bad matcher format"),
        ("a=~(b+)+", "exponential"),
    ):
        with pytest.raises(ValueError, match=problem):
            parse_matcher_list(bad)


def test_a_silence_filter_matches_the_labels_its_equality_matchers_set() -> None:
    assert silence_matches_filter(SILENCE, parse_matcher_list('alertname="GpuHot"'))
    assert silence_matches_filter(SILENCE, ())
    assert not silence_matches_filter(SILENCE, parse_matcher_list('alertname="Other"'))
    assert not silence_matches_filter(SILENCE, parse_matcher_list('node="a1"'))  # a regex sets no label


def test_a_tenant_matcher_set_is_confined_to_the_tenant_and_an_admins_left_alone() -> None:
    own = Matcher(name="tenant", value="acme")
    assert confine_to_tenant(SILENCE.matchers, "acme") == (*SILENCE.matchers, own)
    assert confine_to_tenant((own,), "acme") == (own,)
    assert confine_to_tenant(SILENCE.matchers, None) == SILENCE.matchers
    with pytest.raises(ValueError, match=r"^matchers\.0: .*confined to tenant 'acme'"):
        confine_to_tenant((Matcher(name="tenant", op=MatchOp.RE, value=".*"),), "acme")


ALERTMANAGER_CONFIG = {
    "route": {"receiver": "pager"},
    "inhibit_rules": [
        {
            "source_matchers": ['alertname="NodeDown"', "severity=~critical|page"],
            "target_matchers": ["severity!=critical"],
            "equal": ["node"],
        },
        {
            "source_match": {"alertname": "GpuLost"},
            "target_match_re": {"alertname": "Gpu.+"},
            "equal": ["gpu"],
        },
    ],
}


def test_alertmanagers_inhibit_rules_yaml_is_read_with_new_and_legacy_matchers() -> None:
    new, legacy = inhibit_rules_from_config(ALERTMANAGER_CONFIG)
    assert new.source_matchers == (
        Matcher(name="alertname", value="NodeDown"),
        Matcher(name="severity", op=MatchOp.RE, value="critical|page"),
    )
    assert new.target_matchers == (Matcher(name="severity", op=MatchOp.NE, value="critical"),)
    assert legacy.target_matchers == (Matcher(name="alertname", op=MatchOp.RE, value="Gpu.+"),)
    assert inhibit_rules_from_config([to_alertmanager(new)]) == (new,)


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        ({"receivers": []}, "inhibit_rules:"),
        ([{"source_matchers": ["=x"]}], r"inhibit_rules\.0: source_matchers\.0: bad matcher"),
        ([{"target_matchers": ["a=~(b+)+"]}], r"inhibit_rules\.0: target_matchers\.0: .*exponential"),
        ([{"equal": "node"}], r"inhibit_rules\.0: equal: a list"),
        ([{}, {"sourcematchers": []}], r"inhibit_rules\.1: unknown field 'sourcematchers'"),
        ([{}] * 101, "more than the 100 allowed"),
    ],
)
def test_a_broken_inhibit_rule_file_is_refused_naming_the_entry(doc: object, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        inhibit_rules_from_config(doc)


def test_a_tenants_inhibit_rule_only_mutes_that_tenants_alerts_by_that_tenants_alerts() -> None:
    rule = confine_rule(
        InhibitRule(
            source_matchers=(Matcher(name="alertname", value="NodeAgentSilent"),),
            target_matchers=(Matcher(name="gpu", op=MatchOp.NE, value=""),),
            equal=("node",),
        ),
        "acme",
    )
    down = owned("NodeAgentSilent", gpu="", tenant="acme")
    assert is_inhibited([rule], owned(tenant="acme").labels, firing=[down])
    assert not is_inhibited([rule], owned(tenant="other").labels, firing=[down])
    assert not is_inhibited([rule], owned(tenant="acme").labels, firing=[owned("NodeAgentSilent", gpu="")])
    with pytest.raises(ValueError, match=r"^target_matchers\.0"):
        confine_rule(
            rule.model_copy(update={"target_matchers": (Matcher(name="tenant", value="x"),)}), "acme"
        )


def test_inhibited_by_names_the_firing_sources_fingerprints() -> None:
    lost = alert("GpuLost", gpu="GPU-1")
    assert inhibited_by(DEFAULT_INHIBIT_RULES, alert("GpuFatalXid", gpu="GPU-1").labels, firing=[lost]) == [
        lost.fingerprint
    ]
    assert inhibited_by(DEFAULT_INHIBIT_RULES, alert("GpuFatalXid", gpu="GPU-2").labels, firing=[lost]) == []
