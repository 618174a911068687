"""The parts of run-load that need no cluster: Prometheus text and /proc parsing, the samplers,
the scenario presets and kf_load's command line, and stopping a child process.

Everything here is either a pure function (tested in test_report.py) or a small thread that
calls a function it is given, so it can be driven by fakes."""
import os
import re
import signal
import ssl
import subprocess
import threading
import time
import urllib.request

CLK_TCK = os.sysconf("SC_CLK_TCK")

# --- scenario ------------------------------------------------------------------------------

# What `--preset` sets; explicit flags win. The base row is the default scenario: small enough
# for a two-core laptop in about two minutes for both modes.
PRESETS = {
    "base": dict(kubelets=200, kube_proxies=50, pollers=5, configmaps_per_kubelet=2,
                 poll_interval=5, ramp_rate=200, duration=30, drain=5, pod_rate=20, node_rate=5,
                 slice_rate=5, event_rate=10, configmap_rate=0, poller_list_nodes=0, threads=2),
    # Agent counts as the issue names them (1,000 / 5,000 / 10,000 agents in all), mixed like a
    # node fleet (mostly kubelets, some kube-proxies, a few pollers), and sized to this
    # machine's 20,000 file descriptors per process (kf_load holds one connection per watch;
    # kube-fanout and the apiserver one per client connection).
    "1k": dict(kubelets=900, kube_proxies=80, pollers=20, configmaps_per_kubelet=1,
               duration=60),
    "5k": dict(kubelets=4500, kube_proxies=400, pollers=100, configmaps_per_kubelet=1,
               duration=60, ramp_rate=300),
    # (With 16,000 pods in the namespace, the 10k pollers' namespace LISTs dominate that run:
    # see docs/load.md; --poller-list-nodes 8000 makes them list one node's pods instead.)
    "10k": dict(kubelets=8000, kube_proxies=500, pollers=1500, configmaps_per_kubelet=0,
                duration=60, ramp_rate=400, pod_rate=40, node_rate=10, slice_rate=10,
                event_rate=20),
}
SCENARIO_KEYS = list(PRESETS["base"])


def resolve_scenario(preset, overrides):
    """The scenario: base defaults, then the preset, then the flags that were given (not None)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r} (one of {', '.join(PRESETS)})")
    s = dict(PRESETS["base"])
    s.update(PRESETS[preset])
    s.update({k: v for k, v in overrides.items() if v is not None and k in s})
    for k, v in s.items():
        if v < 0:
            raise ValueError(f"--{k.replace('_', '-')} must not be negative")
    return s


def agents(s):
    return s["kubelets"] + s["kube_proxies"] + s["pollers"]


def _arg(v):
    """A flag value: 20.0 -> '20', 2.5 -> '2.5'."""
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


# kf_load flag <- scenario key, in the order of CONTRACT.md.
KF_LOAD_FLAGS = [("kubelets", "kubelets"), ("kube-proxies", "kube_proxies"),
                 ("pollers", "pollers"), ("configmaps-per-kubelet", "configmaps_per_kubelet"),
                 ("poll-interval", "poll_interval"), ("ramp-rate", "ramp_rate"),
                 ("duration", "duration"), ("drain", "drain"), ("pod-rate", "pod_rate"),
                 ("node-rate", "node_rate"), ("slice-rate", "slice_rate"),
                 ("event-rate", "event_rate"), ("configmap-rate", "configmap_rate"),
                 ("poller-list-nodes", "poller_list_nodes"),
                 ("threads", "threads")]
# Flags kf_load has beyond CONTRACT.md: passed only when set, so the default command line stays
# within the contract.
OPTIONAL_FLAGS = {"configmap_rate", "poller_list_nodes"}


def connections(s):
    """Connections the agents hold at once (agents.h: one per watch; a kubelet watches its pods,
    its node and K configmaps, a kube-proxy EndpointSlices and Services, a poller has one)."""
    return (s["kubelets"] * (2 + s["configmaps_per_kubelet"]) + 2 * s["kube_proxies"]
            + s["pollers"])


def kf_load_command(binary, s, *, target, apiserver, ca_file, label, out=None, setup_only=False,
                    progress=True, node_ca=None, wire="json", http2=False, readyz=None,
                    reference_watch=False, poisson_writes=False):
    """kf_load's argv for one mode (or for --setup-only) of scenario s (CONTRACT.md). The token
    travels in the environment (KF_ADMIN_TOKEN), never on the command line. `node_ca`: (cert,
    key) of the CA that signs each kubelet's own client certificate (--node-certs). `readyz`:
    the target replicas' /readyz URLs, comma-separated (new connections only to ready ones).
    `reference_watch`: one watcher of each timed kind straight at the apiserver as well.
    `poisson_writes`: the churn's writes as Poisson arrivals (kf_load --poisson-writes)."""
    cmd = [str(binary), f"--target={target}", f"--apiserver={apiserver}", f"--ca-file={ca_file}",
           "--token-env=KF_ADMIN_TOKEN", f"--label={label}"]
    cmd += [f"--{flag}={_arg(s[key])}" for flag, key in KF_LOAD_FLAGS
            if key not in OPTIONAL_FLAGS or s[key]]
    if node_ca:
        cmd += [f"--node-ca-cert={node_ca[0]}", f"--node-ca-key={node_ca[1]}"]
    if wire != "json" and not setup_only:
        cmd.append(f"--wire={wire}")
    if http2 and not setup_only:
        cmd.append("--http2")
    if readyz and not setup_only:
        cmd.append(f"--target-readyz={readyz}")
    if reference_watch and not setup_only:
        cmd.append("--reference-watch")
    if poisson_writes and not setup_only:
        cmd.append("--poisson-writes")
    if setup_only:
        cmd.append("--setup-only")
    if out is not None:
        cmd.append(f"--out={out}")
    if progress and not setup_only:
        cmd.append("--progress")
    return cmd


