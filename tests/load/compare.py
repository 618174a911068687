#!/usr/bin/env python3
"""compare.py — several run-load results side by side, one column per wire form, medians.

    tests/load/compare.py [--mode kube-fanout] DIR_OR_RESULTS_JSON...

Groups the runs by their wire form (scenario "wire" and "http2") and prints, per form, the
median (min–max) over its runs of: agents and watch streams, connections the agents held (and
per agent), bytes per event on the watch streams, kube-fanout's CPU per event the agents
received (its CPU over the whole mode, ramp and initial lists included) and its peak RSS, the
apiserver's requests, p99 write → event latency of pods, and completeness. A markdown table on
stdout (docs/load.md).
"""
import argparse
import json
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import report  # noqa: E402


def load(paths):
    runs = []
    for p in paths:
        p = pathlib.Path(p)
        runs.append(json.loads((p / "results.json" if p.is_dir() else p).read_text()))
    return runs


def form(results):
    s = results["scenario"]
    return f"{s.get('wire', 'json')}, {'HTTP/2' if s.get('http2') else 'HTTP/1.1'}"


def med(values, fmt):
    vals = [v for v in values if v is not None]
    if not vals:
        return "—"
    m = statistics.median(vals)
    if min(vals) == max(vals):
        return fmt(m)
    return f"{fmt(m)} ({fmt(min(vals))}–{fmt(max(vals))})"


def metrics(mode):
    """The figures of one mode of one run."""
    g = report.get
    agents = report._agents(mode)[0]
    events = g(mode, "kf_load", "watch", "events")
    wbytes = g(mode, "kf_load", "watch", "bytes")
    conns = g(mode, "kf_load", "connections", "peak_open")
    kf_cpu = g(mode, "processes", "kube-fanout", "cpu_s")
    c = g(mode, "kf_load", "completeness", default={}) or {}
    return {
        "agents": agents, "streams": report.watch_streams(mode), "connections": conns,
        "conns_per_agent": conns / agents if conns and agents else None,
        "bytes_per_event": wbytes / events if wbytes and events else None,
        "kf_cpu_us_per_event": kf_cpu * 1e6 / events if kf_cpu and events else None,
        "kf_peak_rss": g(mode, "processes", "kube-fanout", "peak_rss_mib"),
        "upstream": report.upstream(mode),
        "pods_p99_ms": (g(mode, "kf_load", "latency_us", "pods", "p99") or 0) / 1000 or None,
        "complete": f"{c.get('complete', 0):,} / {c.get('checked', 0):,}",
        "missing": c.get("missing_events", 0) + c.get("out_of_order", 0) + c.get("duplicates", 0),
        "relists": c.get("relisted_after_410", 0),
    }


ROWS = [
    ("agents / watch streams", None),
    ("connections the agents held (peak)", ("connections", lambda v: f"{v:,.0f}")),
    ("  per agent", ("conns_per_agent", lambda v: f"{v:.2f}")),
    ("bytes per event on the watch streams", ("bytes_per_event", lambda v: f"{v:,.0f}")),
    ("kube-fanout CPU per event received (whole mode)", ("kf_cpu_us_per_event",
                                                         lambda v: f"{v:.1f} µs")),
    ("kube-fanout peak RSS", ("kf_peak_rss", lambda v: f"{v:.0f} MiB")),
    ("apiserver requests (resources, all verbs)", ("upstream", lambda v: f"{v:,.0f}")),
    ("pods p99 write → event", ("pods_p99_ms", lambda v: f"{v:.1f} ms")),
]


def table(runs, mode_label):
    groups = {}
    for r in runs:
        mode = r.get("modes", {}).get(mode_label)
        if mode and mode.get("kf_load"):
            groups.setdefault(form(r), []).append(metrics(mode))
    forms = list(groups)
    head = [f"{mode_label}, median (min–max)"] + [f"{f} ({len(groups[f])} runs)" for f in forms]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, spec in ROWS:
        if spec is None:
            cells = [" / ".join(sorted({f"{m['agents']:,} / {m['streams']:,}" for m in groups[f]}))
                     for f in forms]
        else:
            key, fmt = spec
            cells = [med([m[key] for m in groups[f]], fmt) for f in forms]
        lines.append("| " + " | ".join([label] + cells) + " |")
    lines.append("| " + " | ".join(
        ["complete streams; missing + out of order + duplicate events; relists"] +
        ["; ".join(f"{m['complete']}, {m['missing']}, {m['relists']}" for m in groups[f])
         for f in forms]) + " |")
    return "\n".join(lines)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", default="kube-fanout", help="the mode compared (default kube-fanout)")
    p.add_argument("results", nargs="+", help="run-load output directories or results.json")
    args = p.parse_args(argv)
    print(table(load(args.results), args.mode))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
