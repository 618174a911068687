#!/usr/bin/env python3
"""The load report: ratios, the summary table (terminal and HTML) and report.html, all from
results.json (CONTRACT.md: {"scenario": {...}, "modes": {label: {...}}, "ratios": {...}}).

Pure functions of the results, so they are tested without a cluster (test_report.py).
Usage on its own: tests/load/report.py DIR/results.json   (rewrites DIR/report.html, prints the
table)."""
import datetime
import html
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import harness  # noqa: E402
import svg  # noqa: E402

COLORS = {"direct": "#d62728", "kube-fanout": "#1f77b4"}
PALETTE = ["#2ca02c", "#9467bd", "#8c564b", "#ff7f0e"]
READ_VERBS = ("LIST", "WATCH", "GET")
WRITE_VERBS = {"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY", "CREATE", "UPDATE"}
# Reviews kube-fanout POSTs to authenticate and authorize the clients it serves from the cache.
AUTH_RESOURCES = {"tokenreviews", "subjectaccessreviews", "selfsubjectaccessreviews",
                  "localsubjectaccessreviews", "selfsubjectrulesreviews", "selfsubjectreviews"}
# kube-fanout's own default set (proxy/sync/cached_resources.cc), for an empty --cache-resources.
DEFAULT_CACHED = ["pods", "nodes", "services", "namespaces", "configmaps", "endpointslices",
                  "events", "csidrivers", "runtimeclasses", "servicecidrs"]
LATENCY_ORDER = ["pods", "nodes", "endpointslices", "services", "configmaps"]


def get(d, *path, default=None):
    """d[path[0]][path[1]]..., default when any step is missing or None."""
    for p in path:
        if not isinstance(d, dict) or d.get(p) is None:
            return default
        d = d[p]
    return d


def color(label, labels):
    if label in COLORS:
        return COLORS[label]
    others = [x for x in labels if x not in COLORS]
    return PALETTE[others.index(label) % len(PALETTE)] if label in others else "#444"


def cached_resources(results):
    """Plain resource names of --cache-resources (endpointslices.discovery.k8s.io/v1 ->
    endpointslices)."""
    spec = get(results, "scenario", "cache_resources")
    if not spec:
        return list(DEFAULT_CACHED)
    items = spec.split(",") if isinstance(spec, str) else spec
    return [x.strip().split(".")[0] for x in items if x.strip()]


# --- numbers per mode ------------------------------------------------------------------------

def split_key(key):
    """'LIST pods' -> ('LIST', 'pods'); 'PATCH pods/status' -> ('PATCH', 'pods');
    'GET (non-resource)' -> ('GET', None)."""
    verb, _, res = key.partition(" ")
    return verb, (None if res.startswith("(") else res.split("/")[0])


def upstream(mode, verbs=None, resources=None, writes=False, auth=False):
    """Sum of apiserver_request_total deltas of resource requests, filtered by verb (a set),
    resource (a set), write verbs (writes: not the auth reviews) or the auth reviews; None when
    the mode has no request counts."""
    reqs = mode.get("apiserver_requests")
    if reqs is None:
        return None
    total = 0
    for key, n in reqs.items():
        verb, res = split_key(key)
        if res is None or (verbs and verb not in verbs) or (resources and res not in resources):
            continue
        if (writes and (verb not in WRITE_VERBS or res in AUTH_RESOURCES)) or (
                auth and res not in AUTH_RESOURCES):
            continue
        total += n
    return total


def by_verb(mode):
    """{'LIST': n, 'WATCH': n, 'GET': n, 'writes': n, 'auth': n, 'other': n} over resource
    requests (auth: the TokenReviews and SubjectAccessReviews of AUTH_RESOURCES)."""
    out = dict.fromkeys(list(READ_VERBS) + ["writes", "auth", "other"], 0)
    for key, n in (mode.get("apiserver_requests") or {}).items():
        verb, res = split_key(key)
        if res is None:
            continue
        out["auth" if res in AUTH_RESOURCES else verb if verb in READ_VERBS
            else "writes" if verb in WRITE_VERBS else "other"] += n
    return out


def proc(mode, name, field):
    return get(mode, "processes", name, field)


def watch_streams(mode):
    return get(mode, "kf_load", "completeness", "watch_streams")


