"""The differential cases: each expression, the series it reads (promtool notation) and its eval times."""

from __future__ import annotations

from tests.unit.alerting.promql.oracle import Case

__all__ = ["CASES"]

COUNTERS = (
    ('http_total{job="a", instance="1"}', "0+10x10 5+10x10"),  # a reset at 11m
    ('http_total{job="a", instance="2"}', "0+3x20"),
    ('http_total{job="b", instance="1"}', "100+1x5 _x5 110+1x9"),  # a 6m gap
    ('http_total{job="b", instance="2"}', "_x8 40+7x12"),  # starts late, far from zero
)
TEMPS = (
    ('temp{gpu="0", node="n1"}', "50 55 60 65 70 75 80 85 90 85 80 70 70"),
    ('temp{gpu="1", node="n1"}', "40+1x12"),
    ('temp{gpu="0", node="n2"}', "90-2x12"),
)
LIMITS = (
    ('limit{gpu="0", node="n1", team="t"}', "80x12"),
    ('limit{gpu="1", node="n1", team="t"}', "45x12"),
)
OWNERS = (
    ('node_owner{node="n1", owner="ann"}', "1x12"),
    ('node_owner{node="n2", owner="bob"}', "1x12"),
)
GAPS = (('g{a="x"}', "1 _x3 5 _x6 9 _x10"),)  # a 4m gap (inside the lookback), then a 7m one (beyond)
STALE = (('s{a="x"}', "1 2 stale 4 5 stale _x3 8"),)
FRACTIONS = (
    ('f{i="1"}', "0.1+0.1x10"),
    ('f{i="2"}', "0.7 0.2 0.3 1e-3 1e10 0.33 3.3 0.1 0.9 0.0007 0.2"),
    ('f{i="3"}', "1.1-0.3x10"),
)

STALE_COUNTER = (('c_total{i="1"}', "0 5 10 stale 20 25 30 1 6 11 stale _x2 40"),)
SCRAPED = (('gpu_xid_total{gpu="0"}', "0x8 1x3 3+1x8"), ('gpu_xid_total{gpu="1"}', "7 _ 7 _x3 0 0 1"))

T = ("0m", "1m", "4m", "5m", "6m", "9m", "10m", "12m")
LATE = ("5m", "10m", "11m", "12m", "15m", "20m")


def _cases(series: tuple[tuple[str, str], ...], at: tuple[str, ...], *exprs: str) -> list[Case]:
    return [Case(expr=e, series=series, at=at) for e in exprs]


