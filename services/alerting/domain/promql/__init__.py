"""A PromQL evaluator over in-memory series, held to Prometheus 2.42 by promtool (docs/promql.md).

`Query.parse` reads an expression with promql-parser and refuses, at parse time, what we do not
evaluate; `Query.instant` answers it at one instant over a `SeriesStore`, as Prometheus's instant
query would.
"""

from services.alerting.domain.promql.errors import PromQLError, UnsupportedPromQL
from services.alerting.domain.promql.query import Query
from services.alerting.domain.promql.store import STALE_NAN, SeriesStore, is_stale

__all__ = ["STALE_NAN", "PromQLError", "Query", "SeriesStore", "UnsupportedPromQL", "is_stale"]