def memory_per_stream_kib(label, mode):
    """RSS growth of whoever serves the watches (kube-apiserver when direct, kube-fanout
    otherwise) per watch stream, in KiB."""
    server = "kube-apiserver" if label == "direct" else "kube-fanout"
    growth, streams = proc(mode, server, "rss_growth_mib"), watch_streams(mode)
    if growth is None or not streams:
        return None
    return growth * 1024 / streams


def latency(mode, resource, q):
    return get(mode, "kf_load", "latency_us", resource, q)


def ratio(a, b):
    """a / b, None when either is missing or b is 0."""
    if a is None or b is None or b == 0:
        return None
    return round(a / b, 3)


def compute_ratios(results):
    """direct / kube-fanout for the numbers the contract names; {} unless both modes ran."""
    modes = results.get("modes", {})
    d, k = modes.get("direct"), modes.get("kube-fanout")
    if not d or not k:
        return {}
    cached = set(cached_resources(results))
    resources = sorted(set(get(d, "kf_load", "latency_us", default={}))
                       | set(get(k, "kf_load", "latency_us", default={})))
    return {
        "upstream_requests": ratio(upstream(d), upstream(k)),
        "upstream_cached_reads": ratio(upstream(d, set(READ_VERBS), cached),
                                       upstream(k, set(READ_VERBS), cached)),
        "apiserver_watchers_peak": ratio(get(d, "apiserver_watchers_peak_total"),
                                         get(k, "apiserver_watchers_peak_total")),
        "apiserver_cpu_s": ratio(proc(d, "kube-apiserver", "cpu_s"),
                                 proc(k, "kube-apiserver", "cpu_s")),
        "apiserver_peak_rss_mib": ratio(proc(d, "kube-apiserver", "peak_rss_mib"),
                                        proc(k, "kube-apiserver", "peak_rss_mib")),
        "etcd_cpu_s": ratio(proc(d, "etcd", "cpu_s"), proc(k, "etcd", "cpu_s")),
        "p99_latency": {r: ratio(latency(d, r, "p99"), latency(k, r, "p99")) for r in resources},
        "memory_per_watcher": ratio(memory_per_stream_kib("direct", d),
                                    memory_per_stream_kib("kube-fanout", k)),
    }


# --- the summary table -----------------------------------------------------------------------

def fmt_int(v):
    return "—" if v is None else f"{int(round(v)):,}"


def fmt_num(v, digits=1):
    return "—" if v is None else f"{v:,.{digits}f}"


def fmt_ms(us):
    if us is None:
        return "—"
    ms = us / 1000
    return f"{ms:.3g}" if ms < 100 else f"{ms:,.0f}"


def fmt_ratio(a, b):
    if a is None or b is None:
        return ""
    if b == 0:
        return "∞" if a > 0 else "—"
    r = a / b
    return f"{r:.3g}×" if r < 1000 else f"{r:,.0f}×"


def _agents(mode):
    c = get(mode, "kf_load", "config", default={})
    if not c:
        return None, "—"
    parts = [c.get("kubelets", 0), c.get("kube_proxies", 0), c.get("pollers", 0)]
    return sum(parts), f"{sum(parts):,} ({' / '.join(f'{p:,}' for p in parts)})"


def _hollow_ready(mode):
    h = get(mode, "hollow")
    if not h:
        return "—"
    return (f"{h.get('ready', 0)} of {h.get('nodes', 0)} / "
            f"{h.get('pods_running', 0)} of {h.get('pods', 0)}")


def _hollow_connections(mode):
    h = get(mode, "hollow")
    if not h:
        return "—"
    return " / ".join("{} ({})".format(fmt_num(get(h, f"{k}_connections", "mean")),
                                       fmt_int(get(h, f"{k}_connections", "max")))
                      for k in ("kubelet", "proxy"))


def _hollow_start_rows(row):
    """Bound→Running of the hollow nodes' pods (pod_start.py) and their kubelets' log errors."""
    for key, unit in (("kubelet_ms", "ms, kubelet"), ("watch_ms", "ms, harness watch")):
        row(f"hollow pods bound→Running p50 / p90 / max ({unit})", lambda lb, m, k=key: (
            get(m, "hollow", "pod_start", k, "p50"), " / ".join(
                fmt_num(get(m, "hollow", "pod_start", k, q), 0) for q in ("p50", "p90", "max"))),
            True)
    keys = ("configmap_sync", "secret_sync", "mount_failed", "status_get", "status_update",
            "node_status", "sync_pod")
    row("hollow kubelet log: configmap / secret sync, mount, status get / update, node, sync pod",
        lambda lb, m: (None, " / ".join(fmt_int(get(m, "hollow", "kubelet_log_errors", k))
                                        for k in keys)))