def run_timeout_s(s):
    """A bound on one kf_load run: twice the planned ramp, the churn and drain, and 2 minutes."""
    ramp = agents(s) / max(s["ramp_rate"], 1)
    return int(2 * ramp + s["duration"] + s["drain"] + 120)


def setup_timeout_s(s):
    """A bound on --setup-only: 2 minutes plus 20 ms per object it creates."""
    objects = s["kubelets"] * (1 + s["configmaps_per_kubelet"]) + s["kube_proxies"] + 1000
    return int(120 + 0.02 * objects)


# --- Prometheus text -------------------------------------------------------------------------

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def parse_prometheus(text, names=None):
    """[(name, {label: value}, value)] for the samples of the named metrics (all if None)."""
    prefixes = tuple(names) if names is not None else None
    out = []
    for line in text.splitlines():
        if not line or line[0] == "#" or (prefixes and not line.startswith(prefixes)):
            continue
        m = _SAMPLE.match(line)
        if not m or (names is not None and m.group(1) not in names):
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        labels = {k: re.sub(r"\\[\\\"n]", lambda e: _UNESCAPE[e.group(0)], v)
                  for k, v in _LABEL.findall(m.group(2) or "")}
        out.append((m.group(1), labels, value))
    return out


def request_key(labels):
    """'VERB resource[/subresource]' for an apiserver_request_total sample; every non-resource
    request (/metrics, /readyz, discovery) is 'VERB (non-resource)'."""
    verb = labels.get("verb", "?")
    resource = labels.get("resource", "")
    if not resource:
        return f"{verb} (non-resource)"
    sub = labels.get("subresource", "")
    return f"{verb} {resource}/{sub}" if sub else f"{verb} {resource}"


def request_counts(text):
    """apiserver_request_total summed by request_key."""
    out = {}
    for _, labels, value in parse_prometheus(text, {"apiserver_request_total"}):
        key = request_key(labels)
        out[key] = out.get(key, 0) + value
    return out


def counter_delta(before, after):
    """after - before per key, without zeros (a counter that went down was reset: after)."""
    out = {}
    for key, a in after.items():
        b = before.get(key, 0)
        d = a - b if a >= b else a
        if d:
            out[key] = int(d) if float(d).is_integer() else d
    return dict(sorted(out.items()))


def watcher_counts(text):
    """(source, {kind: open watches}) at the apiserver. apiserver_registered_watchers (by kind)
    where the apiserver still has it; it was removed in newer releases, so otherwise the
    in-flight WATCH requests of apiserver_longrunning_requests (by resource)."""
    out = {}
    samples = parse_prometheus(text, {"apiserver_registered_watchers",
                                      "apiserver_longrunning_requests"})
    registered = [(lb, v) for n, lb, v in samples if n == "apiserver_registered_watchers"]
    if registered:
        for labels, value in registered:
            kind = labels.get("kind", "?")
            out[kind] = out.get(kind, 0) + int(value)
        return "apiserver_registered_watchers", out
    for name, labels, value in samples:
        if labels.get("verb") == "WATCH":
            res = labels.get("resource", "") or "(non-resource)"
            out[res] = out.get(res, 0) + int(value)
    return "apiserver_longrunning_requests{verb=WATCH}", out


