"""The start-up replay benchmark's report as text: the figures as a table, then the requirements."""

from __future__ import annotations

from loadtest.replay.figures import ReplayReport, Start


def _verdict(met: bool) -> str:
    return "met" if met else "not met"


def _row(name: str, seconds: float, rate: str, cpu_s: float, note: str = "") -> str:
    return f"  {name:<32}{seconds:>9.2f} s{rate:>14}{cpu_s:>9.2f} s  {note}".rstrip()


def _logged(start: Start) -> str:
    if not (start["log_warnings"] or start["log_errors"]):
        return ""
    return f"; logged {start['log_warnings']:,} warnings, {start['log_errors']:,} errors"


def format_report(report: ReplayReport) -> str:
    """The figures as a table, then the requirements."""
    full, restart, snapshot = report["full_replay"], report["restart"], report["snapshot"]
    types = ", ".join(f"{name} {count:,}" for name, count in report["event_types"].items())
    rates = {name: report[name] for name in ("append", "read_only", "decode", "fold_only")}
    per_s = {name: f"{rate['events_per_s']:,.0f}/s" for name, rate in rates.items()}
    load = report["load_average_1m"]
    lines = [
        f"corral start-up replay: {report['events']:,} events ({report['log_bytes'] / 1e6:,.1f} MB of JSON), "
        f"{report['nodes']:,} nodes, {report['live_actors']:,} live actors at the end",
        f"  events (written by the core in {report['generate_s']:.1f} s): {types}",
        f"  machine: {report['cores']} cores, 1-minute load average {load[0]:.2f} at the start, "
        f"{load[1]:.2f} at the end",
        "",
        f"  {'phase':<32}{'wall':>11}{'events/s':>14}{'cpu':>11}",
        _row("append (Bus.append, pipelined)", rates["append"]["seconds"], per_s["append"], rates["append"]["cpu_s"]),
        _row(
            "cold start, no snapshot",
            full["ready_s"],
            f"{full['replayed_per_s']:,.0f}/s",
            full["cpu_s"],
            f"{full['replayed']:,} events; answered a query at {full['served_s']:.2f} s{_logged(full)}",
        ),
        _row(
            "log read only (Bus.read_log)",
            rates["read_only"]["seconds"],
            per_s["read_only"],
            rates["read_only"]["cpu_s"],
            f"{report['read_only']['missing']:,} sequences never arrived" if report["read_only"]["missing"] else "",
        ),
        _row("decode only (codec.decode)", rates["decode"]["seconds"], per_s["decode"], rates["decode"]["cpu_s"]),
        _row(
            "fold only (SchedulerView.fold)",
            rates["fold_only"]["seconds"],
            per_s["fold_only"],
            rates["fold_only"]["cpu_s"],
        ),
        _row(
            "cold start from the snapshot",
            restart["ready_s"],
            f"{restart['replayed_per_s']:,.0f}/s",
            restart["cpu_s"],
            f"{restart['replayed']:,} events of tail; answered a query at {restart['served_s']:.2f} s"
            + _logged(restart),
        ),
        "",
        f"  snapshot at sequence {snapshot['sequence']:,}: {snapshot['bytes'] / 1e6:,.2f} MB; "
        f"dump {snapshot['dump_s']:.3f} s, save {snapshot['save_s']:.3f} s, load {snapshot['load_s']:.3f} s, "
        f"decode and restore {snapshot['restore_s']:.3f} s",
        f"  a fresh interpreter importing the scheduler: {report['import_s']:.2f} s "
        f"(restart with the process start: {report['restart_with_process_start_s']:.2f} s)",
        f"  digests of the full replay, the restart and the fold "
        f"{'are equal' if report['digests_equal'] else 'DIFFER'}: "
        f"{full['digest']} {restart['digest']} {report['fold_digest']}",
        "",
        "requirements:",
    ]
    width = max(len(_verdict(goal["met"])) for goal in report["targets"])
    lines += [f"  {_verdict(g['met']).ljust(width)}  {g['goal']}: {g['measured']}" for g in report["targets"]]
    return "\n".join(lines)