def _client_go_server(label):
    return "kube-apiserver" if label == "direct" else "kube-fanout"


def _client_go_rows(row, modes):
    """The client-go fleet's rows (client_go.py): sync, failures, connect cost, latency."""
    g = lambda m, *path: get(m, "client_go", *path)  # noqa: E731
    row("client-go agents: synced / started (sync ms p50 / p99)", lambda lb, m: (
        g(m, "synced"), "{} / {} ({} / {})".format(
            fmt_int(g(m, "synced")), fmt_int(g(m, "started")),
            fmt_num(g(m, "sync_ms", "p50"), 0), fmt_num(g(m, "sync_ms", "p99"), 0))))
    def failures(m):
        f = g(m, "failures") or {}
        total = g(m, "failed_requests")
        other = None if total is None else total - f.get("handshake", 0) - f.get("eof_reset", 0)
        return total, " / ".join(fmt_int(None if total is None else v) for v in (
            f.get("handshake", 0), f.get("eof_reset", 0), other))

    def total(m, key):
        return None if not g(m) else sum((g(m, key) or {}).values())

    row("client-go requests without answer: handshake / EOF-reset / other",
        lambda lb, m: failures(m))
    row("client-go 429s / LISTs (WatchList fell back) / watch errors", lambda lb, m: (
        None, " / ".join(fmt_int(v) for v in (g(m, "status_429"), total(m, "list_fallbacks"),
                                              total(m, "watch_errors")))))
    row("client-go connect: server CPU ms / RSS KiB per agent", lambda lb, m: (
        g(m, "connect_cost", _client_go_server(lb), "cpu_ms_per_agent"), "{} / {}".format(
            fmt_num(g(m, "connect_cost", _client_go_server(lb), "cpu_ms_per_agent"), 2),
            fmt_num(g(m, "connect_cost", _client_go_server(lb), "rss_kib_per_agent"), 1))),
        True)
    row("client-go events received", lambda lb, m: (None, fmt_int(total(m, "events"))))
    kinds = sorted({k for m in modes.values() for k in (g(m, "latency_ms") or {})})
    for kind in kinds:
        row(f"client-go {kind} latency ms p50 / p99 / max", lambda lb, m, k=kind: (
            g(m, "latency_ms", k, "p99"), " / ".join(
                fmt_num(g(m, "latency_ms", k, q), 1) for q in ("p50", "p99", "max"))), True)