def metric_sum(text, name):
    """The sum of one metric's samples (0 when absent)."""
    return sum(v for _, _, v in parse_prometheus(text, {name}))


def histogram_quantile(q, buckets):
    """Prometheus' histogram_quantile over {upper bound: cumulative count} (+Inf as inf): the
    q-quantile, linear within its bucket; None without observations."""
    bounds = sorted(buckets)
    total = buckets[bounds[-1]] if bounds else 0
    if total <= 0:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for upper in bounds:
        count = buckets[upper]
        if count >= rank:
            if upper == float("inf"):
                return lower  # Past the last finite bound: that bound, as Prometheus says.
            return lower + (upper - lower) * ((rank - below) / (count - below) if count > below
                                              else 0)
        lower, below = upper, count
    return lower


def watch_delay_buckets(counters_delta):
    """{upper bound in seconds: cumulative count} of kube_fanout_watch_delay_seconds over a run,
    from kube_fanout_counters' deltas."""
    prefix = "kube_fanout_watch_delay_seconds_bucket{le="
    return {float(k[len(prefix):-1]): v for k, v in counters_delta.items()
            if k.startswith(prefix)}


def cpu_per_event_us(mode):
    """The serving side's CPU (the kube-fanout processes'; the apiserver's when there are none)
    from the churn's start to the drain's end, per event the agents received (they all arrive
    then), in µs: everything the server did meanwhile, over what it delivered. None without
    the samples, phases or events."""
    kf_load = mode.get("kf_load") or {}
    phases = kf_load.get("phases") or {}
    events = (kf_load.get("watch") or {}).get("events") or \
        ((kf_load.get("timeline") or [{}])[-1] or {}).get("events")
    started, t0 = kf_load.get("started_unix"), mode.get("sample_t0_unix")
    if not events or started is None or t0 is None or phases.get("churn_s") is None:
        return None
    begin = started - t0 + (phases.get("setup_s") or 0) + (phases.get("ramp_s") or 0)
    end = begin + phases["churn_s"] + (phases.get("drain_s") or 0)
    processes = mode.get("processes") or {}
    names = [n for n in processes if n.startswith("kube-fanout")] or ["kube-apiserver"]
    cpu = 0.0
    for name in names:
        rows = (processes.get(name) or {}).get("samples") or []
        for (before, _, _), (t, pct, _) in zip(rows, rows[1:]):
            if pct is not None:  # % of a core over (before, t]: the part inside the window.
                cpu += pct / 100 * max(0.0, min(t, end) - max(before, begin))
    return cpu / events * 1e6 if cpu > 0 else None


def kube_fanout_counters(text):
    """kube-fanout's own counters worth a delta: 'name{labels}' -> value."""
    wanted = {"kube_fanout_requests_total", "kube_fanout_cache_requests_total",
              "kube_fanout_cache_declined_total", "kube_fanout_upstream_watches_total",
              "kube_fanout_upstream_relists_total", "kube_fanout_upstream_errors_total",
              "kube_fanout_watchers_cut_total", "kube_fanout_events_dispatched_total",
              "kube_fanout_upstream_events_total", "kube_fanout_upstream_unavailable_total",
              "kube_fanout_upstream_rv_probes_total",
              "kube_fanout_upstream_progress_watches_total",
              "kube_fanout_requests_refused_total", "kube_fanout_tls_accept_pauses_total",
              "kube_fanout_cache_content_proofs_total", "kube_fanout_cache_passed_through_total",
              "kube_fanout_cache_unfresh_refused_total", "kube_fanout_tls_handshakes_total",
              "kube_fanout_tls_session_tickets_total", "kube_fanout_tls_handshakes_abandoned_total",
              "kube_fanout_http2_frame_buffers_released_total",
              "kube_fanout_access_reviews_total", "kube_fanout_access_reviews_shared_total",
              "kube_fanout_token_reviews_total", "kube_fanout_watch_delay_seconds_bucket",
              "kube_fanout_watch_delay_seconds_count"}
    out = {}
    for name, labels, value in parse_prometheus(text, wanted):
        lb = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        out[f"{name}{{{lb}}}" if lb else name] = value
    return out


def fetch(url, token=None, ca_file=None, timeout=5.0):
    """GET url, the body as text. Raises OSError (URLError is one) on failure."""
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    ctx = ssl.create_default_context(cafile=ca_file) if url.startswith("https") else None
    with urllib.request.urlopen(req, timeout=timeout, context=ctx) as resp:
        return resp.read().decode("utf-8", "replace")


