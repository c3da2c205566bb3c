"""/metrics in the Prometheus text format, read from PostgreSQL at scrape time.

No counter lives in a web process: each of several web processes would count only the
requests it served, and a restart would lose them. Instead a custom collector reads, on
each scrape, what the database knows (runtime.fleet.selectors.metrics_snapshot): live
tasks by tenant and status, effects waiting for a person, pool occupancy and limits, and
each worker's and supervisor's own cumulative counters as its heartbeat stores them. A
counter is labelled by the process that counts it, so a process restart shows as a
counter reset, which Prometheus's rate() expects.

Access, the same in debug and production (docs/deploy.md): `Authorization: Bearer
$STEWARD_METRICS_TOKEN` from anywhere, or no token from a client address in
STEWARD_METRICS_ALLOW (loopback unless set). The labels name tenants, so everyone else
gets one 403 that says nothing of which check failed or what a scrape would show.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from runtime.errors import MetricsForbidden
from runtime.fleet.selectors import metrics_snapshot
from runtime.meter import WAIT_BOUNDS

# Counters each process keeps (runtime/meter.py names): (metric, help, counter key).
PROCESS_COUNTERS = [
    ("steward_steps", "Journal steps recorded.", "steps"),
    ("steward_effects_committed", "Effects whose receipt was recorded.", "effects_committed"),
    ("steward_claims", "Tasks claimed by an attempt.", "claims"),
    ("steward_lease_recoveries", "Expired leases whose task was re-queued (a worker died or froze).", "recovered"),
    ("steward_dead_letters", "Tasks parked as dead after expiring too often in a row.", "dead_lettered"),
    ("steward_sweeps", "Supervisor sweeps.", "sweeps"),
]


class StewardCollector(Collector):
    def collect(self):
        snap = metrics_snapshot()
        tasks = GaugeMetricFamily(
            "steward_tasks", "Live tasks (not yet finished) by tenant and status.", labels=["tenant", "status"]
        )
        for tenant, status, n in snap.live_tasks:
            tasks.add_metric([tenant, status], n)
        yield tasks

        unknown = GaugeMetricFamily(
            "steward_effects_unknown",
            "Effects whose outcome is unknown, waiting for an operator to resolve them.",
            labels=["tenant"],
        )
        for tenant, n in snap.unknown_effects:
            unknown.add_metric([tenant], n)
        yield unknown

        yield from _pools(snap.pools)
        yield from _processes(snap.processes)


def _pools(pools):
    figures = {
        "running": ("steward_pool_running", "Tasks running in the pool (each holds a slot)."),
        "queued": ("steward_pool_queued", "Tasks admitted to the pool, waiting for a slot (queue depth)."),
        "slots_held": ("steward_pool_slots_held", "Slots held by attempts."),
        "max_running": ("steward_pool_max_running", "The pool's running limit."),
        "max_queued": ("steward_pool_max_queued", "The pool's queued limit."),
    }
    families = {key: GaugeMetricFamily(name, help_, labels=["pool"]) for key, (name, help_) in figures.items()}
    for usage in pools:
        values = {
            "running": usage.running,
            "queued": usage.queued,
            "slots_held": usage.slots_held,
            "max_running": usage.pool.max_running,
            "max_queued": usage.pool.max_queued,
        }
        for key, family in families.items():
            family.add_metric([usage.pool.name], values[key])
    yield from families.values()


def _processes(processes):
    labels = ["process", "kind"]
    counters = {key: CounterMetricFamily(name, help_, labels=labels) for name, help_, key in PROCESS_COUNTERS}
    finished = CounterMetricFamily(
        "steward_tasks_finished", "Tasks an attempt finished, by outcome.", labels=[*labels, "outcome"]
    )
    waits = HistogramMetricFamily(
        "steward_dispatch_wait_seconds", "Seconds from queued to claimed, per claim.", labels=labels
    )
    live = GaugeMetricFamily("steward_processes_live", "Workers and supervisors seen within a lease.", labels=["kind"])
    swept = GaugeMetricFamily("steward_last_sweep_timestamp_seconds", "When a supervisor last swept (Unix time).")
    alive: dict[str, int] = {"worker": 0, "supervisor": 0}
    last_sweep = None
    for p in processes:
        row, values = p.process, p.process.counters or {}
        key = [row.name, row.kind]
        for name, family in counters.items():
            if name in values:
                family.add_metric(key, values[name])
        for outcome in ("completed", "failed"):
            if outcome in values:
                finished.add_metric([*key, outcome], values[outcome])
        buckets = values.get("waits")
        if isinstance(buckets, list) and len(buckets) == len(WAIT_BOUNDS):
            running, cumulative = 0, []
            for bound, count in zip(WAIT_BOUNDS, buckets, strict=True):
                running += count
                cumulative.append(("+Inf" if bound == float("inf") else repr(bound), running))
            waits.add_metric(key, cumulative, sum_value=float(values.get("wait_seconds_sum", 0.0)))
        if p.alive:
            alive[row.kind] = alive.get(row.kind, 0) + 1
        if row.last_sweep_at and (last_sweep is None or row.last_sweep_at > last_sweep):
            last_sweep = row.last_sweep_at
    for kind, n in sorted(alive.items()):
        live.add_metric([kind], n)
    if last_sweep is not None:
        swept.add_metric([], last_sweep.timestamp())
    yield from counters.values()
    yield from (finished, waits, live, swept)


# Headers a proxy adds to say whom it relays for. Arriving from an address that is not a
# trusted proxy, they mean a proxy we do not know relayed the request (a reverse proxy on
# this host makes every client look like loopback): the address check is then refused.
FORWARDING_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Real-IP")


def _address(text: str):
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        return None
    # ::ffff:127.0.0.1, as a dual-stack socket reports an IPv4 peer, is 127.0.0.1.
    return getattr(address, "ipv4_mapped", None) or address


def _within(address, networks) -> bool:
    return any(address.version == net.version and address in net for net in networks)


def client_address(request):
    """The address /metrics is answering, or None when it cannot be known. REMOTE_ADDR,
    unless that is a trusted proxy: then X-Forwarded-For read from the right, past every
    trusted proxy, to the first hop that is not one (entries to its left are whatever
    the client wrote). A forwarding header from anyone else, or a malformed one from a
    trusted proxy, leaves the address unknown."""
    peer = _address(request.META.get("REMOTE_ADDR") or "")
    if peer is None:
        return None
    trusted = settings.STEWARD_TRUSTED_PROXIES
    if not _within(peer, trusted):
        return None if any(name in request.headers for name in FORWARDING_HEADERS) else peer
    hops = (request.headers.get("X-Forwarded-For") or "").split(",")
    if not any(hop.strip() for hop in hops):
        return None  # a trusted proxy that did not say whom it relays for
    address = None
    for hop in reversed(hops):
        address = _address(hop)
        if address is None:
            return None
        if not _within(address, trusted):
            return address
    return address  # every hop a trusted proxy: the first of them asked


def _token_sent(request) -> bool:
    """`Authorization: Bearer <STEWARD_METRICS_TOKEN>`, compared in constant time (over
    digests, so not even the token's length shows). Unset, no token opens /metrics; a
    token anywhere else (the query string, another header) counts for nothing."""
    token = settings.STEWARD_METRICS_TOKEN
    scheme, _, sent = request.headers.get("Authorization", "").partition(" ")
    if not token or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(hashlib.sha256(sent.encode()).digest(), hashlib.sha256(token.encode()).digest())


def _allowed(request) -> bool:
    if _token_sent(request):
        return True
    address = client_address(request)
    return address is not None and _within(address, settings.STEWARD_METRICS_ALLOW)


@require_GET
def metrics(request):
    if not _allowed(request):
        refused = MetricsForbidden(
            "send Authorization: Bearer <the metrics token>, or scrape from an allowed address (docs/deploy.md)"
        )
        return JsonResponse(refused.as_dict(), status=refused.status)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StewardCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