def summary_rows(results):
    """[(label, [cell per mode], ratio cell)]: the terminal table and the HTML table. The ratio
    cell (direct / kube-fanout) is filled only when both modes ran and the row has one."""
    modes = results.get("modes", {})
    labels = list(modes)
    both = "direct" in modes and "kube-fanout" in modes
    cached = set(cached_resources(results))
    rows = []

    def row(label, fn, with_ratio=False):
        """fn(label, mode) -> (number or None, text)."""
        cells = [fn(lb, modes[lb]) for lb in labels]
        r = ""
        if with_ratio and both:
            r = fmt_ratio(fn("direct", modes["direct"])[0],
                          fn("kube-fanout", modes["kube-fanout"])[0])
        rows.append((label, [c[1] for c in cells], r))

    def number(getter, fmt=fmt_int):
        def fn(lb, m):
            v = getter(lb, m)
            return v, fmt(v)
        return fn

    row("agents (kubelets / kube-proxies / pollers)", lambda lb, m: _agents(m))
    row("watch streams", number(lambda lb, m: watch_streams(m)))
    if any(get(m, "hollow") for m in modes.values()):
        row("hollow nodes: Ready / pods Running (of)", lambda lb, m: (None, _hollow_ready(m)))
        row("hollow node connections: kubelet / kube-proxy (mean, max)",
            lambda lb, m: (None, _hollow_connections(m)))
        row("hollow node RSS MiB: kubelet / kube-proxy (mean)", lambda lb, m: (None, " / ".join(
            fmt_num(get(m, "hollow", f"{k}_rss_mib_mean")) for k in ("kubelet", "proxy"))))
        _hollow_start_rows(row)
    if any(get(m, "client_go") for m in modes.values()):
        _client_go_rows(row, modes)
    row("connections: peak open / failed", lambda lb, m: (None, "{} / {}".format(
        fmt_int(get(m, "kf_load", "connections", "peak_open")),
        fmt_int(get(m, "kf_load", "connections", "failed")))))
    row("upstream requests (resources, all verbs)", number(lambda lb, m: upstream(m)), True)
    row("  LIST+WATCH+GET of cached resources",
        number(lambda lb, m: upstream(m, set(READ_VERBS), cached)), True)
    for verb in READ_VERBS:
        row(f"    {verb}", number(lambda lb, m, v=verb: upstream(m, {v}, cached)), True)
    row("  writes (churn)", number(lambda lb, m: upstream(m, writes=True)))
    row("  auth reviews (kube-fanout checking its clients)",
        number(lambda lb, m: upstream(m, auth=True)))
    row("apiserver watches: peak (at start)", lambda lb, m: (
        get(m, "apiserver_watchers_peak_total"),
        "{} ({})".format(fmt_int(get(m, "apiserver_watchers_peak_total")),
                         fmt_int(sum(get(m, "apiserver_watchers_baseline", default={}).values())
                                 if get(m, "apiserver_watchers_baseline") is not None else None))),
        True)
    for name, short in (("kube-apiserver", "apiserver"), ("etcd", "etcd"),
                        ("kube-fanout", "kube-fanout")):
        if not any(get(m, "processes", name) for m in modes.values()):
            continue
        row(f"{short} CPU s", number(lambda lb, m, n=name: proc(m, n, "cpu_s"), fmt_num),
            name != "kube-fanout")
        row(f"{short} RSS MiB: peak (growth)", lambda lb, m, n=name: (
            proc(m, n, "peak_rss_mib"), "—" if proc(m, n, "peak_rss_mib") is None else
            f"{proc(m, n, 'peak_rss_mib'):,.0f} (+{proc(m, n, 'rss_growth_mib'):,.0f})"),
            name == "kube-apiserver")
    row("memory per watch stream KiB (server RSS growth)",
        number(memory_per_stream_kib, lambda v: fmt_num(v, 2)), True)
    resources = sorted({r for m in modes.values() for r in get(m, "kf_load", "latency_us",
                                                                 default={})},
                       key=lambda r: (LATENCY_ORDER.index(r) if r in LATENCY_ORDER else 99, r))
    for res in resources:
        row(f"{res} latency ms p50 / p90 / p99 / max", lambda lb, m, r=res: (
            latency(m, r, "p99"),
            "—" if get(m, "kf_load", "latency_us", r) is None else
            " / ".join(fmt_ms(latency(m, r, q)) for q in ("p50", "p90", "p99", "max"))), True)
    if resources:
        row("events timed (" + " / ".join(resources) + ")", lambda lb, m: (None, " / ".join(
            fmt_int(latency(m, r, "count")) for r in resources)))
    # kube-fanout's own part: an event's arrival from the upstream to its write, per write.
    own = {}
    for lb in labels:
        buckets = harness.watch_delay_buckets(
            get(modes[lb], "kube_fanout", "counters_delta", default={}) or {})
        qs = [harness.histogram_quantile(q, buckets) for q in (0.5, 0.9, 0.99)]
        own[lb] = "—" if qs[0] is None else " / ".join(fmt_ms(v * 1e6) for v in qs)
    if any(text != "—" for text in own.values()):
        row("  kube-fanout's part (arrival from the upstream → write) ms p50 / p90 / p99",
            lambda lb, m: (None, own[lb]))
    # --reference-watch: the apiserver's own delivery to one watcher of its own, same run.
    ref = lambda m, r, q: get(m, "kf_load", "reference", "latency_us", r, q)  # noqa: E731
    for res in [r for r in resources
                if any(ref(m, r, "count") is not None for m in modes.values())]:
        row(f"  one watcher straight at the apiserver: {res} ms p50 / p90 / p99 / max",
            lambda lb, m, r=res: (None, "—" if ref(m, r, "count") is None else " / ".join(
                fmt_ms(ref(m, r, q)) for q in ("p50", "p90", "p99", "max"))))
    c = lambda m, f: get(m, "kf_load", "completeness", f)  # noqa: E731
    row("churn writes made (late slots skipped)", lambda lb, m: (None, "{}{}".format(
        fmt_int(sum(get(m, "kf_load", "churn", "writes", default={}).values())
                if get(m, "kf_load", "churn", "writes") else None),
        "" if get(m, "kf_load", "churn", "late") is None
        else f" ({fmt_int(get(m, 'kf_load', 'churn', 'late'))})")))
    row("events received by the agents", number(
        lambda lb, m: get(m, "kf_load", "watch", "events",
                          default=(get(m, "kf_load", "timeline", default=[{}]) or [{}])[-1]
                          .get("events"))))
    row("server CPU per event received, µs (churn and drain)",
        lambda lb, m: (None, fmt_num(harness.cpu_per_event_us(m))))
    row("complete / checked watch streams", lambda lb, m: (
        None, f"{fmt_int(c(m, 'complete'))} / {fmt_int(c(m, 'checked'))}"
              + (f" ({fmt_int(c(m, 'never_listed'))} never listed)"
                 if c(m, "never_listed") else "")))
    row("relists after 410", number(lambda lb, m: c(m, "relisted_after_410")))
    row("missing events (out of order / duplicates)", lambda lb, m: (
        c(m, "missing_events"), "{} ({} / {})".format(
            fmt_int(c(m, "missing_events")), fmt_int(c(m, "out_of_order")),
            fmt_int(c(m, "duplicates")))))
    row("errors: requests / connections / churn", lambda lb, m: (None, " / ".join(
        fmt_int(get(m, "kf_load", *path)) for path in (
            ("requests", "errors"), ("connections", "failed"), ("churn", "failed")))))
    if any(m.get("error") for m in modes.values()):
        row("run problem", lambda lb, m: (None, m.get("error") or ""))
    return rows


