"""The report: one summary table per phase (like locust's), the targets met or not, or one JSON object."""

from __future__ import annotations

import json
from typing import TypedDict

from loadtest.autoscaled import IDLE_TIMEOUT_S, AutoscalerFigures
from loadtest.costs import Costs, cost_lines
from loadtest.floor.decider import DeciderFigures
from loadtest.stats import Latency, Row
from loadtest.tenants import TenantFigures

PLACEMENTS_TARGET = 2000.0
"""The target of durable placements per second."""
FLOOR_SHARE_TARGET = 0.5
"""The target share of the bus floor's throughput."""
P99_TARGET_MS = 100.0
"""p99 submit-to-placed at half the measured throughput, in milliseconds."""
INSIDE_COST_TARGET = 1.5
"""Scheduling inside a virtual cluster may cost at most this many times scheduling at the root."""
SERIAL_US_TARGET = 30.0
"""CPU microseconds of the serial path (the scheduler) per request (a submit or a removal)."""
MESH_US_TARGET = 150.0
"""CPU microseconds of every process of the mesh together per request."""
FAST_P99_TARGET_MS = 20.0
"""p99 submit-to-placed at half the measured rate, with the serial path cut."""
INSIDE_CPU_TARGET = 1.3
"""The mesh's CPU per placement inside virtual clusters, at most this many times the root's."""


class Phase(TypedDict):
    """The figures of one phase."""

    name: str
    target: str
    description: str
    mode: str
    users: int
    batch: int
    """Requests per message (1: each alone; above 1: `corral.req.batch` messages, each request counted as one)."""
    rate_target: float
    seconds: float
    requests: int
    placements: int
    pending: int
    errors: int
    removes: int
    placements_per_s: float
    decisions_per_s: float
    requests_per_s: float
    latency_ms: Latency
    """Submit to Placed, over the placed requests."""
    rows: list[Row]
    cpu: dict[str, float]
    """Each process's share of a core over the measured window."""
    costs: Costs
    dropped: int
    lag_p99_ms: float
    lag_max_ms: float
    unfinished: int
    first_error: str
    decider: DeciderFigures | None


class Goal(TypedDict):
    """One of the targets: what it asks, what was measured, and whether it was met (None: not measured)."""

    name: str
    goal: str
    measured: str
    met: bool | None


class Report(TypedDict):
    """Everything one run measured."""

    nats_url: str
    embedded_mesh: bool
    replicas: int
    """nats-servers the mesh ran on, each stream kept on all of them."""
    core: str
    """The build of the core the embedded mesh ran (`CORRAL_CORE`: source or compiled); "" for an external mesh."""
    nodes: int
    users: int
    connections: int
    hold: int
    registration_s: float
    phases: dict[str, Phase]
    floor_share: float | None
    targets: list[Goal]
    tenants: TenantFigures | None
    """The virtual-cluster phase (None when it did not run)."""
    autoscaler: AutoscalerFigures | None
    """The autoscaler phase (None when it did not run)."""


def _throughput(corral: Phase | None) -> Goal:
    goal = f"durable placements/s >= {PLACEMENTS_TARGET:,.0f}"
    if corral is None:
        return Goal(name="throughput", goal=goal, measured="not run", met=None)
    rate = corral["placements_per_s"]
    capped = corral["mode"] == "open" and corral["rate_target"] < PLACEMENTS_TARGET
    if capped:  # an open loop below the target cannot show it
        return Goal(name="throughput", goal=goal, measured=f"{rate:,.0f}/s, capped by --rate", met=None)
    return Goal(name="throughput", goal=goal, measured=f"{rate:,.0f}/s", met=rate >= PLACEMENTS_TARGET)


def _floor_share(corral: Phase | None, floor: Phase | None) -> tuple[float | None, Goal]:
    goal = f"placements/s >= {FLOOR_SHARE_TARGET:.0%} of the bus floor"
    if corral is None or floor is None or floor["decisions_per_s"] <= 0:
        return None, Goal(name="floor_share", goal=goal, measured="not run", met=None)
    share = round(corral["placements_per_s"] / floor["decisions_per_s"], 3)
    measured = f"{corral['placements_per_s']:,.0f} / {floor['decisions_per_s']:,.0f} = {share:.0%}"
    if corral["mode"] == "open" or floor["mode"] == "open":  # both capped by --rate: the ratio says nothing
        return share, Goal(name="floor_share", goal=goal, measured=measured + ", both capped by --rate", met=None)
    return share, Goal(name="floor_share", goal=goal, measured=measured, met=share >= FLOOR_SHARE_TARGET)