# --- /proc -----------------------------------------------------------------------------------

def parse_proc_stat(text):
    """CPU seconds (user + system) from /proc/PID/stat (comm may hold spaces and parens)."""
    fields = text[text.rindex(")") + 2:].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def parse_vmrss_mib(text):
    """VmRSS from /proc/PID/status, in MiB (0 for a zombie, which has none)."""
    m = re.search(r"^VmRSS:\s+(\d+)\s+kB", text, re.M)
    return int(m.group(1)) / 1024 if m else 0.0


def parse_machine_cpu(text):
    """(busy, total) clock ticks from the 'cpu' line of /proc/stat; busy counts user, nice,
    system, irq, softirq and steal."""
    for line in text.splitlines():
        if line.startswith("cpu "):
            v = [int(x) for x in line.split()[1:]]
            busy = v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)
            return busy, sum(v[:8])
    raise ValueError("no cpu line in /proc/stat")


def read_process(pid, proc="/proc"):
    """(cpu seconds, rss MiB) of a live process, None once it is gone."""
    try:
        with open(f"{proc}/{pid}/stat") as f:
            cpu = parse_proc_stat(f.read())
        with open(f"{proc}/{pid}/status") as f:
            rss = parse_vmrss_mib(f.read())
    except (OSError, ValueError, IndexError):
        return None
    return cpu, rss


def summarize_process(raw):
    """From [(t, cpu seconds so far, rss MiB)] samples of one process: CPU used over them, peak
    and starting RSS, and [[t, cpu %, rss MiB]] rows (CPU % of one core since the previous
    sample)."""
    if not raw:
        return {"cpu_s": None, "peak_rss_mib": None, "rss_start_mib": None,
                "rss_growth_mib": None, "samples": []}
    rows, prev = [], None
    for t, cpu, rss in raw:
        pct = (None if prev is None or t <= prev[0]
               else max(0.0, (cpu - prev[1]) / (t - prev[0]) * 100))
        rows.append([round(t, 2), None if pct is None else round(pct, 1), round(rss, 1)])
        prev = (t, cpu)
    peak = max(r for _, _, r in raw)
    return {"cpu_s": round(raw[-1][1] - raw[0][1], 2), "peak_rss_mib": round(peak, 1),
            "rss_start_mib": round(raw[0][2], 1), "rss_growth_mib": round(peak - raw[0][2], 1),
            "samples": rows}


def summarize_watchers(samples):
    """From [(t, {kind: n})]: peak per kind, the first sample (baseline) and [[t, total]]."""
    peak = {}
    for _, counts in samples:
        for kind, n in counts.items():
            peak[kind] = max(peak.get(kind, 0), n)
    return {"peak": dict(sorted(peak.items())),
            "baseline": dict(sorted(samples[0][1].items())) if samples else {},
            "peak_total": max((sum(c.values()) for _, c in samples), default=None),
            "samples": [[round(t, 2), sum(c.values())] for t, c in samples]}


class Sampler(threading.Thread):
    """Calls probe() every interval seconds until stop(); keeps [(t, value)] with t in seconds
    since t0 (unix time), skipping the None values the probe returns on failure."""

    def __init__(self, probe, interval, t0, name="sampler"):
        super().__init__(name=name, daemon=True)
        self.probe, self.interval, self.t0 = probe, interval, t0
        self.samples, self._stop_event = [], threading.Event()

    def run(self):
        next_at = time.monotonic()
        while not self._stop_event.is_set():
            t = time.time() - self.t0
            try:
                value = self.probe()
            except Exception:  # a failed probe is a missing sample, never a dead thread
                value = None
            if value is not None:
                self.samples.append((t, value))
            next_at += self.interval
            self._stop_event.wait(max(0.0, next_at - time.monotonic()))

    def stop(self, timeout=10):
        self._stop_event.set()
        self.join(timeout)
        return self.samples


# --- processes -------------------------------------------------------------------------------

def stop_process(proc, grace=10.0, log=None):
    """SIGTERM, up to grace seconds to exit, then SIGKILL (bounded too). Returns the exit code."""
    if proc is None:
        return None
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            return proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            if log:
                log(f"pid {proc.pid} ignored SIGTERM for {grace:g}s; killing it")
            proc.kill()
            try:
                return proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                if log:
                    log(f"pid {proc.pid} survived SIGKILL")
                return None
    return proc.returncode


def pid_matches(pid, needle, proc="/proc"):
    """Whether a live process's command line contains needle (guards against recycled pids)."""
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as f:
            return needle.encode() in f.read()
    except OSError:
        return False