def render_table(results):
    """The summary as a fixed-width text table."""
    labels = list(results.get("modes", {}))
    both = "direct" in labels and "kube-fanout" in labels
    head = ["", *labels] + (["direct/kube-fanout"] if both else [])
    body = [[label, *cells] + ([r] if both else []) for label, cells, r in summary_rows(results)]
    widths = [max(len(str(r[i])) for r in [head] + body) for i in range(len(head))]
    lines = []
    for n, r in enumerate([head] + body):
        lines.append("  ".join(str(v).ljust(widths[0]) if i == 0 else str(v).rjust(widths[i])
                               for i, v in enumerate(r)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


# --- report.html -----------------------------------------------------------------------------

def _offset(mode):
    """Seconds to add to a sample's t (from sample_t0_unix) to get seconds since ramp start."""
    t0, start = mode.get("sample_t0_unix"), get(mode, "kf_load", "started_unix")
    return (t0 - start) if t0 is not None and start is not None else 0.0


def _phase_markers(chart, label, mode, col):
    ph = get(mode, "kf_load", "phases", default={})
    if ph.get("ramp_s") is not None:
        chart.vline(0, col, f"{label}: ramp start")
        chart.vline(ph["ramp_s"], col, f"{label}: churn start")
        if ph.get("churn_s") is not None:
            chart.vline(ph["ramp_s"] + ph["churn_s"], col, f"{label}: churn end")
    return chart


def charts(results):
    """[(section title, [svg, ...])]."""
    modes = results.get("modes", {})
    labels = list(modes)
    out = []

    lat = []
    resources = sorted({r for m in modes.values() for r in get(m, "kf_load", "latency_us",
                                                                 default={})},
                       key=lambda r: (LATENCY_ORDER.index(r) if r in LATENCY_ORDER else 99, r))
    for res in resources:
        ch = svg.Chart(f"{res}: write → event at the agent (CDF)", "latency, ms (log)",
                       "fraction of events", xlog=True, ymin=0, ymax=1,
                       yfmt=lambda v: f"{v:g}")
        for lb in labels:
            cdf = get(modes[lb], "kf_load", "latency_us", res, "cdf", default=[])
            ch.line(lb, color(lb, labels), [(us / 1000, f) for us, f in cdf])
        lat.append(ch.svg())
    out.append(("Event latency", lat))

    verbs = {lb: by_verb(modes[lb]) for lb in labels if modes[lb].get("apiserver_requests")}
    cats = list(READ_VERBS) + [c for c in ("writes", "auth", "other")
                               if any(v[c] for v in verbs.values())]
    bars = svg.bar_chart("upstream requests at the apiserver, by verb (log scale)", cats,
                         [(lb, color(lb, labels), [v[c] for c in cats])
                          for lb, v in verbs.items()], ylabel="requests", ylog=True)
    watches = svg.Chart("watches open at the apiserver", "s since ramp start", "watches")
    streams = svg.Chart("watch streams open at the agents (kf_load)", "s since ramp start",
                        "streams")
    for lb in labels:
        m, col, off = modes[lb], color(lb, labels), _offset(modes[lb])
        watches.line(lb, col, [(t + off, n) for t, n in m.get("apiserver_watchers_samples", [])])
        streams.line(lb, col, [(r["t"], r.get("open_watches")) for r in
                               get(m, "kf_load", "timeline", default=[])])
        _phase_markers(watches, lb, m, col)
        _phase_markers(streams, lb, m, col)
    out.append(("Upstream load", [bars, watches.svg(), streams.svg()]))

    res_charts = []
    for name in ("kube-apiserver", "etcd", "kube-fanout"):
        if not any(get(m, "processes", name) for m in modes.values()):
            continue
        cpu = svg.Chart(f"{name} CPU", "s since ramp start", "% of one core")
        rss = svg.Chart(f"{name} RSS", "s since ramp start", "MiB")
        for lb in labels:
            m, col, off = modes[lb], color(lb, labels), _offset(modes[lb])
            samples = get(m, "processes", name, "samples", default=[])
            cpu.line(lb, col, [(t + off, c) for t, c, _ in samples])
            rss.line(lb, col, [(t + off, r) for t, _, r in samples])
            if samples:
                _phase_markers(cpu, lb, m, col)
                _phase_markers(rss, lb, m, col)
        res_charts += [cpu.svg(), rss.svg()]
    out.append(("Processes", res_charts))
    return out


def _table_html(head, rows, first_left=True):
    h = "".join(f"<th>{html.escape(str(c))}</th>" for c in head)
    body = []
    for r in rows:
        cells = "".join(
            f'<td class="{"l" if i == 0 and first_left else "r"}">{html.escape(str(c))}</td>'
            for i, c in enumerate(r))
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{h}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _scenario_html(results):
    s = results.get("scenario", {})
    keep = [(k, v) for k, v in s.items() if not isinstance(v, (dict, list))]
    for k, v in s.items():
        if isinstance(v, dict):
            keep.append((k, ", ".join(f"{a}={b}" for a, b in v.items())))
        elif isinstance(v, list):
            keep.append((k, " ".join(map(str, v))))
    return "<dl>" + "".join(f"<dt>{html.escape(str(k))}</dt><dd>{html.escape(str(v))}</dd>"
                            for k, v in keep) + "</dl>"


def _requests_html(results):
    modes = results.get("modes", {})
    keys = sorted({k for m in modes.values() for k in (m.get("apiserver_requests") or {})},
                  key=lambda k: (split_key(k)[1] or "~", k))
    rows = [[k, *(fmt_int(get(m, "apiserver_requests", k, default=0)) for m in modes.values())]
            for k in keys]
    return _table_html(["verb resource", *modes], rows)


def _kube_fanout_html(results):
    """kube-fanout's own counters over its run(s), if any."""
    modes = {lb: m for lb, m in results.get("modes", {}).items()
             if get(m, "kube_fanout", "counters_delta")}
    if not modes:
        return ""
    keys = sorted({k for m in modes.values() for k in m["kube_fanout"]["counters_delta"]})
    rows = [[k, *(fmt_int(m["kube_fanout"]["counters_delta"].get(k, 0)) for m in modes.values())]
            for k in keys]
    return ("<h2>kube-fanout's counters</h2><details><summary>deltas of its /metrics over the "
            "run</summary>" + _table_html(["counter", *modes], rows) + "</details>")


NOTES = """
<ul>
<li>Upstream requests are deltas of the apiserver's <code>apiserver_request_total</code> over
each run (summed over code, scope, group and version). The apiserver counts a WATCH when it
ends, so the closing scrape waits for the run's watches to close; kube-fanout's own upstream
watches stay open and are not in the deltas. Non-resource requests (the harness's own
<code>/metrics</code> scrapes) are left out of the totals.</li>
<li>Watches open at the apiserver: <code>apiserver_registered_watchers</code> where the apiserver
has it, otherwise the in-flight WATCH requests of <code>apiserver_longrunning_requests</code>
(see the scenario's <code>watchers_source</code>). Scraping the apiserver's /metrics every
interval costs the apiserver some CPU, the same in every mode.</li>
<li>CPU and RSS come from <code>/proc/PID/stat</code> and <code>/proc/PID/status</code>, sampled
every second; CPU seconds are over the sampled span (run plus its closing scrape). Memory per
watch stream is the RSS growth of whoever serves the watches (the apiserver when direct,
kube-fanout otherwise) divided by the watch streams.</li>
<li>Everything shares the machine: kf_load's agents, kube-fanout, the apiserver and etcd compete
for the same cores, so absolute numbers are this machine's; the ratios are the point.</li>
</ul>
"""


def render_html(results):
    modes = results.get("modes", {})
    labels = list(modes)
    both = "direct" in labels and "kube-fanout" in labels
    head = ["", *labels] + (["direct / kube-fanout"] if both else [])
    table = _table_html(head, [[lb, *cells] + ([r] if both else [])
                               for lb, cells, r in summary_rows(results)])
    problems = [f"{lb}: {m['error']}" for lb, m in modes.items() if m.get("error")]
    problems += [f"{lb}: {w}" for lb, m in modes.items() for w in m.get("warnings", [])]
    for lb, m in modes.items():   # kf_load's own samples of what failed (beyond the contract)
        for where in (("failure_samples",), ("churn", "failure_samples")):
            problems += [f"{lb}: kf_load: {x}" for x in get(m, "kf_load", *where, default=[])[:5]]
    sections = "".join(
        f"<h2>{html.escape(title)}</h2><div class=\"charts\">{''.join(svgs)}</div>"
        for title, svgs in charts(results))
    when = get(results, "scenario", "started") or datetime.datetime.now(
        datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    title = "kube-fanout load test: " + " vs ".join(labels)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font: 14px/1.4 sans-serif; margin: 20px auto; max-width: 1120px; color: #222; }}
h1 {{ font-size: 22px; }} h2 {{ font-size: 17px; margin-top: 28px; }}
table {{ border-collapse: collapse; margin: 8px 0; }}
th, td {{ border-bottom: 1px solid #e4e4e4; padding: 3px 10px; }}
th {{ background: #f4f4f4; }} td.r {{ text-align: right; font-variant-numeric: tabular-nums; }}
td.l {{ white-space: pre; }}
dl {{ display: grid; grid-template-columns: max-content auto; gap: 2px 14px; }}
dt {{ font-weight: bold; }} dd {{ margin: 0; font-family: monospace; word-break: break-all; }}
.charts {{ display: flex; flex-wrap: wrap; }}
.problems {{ color: #a00; }}
{svg.CSS}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p>{html.escape(when)}. Time axes: seconds since each run's ramp start; dotted lines mark ramp
start, churn start and churn end in the mode's colour.</p>
{"<ul class='problems'>" + "".join(f"<li>{html.escape(p)}</li>" for p in problems) + "</ul>"
     if problems else ""}
<h2>Summary</h2>
{table}
{sections}
<h2>Scenario</h2>
{_scenario_html(results)}
<h2>Upstream requests by verb and resource</h2>
<details><summary>apiserver_request_total deltas per mode</summary>{_requests_html(results)}
</details>
{_kube_fanout_html(results)}
<h2>Method</h2>
{NOTES}
</body></html>
"""


def write_report(results, out_dir):
    """Writes results.json (with ratios) and report.html into out_dir; returns the table."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results["ratios"] = compute_ratios(results)
    (out_dir / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (out_dir / "report.html").write_text(render_html(results))
    return render_table(results)


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    path = pathlib.Path(argv[1])
    results = json.loads(path.read_text())
    print(write_report(results, path.parent))
    print(f"\nreport: {path.parent / 'report.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
