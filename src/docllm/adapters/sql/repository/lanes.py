"""The LaneViews role over SQLAlchemy: figures per lane and per tenant (domain/lanes/figures.py).

Every read is grouped by the database and its answer is bounded (lanes x kinds x wait buckets;
N tenants x the same); the rows read are those not yet ended and those ended within the window,
ranges of the (status, updated_at) index, not the whole table (docs/ARCHITECTURE.md, Lanes and
tenants, says which index serves the tenants' ranking on a big backlog).
"""

from __future__ import annotations

from sqlalchemy import and_, case, distinct, func, literal, or_, select

from docllm.adapters.sql.repository.base import FAILED, PENDING, PROCESSING, SUCCESS, RepositoryBase
from docllm.adapters.sql.schema import task_doc_llm as t
from docllm.adapters.sql.timestamps import seconds_between, utc_ago, utcnow
from docllm.domain.lanes.figures import OTHERS, WAIT_BUCKETS, Kind, LaneFigures, Tally, checked_top, lane_of

KIND = case(
    (t.c.status == PENDING.value, Kind.pending.value),
    (t.c.status == PROCESSING.value, Kind.processing.value),
    else_=Kind.finished.value,
)
WAIT = seconds_between(t.c.created_at, t.c.processing_started_at)
# The wait bucket of a row that started its one and only attempt (see lane_figures); NULL otherwise.
BUCKET = case(
    (
        and_(t.c.attempt == 1, t.c.processing_started_at.is_not(None)),
        case(*((bound >= WAIT, i) for i, bound in enumerate(WAIT_BUCKETS)), else_=len(WAIT_BUCKETS)),
    ),
    else_=None,
)
NOT_ENDED = t.c.status.in_((PENDING.value, PROCESSING.value))


def in_scope(window_s: int):
    """Rows not yet ended, and rows ended within the window (an ended row is not written again
    until an operator reopens it, so its ``updated_at`` is its end)."""
    ended = and_(t.c.status.in_((SUCCESS.value, FAILED.value)), t.c.updated_at >= utc_ago(window_s))
    return or_(NOT_ENDED, ended)


def grouped(column, window_s: int):
    """(column, kind, bucket, rows, age of the oldest row in seconds) per group."""
    oldest = func.max(seconds_between(t.c.created_at, utcnow()))
    return select(column, KIND, BUCKET, func.count(), oldest).where(in_scope(window_s)).group_by(column, KIND, BUCKET)


def ranking(top: int, window_s: int):
    """The top tenants of the window's rows (``lane_figures.top_tenants_order``): a tenant whose
    work all ended within the window ranks by what it did."""
    depth = func.sum(case((t.c.status == PENDING.value, 1), else_=0))
    running = func.sum(case((t.c.status == PROCESSING.value, 1), else_=0))
    ended = func.sum(case((NOT_ENDED, 0), else_=1))
    return (
        select(t.c.tenant)
        .where(in_scope(window_s))
        .group_by(t.c.tenant)
        .order_by(depth.desc(), running.desc(), ended.desc(), t.c.tenant)
        .limit(top)
    )


def beyond(names: list[str | None]):
    """The rows of every tenant not in ``names`` (rows without a tenant among them unless None is)."""
    named = [n for n in names if n is not None]
    if None in names:
        return and_(t.c.tenant.is_not(None), t.c.tenant.not_in(named))
    return or_(t.c.tenant.is_(None), t.c.tenant.not_in(named))


def of_tenants(names: list[str | None]):
    named = [n for n in names if n is not None]
    chosen = [t.c.tenant.in_(named)] if named else []
    if None in names:
        chosen.append(t.c.tenant.is_(None))
    return or_(*chosen)


class LaneViewsOps(RepositoryBase):
    def lane_figures(self, window_s: int, top_tenants: int) -> LaneFigures:
        top = checked_top(top_tenants)

        def work(conn):
            lanes, tenants = Tally(), Tally()
            for priority, kind, bucket, n, oldest in conn.execute(grouped(t.c.priority, window_s)):
                lanes.add(lane_of(priority), Kind(kind), bucket, n, _float(oldest))
            names = [row[0] for row in conn.execute(ranking(top, window_s))] if top else []
            if names:
                stmt = grouped(t.c.tenant, window_s).where(of_tenants(names))
                for tenant, kind, bucket, n, oldest in conn.execute(stmt):
                    tenants.add(tenant, Kind(kind), bucket, n, _float(oldest))
            for _, kind, bucket, n, oldest in conn.execute(grouped(literal(OTHERS), window_s).where(beyond(names))):
                tenants.add(OTHERS, Kind(kind), bucket, n, _float(oldest))
            working = conn.execute(select(func.count(distinct(t.c.tenant))).where(NOT_ENDED)).scalar_one()
            others = tenants.groups.get(OTHERS)
            return LaneFigures(window_s, lanes.lanes(), tenants.ranked(names), int(working), others)

        return self._run(work)


def _float(value) -> float | None:
    return None if value is None else max(0.0, float(value))