CASES: list[Case] = [
    # Selectors, the lookback, gaps, stale markers, offset.
    *_cases(TEMPS, T, "temp", 'temp{gpu="0"}', 'temp{gpu=~"0|1"}', 'temp{gpu!="0"}', 'temp{node!~"n1"}'),
    *_cases(
        TEMPS, T, 'temp{node=~"n"}', 'temp{node=~"n.*", gpu!~"1|2"}', "temp offset 3m", "temp offset -2m"
    ),
    *_cases(TEMPS, ("12m", "16m", "17m", "17m1s", "18m"), "temp"),
    *_cases(
        GAPS, ("0m", "3m", "4m", "5m", "6m", "9m", "10m", "14m", "15m", "16m", "20m"), "g", "g offset 1m"
    ),
    *_cases(STALE, ("0m", "1m", "2m", "3m", "5m", "6m", "7m", "9m", "10m"), "s", "count_over_time(s[3m])"),
    *_cases(STALE, ("3m", "6m", "10m"), "last_over_time(s[2m])", "absent(s)", "timestamp(s)"),
    # Counters: rate/increase/delta/irate/idelta, resets, gaps, extrapolation near zero and at the edges.
    *_cases(COUNTERS, LATE, "rate(http_total[5m])", "increase(http_total[5m])", "rate(http_total[1h])"),
    *_cases(
        COUNTERS, LATE, "increase(http_total[10m])", "increase(http_total[90s])", "delta(http_total[5m])"
    ),
    *_cases(COUNTERS, LATE, "irate(http_total[5m])", "idelta(http_total[3m])", "resets(http_total[20m])"),
    *_cases(COUNTERS, LATE, "changes(http_total[10m])", "rate(http_total[5m] offset 2m)"),
    *_cases(COUNTERS, LATE, 'sum by (job) (rate(http_total{job=~"a|b"}[5m]))', "rate(http_total[2m]) > 0.1"),
    *_cases(COUNTERS, ("10m", "20m"), "increase(http_total[30s])", "rate(http_total[1m])"),
    *_cases(
        STALE_COUNTER,
        ("3m", "4m", "6m", "8m", "9m", "12m", "14m"),
        "rate(c_total[4m])",
        "increase(c_total[10m])",
    ),
    *_cases(STALE_COUNTER, ("3m", "9m", "14m"), "irate(c_total[5m])", "resets(c_total[10m])", "c_total"),
    *[
        Case(expr=e, series=SCRAPED, at=("1m", "2m", "2m30s", "3m", "4m10s", "5m"), interval="15s")
        for e in (
            "increase(gpu_xid_total[1m]) > 0",
            "rate(gpu_xid_total[2m])",
            "increase(gpu_xid_total[45s])",
            "changes(gpu_xid_total[1m])",
            "gpu_xid_total offset 30s",
            "rate(gpu_xid_total[1m]) >= 1 / 30",
            "increase(gpu_xid_total[1m]) == bool 4",
        )
    ],
    *_cases(TEMPS, T, "delta(temp[5m])", "changes(temp[10m])", "resets(temp[10m])", "idelta(temp[2m])"),
    # Aggregations over time.
    *_cases(TEMPS, T, "avg_over_time(temp[5m])", "min_over_time(temp[5m])", "max_over_time(temp[5m])"),
    *_cases(TEMPS, T, "sum_over_time(temp[5m])", "count_over_time(temp[5m])", "last_over_time(temp[5m])"),
    *_cases(TEMPS, T, "present_over_time(temp[2m])", "quantile_over_time(0.9, temp[10m])"),
    *_cases(TEMPS, T, "stddev_over_time(temp[10m])", "stdvar_over_time(temp[10m])"),
    *_cases(FRACTIONS, ("5m", "10m"), "avg_over_time(f[10m])", "sum_over_time(f[10m])", "sum(f)"),
    *_cases(FRACTIONS, ("5m", "10m"), "stddev_over_time(f[10m])", "stdvar_over_time(f[10m])"),
    *_cases(
        FRACTIONS, ("10m",), "quantile_over_time(0.25, f[10m])", "quantile(0.3, f)", "max_over_time(f[10m])"
    ),
    *_cases(FRACTIONS, ("1m", "2m", "4m"), "avg(f)"),
    *_cases(FRACTIONS, ("4m", "8m", "9m"), "stddev(f)"),
    *_cases(FRACTIONS, ("8m", "9m"), "stdvar(f)"),
    *_cases(
        GAPS, ("5m", "10m", "16m"), "absent_over_time(g[3m])", 'absent_over_time(nope{a="b", c!="d"}[1m])'
    ),
    # Functions of instant vectors and scalars.
    *_cases(TEMPS, ("4m", "10m"), "abs(temp - 70)", "ceil(temp / 7)", "floor(temp / 7)", "round(temp / 7)"),
    *_cases(TEMPS, ("4m", "10m"), "round(temp, 4)", "round(-temp / 8)", "clamp(temp, 50, 80)"),
    *_cases(TEMPS, ("4m", "10m"), "clamp_min(temp, 60)", "clamp_max(temp, 60)", "clamp(temp, 80, 50)"),
    *_cases(TEMPS, ("4m", "17m"), "time()", "timestamp(temp)", "timestamp(temp + 1)", "vector(1)"),
    *_cases(TEMPS, ("4m",), "vector(time())", 'scalar(temp{gpu="1"})', "sort(temp)", "sort_desc(temp)"),
    *_cases(TEMPS, ("4m",), 'temp * scalar(temp{gpu="1"})', "absent(temp)", 'absent(temp{gpu="7"})'),
    *_cases(TEMPS, ("4m",), 'absent(nope{a="b", c=~"d"})', 'absent(nope{a="b", a="c"})', "absent(sum(nope))"),
    *_cases(TEMPS, ("4m",), 'absent(nope{a=""})', 'absent(nope{a="b"} offset 1m)', "timestamp((temp))"),
    # Binary operators: comparison (filtering, bool, swapped), arithmetic, boundaries.
    *_cases(TEMPS, T, "temp > 70", "temp >= 70", "temp == 70", "temp != 70", "temp < 60", "temp <= 60"),
    *_cases(TEMPS, T, "temp > bool 70", "70 < temp", "70 < bool temp", "temp == bool 90", "temp >= 90"),
    *_cases(TEMPS, ("4m", "10m"), "temp + 1", "2 * temp", "temp / 0", "-temp / 0", "temp % 7", "temp ^ 2"),
    *_cases(
        TEMPS, ("4m", "10m"), "-temp", "-(temp)", "100 - temp", "temp - temp", "temp / on(gpu, node) temp"
    ),
    *_cases(TEMPS + LIMITS, ("4m", "10m"), "temp > ignoring(team) limit", "temp > bool ignoring(team) limit"),
    *_cases(TEMPS + LIMITS, ("4m", "10m"), "temp - on(gpu, node) limit", "temp > on(gpu, node) limit"),
    *_cases(TEMPS + LIMITS, ("4m", "10m"), "temp / ignoring(team) limit", "temp > limit", "temp + limit"),
    *_cases(TEMPS + OWNERS, ("4m",), "temp * on(node) group_left(owner) node_owner"),
    *_cases(
        TEMPS + OWNERS,
        ("4m",),
        "node_owner * on(node) group_right temp",
        "temp > on(node) group_left node_owner",
    ),
    *_cases(TEMPS + OWNERS, ("4m",), "node_owner < bool on(node) group_right(owner) temp"),
    # Scalars.
    *_cases((), ("0m", "3m"), "1 + 2 * 3", "2 ^ 3 ^ 2", "10 % 3", "-7 % 3", "1 == bool 1", "2 > bool 3"),
    *_cases((), ("0m", "3m"), "time() - 60", "-(1)", "(1 + 2) / 4", "2 ^ 0.5", "2 ^ -2", "1 / 0", "-1 / 0"),
    *_cases((), ("0m",), "0 ^ -1", "(-8) ^ 3", "10 ^ 400", "5 % 0.5", "3 ^ 0.5", "4 ^ -0.5"),
    # Set operators.
    *_cases(TEMPS + LIMITS, ("4m", "10m"), "temp and limit", "temp and on(gpu) limit", "temp or limit"),
    *_cases(TEMPS + LIMITS, ("4m", "10m"), "temp unless limit", "temp unless on(node) limit"),
    *_cases(TEMPS + LIMITS, ("4m", "10m"), "temp > 70 or temp < 45", "limit or on(gpu) temp", "nope or temp"),
    *_cases(TEMPS + LIMITS, ("4m", "10m"), "temp and ignoring(team) limit", "temp unless nope"),
    # Aggregations, by and without.
    *_cases(TEMPS, T, "sum(temp)", "min(temp)", "max(temp)", "count(temp)", "group(temp)"),
    *_cases(TEMPS, T, "sum by (node) (temp)", "sum without (gpu) (temp)"),
    # promtool loads series in random order (2.42's test loader ranges over a map), and a mean or a
    # variance across series depends in its last bit on the order: these run only at times where it
    # does not (test_every_case_answers_the_same_in_any_series_order checks).
    *_cases(TEMPS, ("0m", "4m", "5m", "6m"), "avg(temp)"),
    *_cases(TEMPS, ("0m", "1m", "6m"), "stddev(temp)"),
    *_cases(TEMPS, ("0m", "6m"), "stdvar(temp)"),
    *_cases(TEMPS, T, "avg by (node) (temp)", "max without (node, gpu) (temp)", "count by (__name__) (temp)"),
    *_cases(TEMPS, T, "topk(2, temp)", "bottomk(1, temp)", "topk by (node) (1, temp)", "topk(5, temp)"),
    *_cases(TEMPS, T, "quantile(0.5, temp)", "quantile by (node) (0.75, temp)", 'count_values("v", temp)'),
    *_cases(TEMPS, T, 'count_values without (gpu) ("v", temp)', "topk(0, temp)", "sum by () (temp)"),
    *_cases(TEMPS, ("10m", "12m"), "topk(1, temp)", "bottomk(2, temp)", "bottomk by (gpu) (1, temp)"),
    *_cases(FRACTIONS, ("3m", "10m"), 'count_values("value", f)', "topk(2, f)", "bottomk(2, -f)"),
    *_cases(TEMPS, T, "sum(temp) > 150", "count(temp > 60) >= 2", "max(temp) - min(temp)"),
]
