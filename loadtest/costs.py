"""What a durable placement costs each process of the mesh in CPU, the serial path's share and the rate it allows.

Every request crosses one process whose work is not spread over cores: the leading scheduler (its applier when
decision workers run). Its CPU microseconds per placement bound what any machine can place per second
(`1e6 / serial_us`), however many cores the rest gets; the other processes' microseconds are what this machine
spends besides. The load generators' own CPU is shown apart and counted in neither.
"""

from __future__ import annotations

from typing import TypedDict

SERIAL = "scheduler"
"""The process every request crosses (the applier, inside it, when decision workers run)."""
LOAD = ("loadtest", "floor-generator")
"""Processes of the load generator (name prefixes): not the mesh's."""


class Costs(TypedDict):
    """CPU microseconds per durable placement of one phase, by process; the serial path and its projection."""

    per_placement_us: dict[str, float]
    per_request_us: dict[str, float]
    """The same per request sent (placements, pendings, removes)."""
    serial_us: float | None
    """The serial path's microseconds per placement (None: no scheduler measured, as in the bus floor)."""
    serial_request_us: float | None
    """The same per request (a submit or a removal): the unit the targets are set in."""
    mesh_us: float | None
    """Every process but the load generator together: Corral's services, nats-server(s), redis-server."""
    mesh_request_us: float | None
    """The same per request."""
    projection_per_s: float | None
    """Placements/s the serial path allows on a machine whose other processes have cores of their own."""
    serial_per_load: float | None
    """The serial path's CPU per request over the load generator's own: the generator does the same work per
    request in every run of one mode, and on this shared machine both move together with how busy it is (70 runs on
    2026-12-07 at batches of 20: a serial path of 27 to 67 us, this ratio x2.04 to x2.21), so it compares code across
    busy and quiet minutes where the microseconds cannot (docs/throughput.md)."""


def is_load(name: str) -> bool:
    """Whether process `name` is the load generator's."""
    return name.startswith(LOAD)


def costs_of(cpu: dict[str, float], placements_per_s: float, requests_per_s: float, *, serial: bool = True) -> Costs:
    """Costs from each process's share of a core over a phase and the phase's rates (nothing when nothing was
    placed); no serial path unless `serial` (the bus floor's requests never cross the scheduler)."""
    if placements_per_s <= 0 or not cpu:
        return Costs(
            per_placement_us={},
            per_request_us={},
            serial_us=None,
            serial_request_us=None,
            mesh_us=None,
            mesh_request_us=None,
            projection_per_s=None,
            serial_per_load=None,
        )
    per_placement = {name: round(share * 1e6 / placements_per_s, 1) for name, share in cpu.items()}
    per_request = {name: round(share * 1e6 / requests_per_s, 1) for name, share in cpu.items()}
    serial_us = per_placement.get(SERIAL) if serial else None
    return Costs(
        per_placement_us=per_placement,
        per_request_us=per_request,
        serial_us=serial_us,
        serial_request_us=per_request.get(SERIAL) if serial else None,
        mesh_us=_mesh(per_placement),
        mesh_request_us=_mesh(per_request),
        projection_per_s=round(1e6 / serial_us) if serial_us else None,
        serial_per_load=_per_load(per_request.get(SERIAL) if serial else None, per_request),
    )


def _per_load(serial_us: float | None, per_request: dict[str, float]) -> float | None:
    """`serial_us` over the load generator's CPU per request (None without either)."""
    load = sum(us for name, us in per_request.items() if is_load(name))
    return round(serial_us / load, 2) if serial_us and load > 0 else None


def _mesh(by_process: dict[str, float]) -> float | None:
    """The sum over every process but the load generator's (None when there is none)."""
    parts = [us for name, us in by_process.items() if not is_load(name)]
    return round(sum(parts), 1) if parts else None


def cost_lines(costs: Costs) -> list[str]:
    """The costs as text: the serial path and projection, the mesh's total, then each process (most first)."""
    if not costs["per_placement_us"]:
        return []
    head = []
    if costs["serial_us"] is not None:
        head.append(
            f"serial path ({SERIAL}) {costs['serial_us']:,.0f} us/placement ({costs['serial_request_us'] or 0:,.0f})"
        )
        head.append(f"projection {costs['projection_per_s'] or 0:,.0f} placements/s")
        if costs["serial_per_load"] is not None:
            head.append(f"x{costs['serial_per_load']:.2f} the load generator's")
    if costs["mesh_us"] is not None:
        head.append(f"mesh {costs['mesh_us']:,.0f} us/placement ({costs['mesh_request_us'] or 0:,.0f})")
    ranked = sorted(costs["per_placement_us"].items(), key=lambda kv: -kv[1])
    each = "  ".join(f"{name} {us:,.0f} ({costs['per_request_us'][name]:,.0f})" for name, us in ranked)
    return ["   ".join(head), f"cpu us per placement (per request): {each}"]