def _p99(corral: Phase | None, fixed: Phase | None) -> Goal:
    judged = fixed if fixed is not None else (corral if corral is not None and corral["mode"] == "open" else None)
    if judged is None or judged["placements"] == 0:
        return Goal(name="p99", goal="p99 submit-to-placed <= 100 ms at half rate", measured="not run", met=None)
    p99 = judged["latency_ms"]["p99"]
    where = "half the throughput" if judged is fixed else "the --rate given"
    return Goal(
        name="p99",
        goal=f"p99 submit-to-placed <= {P99_TARGET_MS:.0f} ms at {where} ({judged['rate_target']:,.0f}/s)",
        measured=f"{p99:.1f} ms" + (f" ({judged['errors']:,} errors)" if judged["errors"] else ""),
        met=p99 <= P99_TARGET_MS and judged["errors"] == 0,
    )


def _inside_cost(corral: Phase | None, tenants: Phase | None) -> Goal:
    goal = f"scheduling inside a virtual cluster costs <= {INSIDE_COST_TARGET:g}x the root"
    if corral is None or tenants is None or tenants["placements_per_s"] <= 0:
        return Goal(name="inside_cost", goal=goal, measured="not run", met=None)
    cost = round(corral["placements_per_s"] / tenants["placements_per_s"], 2)
    measured = (
        f"{corral['placements_per_s']:,.0f}/s at the root vs {tenants['placements_per_s']:,.0f}/s inside = x{cost}"
    )
    return Goal(name="inside_cost", goal=goal, measured=measured, met=cost <= INSIDE_COST_TARGET)


def goals(phases: dict[str, Phase]) -> tuple[float | None, list[Goal]]:
    """The floor share and the targets, judged on the phases that ran."""
    corral, floor, fixed = phases.get("corral"), phases.get("floor"), phases.get("fixed_rate")
    share, floor_goal = _floor_share(corral, floor)
    root = phases.get("tenants_root", corral)
    return share, [_throughput(corral), floor_goal, _p99(corral, fixed), _inside_cost(root, phases.get("tenants"))]


def _us_goal(name: str, measured: float | None, target: float, what: str) -> Goal:
    goal = f"{what} <= {target:g} us per request"
    if measured is None:
        return Goal(name=name, goal=goal, measured="not run", met=None)
    return Goal(name=name, goal=goal, measured=f"{measured:,.1f} us", met=measured <= target)


def cost_goals(phases: dict[str, Phase]) -> list[Goal]:
    """The CPU targets: the serial path, the whole mesh, p99 at half rate, inside virtual clusters vs the root."""
    corral, fixed, tenants = phases.get("corral"), phases.get("fixed_rate"), phases.get("tenants")
    p99_goal = f"p99 submit-to-placed <= {FAST_P99_TARGET_MS:g} ms at half rate"
    if fixed is None or fixed["placements"] == 0:
        p99 = Goal(name="fast_p99", goal=p99_goal, measured="not run", met=None)
    else:
        ms = fixed["latency_ms"]["p99"]
        p99 = Goal(
            name="fast_p99",
            goal=p99_goal,
            measured=f"{ms:.1f} ms",
            met=ms <= FAST_P99_TARGET_MS and fixed["errors"] == 0,
        )
    inside_goal = f"mesh CPU per placement inside virtual clusters <= x{INSIDE_CPU_TARGET:g} the root's"
    root = phases.get("tenants_root", corral)  # the root measured between the tenants' halves, when it was
    root_us = root["costs"]["mesh_us"] if root is not None else None
    inside_us = tenants["costs"]["mesh_us"] if tenants is not None else None
    if not root_us or inside_us is None:
        inside = Goal(name="inside_cpu", goal=inside_goal, measured="not run", met=None)
    else:
        ratio = round(inside_us / root_us, 2)
        both = f"{inside_us:,.0f} us inside vs {root_us:,.0f} us at the root = x{ratio}"
        inside = Goal(name="inside_cpu", goal=inside_goal, measured=both, met=ratio <= INSIDE_CPU_TARGET)
    costs = corral["costs"] if corral is not None else None
    return [
        _us_goal("serial_us", costs and costs["serial_request_us"], SERIAL_US_TARGET, "serial path (scheduler) CPU"),
        _us_goal(
            "mesh_us", costs and costs["mesh_request_us"], MESH_US_TARGET, "CPU of the mesh (services, nats, redis)"
        ),
        p99,
        inside,
    ]


def replicas_goal(share: float | None, baseline: float | None, replicas: int) -> Goal:
    """At `replicas` servers, Corral keeps at least the share of its one-replica rate the bus floor keeps of its own:
    corral_R/corral_1 >= floor_R/floor_1, that is the floor share at R at least the floor share at 1 (`baseline`)."""
    goal = f"at {replicas} replicas, Corral keeps at least the share of its 1-replica rate the bus floor keeps"
    if share is None or baseline is None:
        return Goal(name="replicas_share", goal=goal, measured="not run (needs --baseline)", met=None)
    measured = f"floor share {share:.0%} at {replicas} replicas vs {baseline:.0%} at 1"
    return Goal(name="replicas_share", goal=goal, measured=measured, met=share >= baseline)


def _ms(value: float) -> str:
    return f"{value:.1f}"


COLUMNS = ("Name", "# reqs", "placed", "pending", "ok", "fails", "p50", "p95", "p99", "max", "req/s")


def phase_table(phase: Phase) -> str:
    """Locust's summary, one row per request name plus the aggregate; latencies in ms."""
    rows = [
        [
            row["name"],
            f"{row['requests']:,}",
            f"{row['placed']:,}",
            f"{row['pending']:,}",
            f"{row['accepted']:,}",
            f"{row['errors']:,}",
            _ms(row["latency_ms"]["p50"]),
            _ms(row["latency_ms"]["p95"]),
            _ms(row["latency_ms"]["p99"]),
            _ms(row["latency_ms"]["max"]),
            f"{row['requests_per_s']:,.1f}",
        ]
        for row in phase["rows"]
    ]
    widths = [max(len(cells[i]) for cells in [list(COLUMNS), *rows]) for i in range(len(COLUMNS))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    rule = "-" * len(line(list(COLUMNS)))
    body = [line(cells) for cells in rows]
    return "\n".join([line(list(COLUMNS)), rule, *body[:-1], rule, body[-1]])


def _heading(phase: Phase) -> str:
    how = (
        f"{phase['users']} users, closed loop"
        if phase["mode"] == "closed"
        else f"open loop at {phase['rate_target']:,.0f} req/s"
    )
    if phase["batch"] > 1:
        how += f", batches of {phase['batch']} requests per message"
    return f"== {phase['name']}: {phase['description']} ({how}, {phase['seconds']:.1f} s measured)"


def _summary(phase: Phase) -> list[str]:
    lat = phase["latency_ms"]
    lines = [
        f"placements/s {phase['placements_per_s']:,.1f}   decisions/s {phase['decisions_per_s']:,.1f}   "
        f"requests/s {phase['requests_per_s']:,.1f}",
        f"placed {phase['placements']:,}   pending {phase['pending']:,}   errors {phase['errors']:,}   "
        f"removes {phase['removes']:,}",
        f"submit-to-placed ms: p50 {lat['p50']:.1f}  p95 {lat['p95']:.1f}  p99 {lat['p99']:.1f}  max {lat['max']:.1f}",
    ]
    if phase["mode"] == "open":
        lines.append(
            f"sender lag ms: p99 {phase['lag_p99_ms']:.1f}  max {phase['lag_max_ms']:.1f}   "
            f"dropped {phase['dropped']:,}   unfinished {phase['unfinished']:,}"
        )
    if phase["cpu"]:
        cpu = "  ".join(f"{name} {share:.3f}" for name, share in sorted(phase["cpu"].items(), key=lambda kv: -kv[1]))
        lines.append(f"cpu (cores): {cpu}")
        lines += cost_lines(phase["costs"])
    if phase["decider"] is not None:
        d = phase["decider"]
        lines.append(
            f"no-op decider: {d['batches']:,} batches, mean batch {d['mean_batch']:.1f}, "
            f"{d['mean_batch_ms']:.2f} ms per batch, busy {d['busy_share']:.0%}"
            + (
                f"; {d['request_batches']:,} of its messages were request batches ({d['requests']:,} requests)"
                if d["request_batches"]
                else ""
            )
        )
    if phase["first_error"]:
        lines.append(f"first error: {phase['first_error'][:300]}")
    return ["  " + line for line in lines]


def _tenant_lines(figures: TenantFigures) -> list[str]:
    sizes = "  ".join(
        f"{size} {f['admitted']}/{f['tenants']} p50 {f['p50_ms']:.1f} p99 {f['p99_ms']:.1f}"
        for size, f in figures["by_size"].items()
    )
    drained = figures["destroy_to_admission_ms"]
    lines = [
        f"== virtual clusters: {figures['admitted']}/{figures['tenants']} tenants admitted over the bus, "
        f"{figures['admissions_per_s']:,.1f} admissions/s",
        f"  create-to-decision ms by size: {sizes}",
        f"  queue: {figures['waiting']} clusters waited; {figures['queued_admitted']} admitted as tenants were "
        f"destroyed, destroy-to-admission ms p50 {drained['p50']:.1f} p99 {drained['p99']:.1f}",
    ]
    if figures["errors"]:
        lines.append(f"  errors {figures['errors']}; first: {figures['first_error'][:300]}")
    return lines


def autoscaler_goals(figures: AutoscalerFigures) -> list[Goal]:
    """The phase's checks, each met or not (a failed check is reported, never raised)."""
    peaks = ", ".join(f"{name} {figures['peak'][name]}/{most}" for name, most in figures["max_workers"].items())
    idle = figures["idle_with_demand"]
    scaled = figures["scale_down_s"]
    return [
        Goal(
            name="autoscaler_launches",
            goal="autoscaler: no launch failed",
            measured=f"{figures['launches_failed']} of {figures['launched']} failed",
            met=figures["launches_failed"] == 0,
        ),
        Goal(
            name="autoscaler_used",
            goal="autoscaler: no launched node left without work while work it was launched for waited",
            measured=f"{figures['with_work']} of {figures['registered']} registered nodes got work"
            + (f"; left idle: {', '.join(idle)}" if idle else ""),
            met=not idle,
        ),
        Goal(
            name="autoscaler_max_workers",
            goal="autoscaler: max_workers never exceeded",
            measured=f"peak {peaks}",
            met=all(figures["peak"][name] <= most for name, most in figures["max_workers"].items()),
        ),
        Goal(
            name="autoscaler_settled",
            goal="autoscaler: every actor placed or removed",
            measured=f"{figures['still_pending']:,} of {figures['actors']:,} still pending after the users stopped",
            met=figures["still_pending"] == 0,
        ),
        Goal(
            name="autoscaler_scale_down",
            goal="autoscaler: idle launched nodes scaled down",
            measured=f"{figures['final_launched']} launched nodes left"
            + (f" after {scaled:.1f} s" if scaled is not None else ""),
            met=figures["final_launched"] == 0,
        ),
    ]


def _autoscaler_lines(figures: AutoscalerFigures) -> list[str]:
    """The phase's figures as text."""
    types = ", ".join(f"{name} (max {most})" for name, most in figures["max_workers"].items())
    launch, placed = figures["pending_to_launch_ms"], figures["pending_to_placed_ms"]
    scaled = figures["scale_down_s"]
    gone = f"gone {scaled:.1f} s after the last actor was removed" if scaled is not None else "not all gone in time"
    return [
        f"== autoscaled nodes: {types} launched for the users' work ({figures['existing_nodes']} plain nodes exist)",
        f"  growth: {figures['launched']} nodes launched, {figures['registered']} registered, "
        f"{figures['with_work']} got work, {figures['launches_failed']} launches failed; "
        f"{figures['placements_per_s']:,.1f} placements/s over {figures['growth_s']:.1f} s of growth",
        f"  pending -> launch request ms: p50 {launch['p50']:.1f} p99 {launch['p99']:.1f} ({launch['actors']:,} "
        f"actors); pending -> placed ms: p50 {placed['p50']:.1f} p99 {placed['p99']:.1f} ({placed['actors']:,} actors)",
        f"  scale-down (idle timeout {IDLE_TIMEOUT_S:g} s): launched nodes {gone}; "
        f"{figures['final_nodes']} nodes left ({figures['final_launched']} launched)",
    ]


def _verdict(met: bool | None) -> str:
    return "not measured" if met is None else ("met" if met else "not met")


def format_report(report: Report) -> str:
    """The whole report as text: a table per phase, then the targets."""
    parts = [
        f"corral load test: {report['nodes']:,} nodes (registered in {report['registration_s']:.1f} s), "
        f"{report['users']} users on {report['connections']} connections, each holding at most {report['hold']} actors",
        f"mesh: {'embedded' if report['embedded_mesh'] else 'external'} at {report['nats_url']}, "
        f"{report['replicas']} replica(s)" + (f", the core's {report['core']} build" if report["core"] else ""),
    ]
    for phase in report["phases"].values():
        parts += ["", _heading(phase), phase_table(phase), *_summary(phase)]
    if report["tenants"] is not None:
        parts += ["", *_tenant_lines(report["tenants"])]
    if report["autoscaler"] is not None:
        parts += ["", *_autoscaler_lines(report["autoscaler"])]
    parts += ["", "targets:"]
    width = max(len(_verdict(goal["met"])) for goal in report["targets"])
    for goal in report["targets"]:
        parts.append(f"  {_verdict(goal['met']).ljust(width)}  {goal['goal']}: {goal['measured']}")
    return "\n".join(parts)


def to_json(report: Report) -> str:
    """The report as one JSON object."""
    return json.dumps(report, sort_keys=False)
