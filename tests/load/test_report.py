"""Tests of run-load's pure parts and of the report, against the synthetic kf_load results in
testdata/ (shaped per CONTRACT.md). No cluster, no binaries:
    python3 -m pytest -q tests/load/test_report.py"""
import copy
import importlib.machinery
import importlib.util
import json
import pathlib
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harness  # noqa: E402
import report  # noqa: E402
import svg  # noqa: E402

DATA = HERE / "testdata"


def load(name):
    return json.loads((DATA / name).read_text())


def proc_samples(cpu_per_s, rss0, rss_peak, n=20, t0=0.0):
    """Raw (t, cpu seconds, rss MiB) samples: steady CPU, RSS rising to a peak."""
    return [(t0 + i, i * cpu_per_s, rss0 + (rss_peak - rss0) * min(1.0, i / (n / 2)))
            for i in range(n)]


def make_results():
    """A results.json as run-load writes it, around the two testdata kf_load files."""
    direct = {
        "kf_load": load("kf_load_direct.json"), "kf_load_exit": 0, "error": None, "warnings": [],
        "sample_t0_unix": 1790000008.0,
        "apiserver_requests": {"LIST pods": 1200, "WATCH pods": 250, "WATCH nodes": 200,
                               "WATCH configmaps": 400, "WATCH endpointslices": 50,
                               "WATCH services": 300, "GET configmaps": 40,
                               "PATCH pods": 300, "PATCH nodes/status": 75,
                               "POST events": 150, "GET (non-resource)": 30},
        "apiserver_watchers_peak": {"pods": 251, "nodes": 201},
        "apiserver_watchers_baseline": {"pods": 1, "nodes": 1},
        "apiserver_watchers_peak_total": 1162,
        "apiserver_watchers_samples": [[0, 12], [5, 900], [10, 1162], [20, 12]],
        "processes": {
            "kube-apiserver": harness.summarize_process(proc_samples(0.9, 300, 620)),
            "etcd": harness.summarize_process(proc_samples(0.1, 60, 64)),
        },
    }
    kf = {
        "kf_load": load("kf_load_kube-fanout.json"), "kf_load_exit": 0, "error": None,
        "warnings": [], "sample_t0_unix": 1790000058.5,
        "apiserver_requests": {"PATCH pods": 300, "PATCH nodes/status": 75, "POST events": 150,
                               "GET (non-resource)": 30, "WATCH pods": 1,
                               "POST selfsubjectaccessreviews": 1150},
        "apiserver_watchers_peak": {"pods": 2, "nodes": 2},
        "apiserver_watchers_baseline": {"pods": 2, "nodes": 2},
        "apiserver_watchers_peak_total": 17,
        "apiserver_watchers_samples": [[0, 17], [10, 17]],
        "processes": {
            "kube-apiserver": harness.summarize_process(proc_samples(0.3, 630, 640)),
            "etcd": harness.summarize_process(proc_samples(0.1, 64, 65)),
            "kube-fanout": harness.summarize_process(proc_samples(0.4, 80, 110)),
        },
        "kube_fanout": {"watchers_peak": 1150, "alive_at_end": True,
                        "counters_delta": {"kube_fanout_requests_total{route=cache}": 1700,
                                           "kube_fanout_upstream_rv_probes_total{resource=pods}":
                                           3}},
    }
    return {"scenario": {"kubelets": 200, "kube_proxies": 50, "pollers": 5,
                         "cache_resources": "pods,nodes,services,"
                                            "endpointslices.discovery.k8s.io/v1,configmaps",
                         "started": "2026-09-21T12:00:00Z"},
            "modes": {"direct": direct, "kube-fanout": kf}}


# --- harness: scenario and command line ------------------------------------------------------

def test_resolve_scenario_layers_base_preset_and_flags():
    s = harness.resolve_scenario("10k", {"kubelets": 123, "duration": None, "bogus": 1})
    assert s["kubelets"] == 123                 # the flag wins
    assert s["kube_proxies"] == 500             # from the preset
    assert s["poll_interval"] == 5              # from the base
    assert "bogus" not in s
    with pytest.raises(ValueError):
        harness.resolve_scenario("huge", {})
    with pytest.raises(ValueError):
        harness.resolve_scenario("base", {"duration": -1})


def test_kf_load_command_follows_the_contract():
    s = harness.resolve_scenario("base", {"pod_rate": 2.5})
    cmd = harness.kf_load_command("kf_load", s, target="https://127.0.0.1:1", apiserver="https://a",
                                  ca_file="/ca", label="direct", out="/o.json")
    assert cmd[0] == "kf_load"
    assert "--pod-rate=2.5" in cmd and "--node-rate=5" in cmd and "--kubelets=200" in cmd
    assert "--progress" in cmd and "--out=/o.json" in cmd and "--token-env=KF_ADMIN_TOKEN" in cmd
    assert "--setup-only" not in cmd
    assert not any(a.startswith("--configmap-rate") for a in cmd)   # beyond the contract: unset
    with_cm = harness.kf_load_command("kf_load", dict(s, configmap_rate=1), target="t",
                                      apiserver="a", ca_file="c", label="direct")
    assert "--configmap-rate=1" in with_cm
    setup = harness.kf_load_command("kf_load", s, target="t", apiserver="a", ca_file="c",
                                    label="setup", setup_only=True)
    assert "--setup-only" in setup and "--progress" not in setup
    h2 = harness.kf_load_command("kf_load", s, target="t", apiserver="a", ca_file="c",
                                 label="kube-fanout", wire="protobuf", http2=True)
    assert "--http2" in h2 and "--wire=protobuf" in h2 and "--http2" not in cmd
    assert "--http2" not in harness.kf_load_command("kf_load", s, target="t", apiserver="a",
                                                    ca_file="c", label="setup", setup_only=True,
                                                    http2=True)
    cmd = cmd + h2[1:]
    flags = {a.split("=")[0] for a in cmd[1:]}
    contract = (HERE / "CONTRACT.md").read_text()
    for flag in flags:   # every flag run-load passes is one the contract defines
        assert flag in contract, flag


def test_connections():
    s = harness.resolve_scenario("base", {"kubelets": 10, "kube_proxies": 3, "pollers": 2})
    assert harness.connections(s) == 10 * 4 + 3 * 2 + 2


def test_timeouts_grow_with_the_scenario():
    small, big = harness.resolve_scenario("base", {}), harness.resolve_scenario("10k", {})
    assert harness.run_timeout_s(small) >= small["duration"] + small["drain"] + 120
    assert harness.run_timeout_s(big) > harness.run_timeout_s(small)
    assert harness.setup_timeout_s(big) > harness.setup_timeout_s(small)


# --- harness: Prometheus text ----------------------------------------------------------------

def test_parse_prometheus_labels_escapes_and_filter():
    text = ('# HELP x y\n# TYPE x counter\n'
            'x{a="1",b="q\\"uote} ok"} 3\n'
            'x 4 1700000000\n'
            'xy{a="2"} 5\n'
            'x{a="bad"} notanumber\n')
    got = harness.parse_prometheus(text, {"x"})
    assert got == [("x", {"a": "1", "b": 'q"uote} ok'}, 3.0), ("x", {}, 4.0)]
    assert len(harness.parse_prometheus(text)) == 3


def test_request_counts_from_a_real_apiserver_scrape():
    counts = harness.request_counts((DATA / "apiserver_metrics.txt").read_text())
    assert counts["WATCH pods"] == 1
    assert counts["LIST services"] == 1
    assert counts["GET (non-resource)"] >= 3      # /readyz, discovery, openapi...
    assert not any(k.startswith("apiserver") for k in counts)


def test_request_key_and_counter_delta():
    assert harness.request_key({"verb": "PATCH", "resource": "nodes",
                                "subresource": "status"}) == "PATCH nodes/status"
    assert harness.request_key({"verb": "GET", "resource": "",
                                "subresource": "/metrics"}) == "GET (non-resource)"
    before = {"LIST pods": 10, "WATCH pods": 5, "GET x": 7}
    after = {"LIST pods": 15, "WATCH pods": 5, "GET x": 2, "POST pods": 3}
    # unchanged keys dropped, a counter that went down was reset, new keys count whole
    assert harness.counter_delta(before, after) == {"GET x": 2, "LIST pods": 5, "POST pods": 3}


def test_watcher_counts_falls_back_to_longrunning_requests():
    source, counts = harness.watcher_counts((DATA / "apiserver_metrics.txt").read_text())
    assert source.startswith("apiserver_longrunning_requests")
    assert counts["pods"] == 1 and counts["nodes"] == 1 and counts["secrets"] == 1
    text = ('apiserver_registered_watchers{group="",kind="Pod",version="v1"} 7\n'
            'apiserver_longrunning_requests{resource="pods",verb="WATCH"} 99\n')
    assert harness.watcher_counts(text) == ("apiserver_registered_watchers", {"Pod": 7})


def test_kube_fanout_counters():
    text = ('kube_fanout_requests_total{route="cache"} 12\n'
            'kube_fanout_watchers{resource="pods"} 4\n'
            'kube_fanout_upstream_relists_total{resource="pods"} 1\n')
    assert harness.kube_fanout_counters(text + 'kube_fanout_upstream_rv_probes_total 0\n') == {
        "kube_fanout_requests_total{route=cache}": 12.0,
        "kube_fanout_upstream_relists_total{resource=pods}": 1.0,
        "kube_fanout_upstream_rv_probes_total": 0.0}
    assert harness.metric_sum(text, "kube_fanout_watchers") == 4


# --- harness: /proc ---------------------------------------------------------------------------

def test_parse_proc_stat_with_spaces_and_parens_in_comm():
    fields = ["S"] + ["0"] * 10 + [str(3 * harness.CLK_TCK), str(harness.CLK_TCK)] + ["0"] * 30
    text = "1234 (kube (api) server) " + " ".join(fields)
    assert harness.parse_proc_stat(text) == pytest.approx(4.0)


def test_parse_vmrss_and_machine_cpu():
    assert harness.parse_vmrss_mib("Name:\tetcd\nVmRSS:\t  204800 kB\n") == 200.0
    assert harness.parse_vmrss_mib("Name:\tzombie\n") == 0.0
    busy, total = harness.parse_machine_cpu("cpu  10 1 5 100 2 3 4 6 0 0\ncpu0 1 1 1 1\n")
    assert busy == 10 + 1 + 5 + 3 + 4 + 6 and total == 131


def test_read_process_on_ourselves_and_a_missing_pid(tmp_path):
    import os
    cpu, rss = harness.read_process(os.getpid())
    assert cpu >= 0 and rss > 1
    assert harness.read_process(999999999) is None
    assert harness.pid_matches(os.getpid(), "pytest") or harness.pid_matches(os.getpid(), "python")


def test_summarize_process():
    s = harness.summarize_process([(0, 10.0, 100), (1, 10.5, 150), (3, 11.5, 120)])
    assert s["cpu_s"] == 1.5
    assert s["peak_rss_mib"] == 150 and s["rss_start_mib"] == 100 and s["rss_growth_mib"] == 50
    assert s["samples"] == [[0, None, 100], [1, 50.0, 150], [3, 50.0, 120]]
    assert harness.summarize_process([])["cpu_s"] is None


def test_summarize_watchers():
    s = harness.summarize_watchers([(0, {"pods": 1}), (1, {"pods": 9, "nodes": 3}),
                                    (2, {"pods": 2})])
    assert s["peak"] == {"nodes": 3, "pods": 9}
    assert s["baseline"] == {"pods": 1} and s["peak_total"] == 12
    assert s["samples"] == [[0, 1], [1, 12], [2, 2]]


def test_sampler_runs_skips_failures_and_stops():
    calls = []

    def probe():
        calls.append(1)
        if len(calls) == 2:
            raise OSError("scrape failed")
        return len(calls)

    smp = harness.Sampler(probe, 0.01, t0=0)
    smp.start()
    import time
    time.sleep(0.1)
    samples = smp.stop()
    assert not smp.is_alive()
    assert len(samples) >= 3 and 2 not in [v for _, v in samples]


def test_stop_process_terminates_and_reports():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    assert harness.stop_process(p, grace=5) == -15
    stubborn = subprocess.Popen([sys.executable, "-c",
                                 "import signal, time, sys\n"
                                 "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                 "print('ready', flush=True); time.sleep(60)"],
                                stdout=subprocess.PIPE)
    stubborn.stdout.readline()
    said = []
    assert harness.stop_process(stubborn, grace=0.3, log=said.append) == -9
    assert said and "killing" in said[0]
    assert harness.stop_process(None) is None


# --- report ----------------------------------------------------------------------------------

def test_fixtures_follow_the_contract_shape():
    for name in ("kf_load_direct.json", "kf_load_kube-fanout.json"):
        r = load(name)
        assert {"label", "target", "config", "phases", "started_unix", "latency_us",
                "completeness", "requests", "connections", "churn", "timeline"} <= set(r)
        for lat in r["latency_us"].values():
            assert lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
            fractions = [f for _, f in lat["cdf"]]
            assert fractions == sorted(fractions) and 0 < fractions[0] and fractions[-1] == 1


def test_upstream_sums_and_by_verb():
    m = make_results()["modes"]["direct"]
    cached = {"pods", "nodes", "services", "endpointslices", "configmaps"}
    assert report.upstream(m) == 1200 + 250 + 200 + 400 + 50 + 300 + 40 + 300 + 75 + 150
    assert report.upstream(m, {"LIST", "WATCH", "GET"}, cached) == 2440
    assert report.upstream(m, {"WATCH"}, {"pods"}) == 250
    assert report.upstream(m, writes=True) == 525
    assert report.by_verb(m) == {"LIST": 1200, "WATCH": 1200, "GET": 40, "writes": 525,
                                 "auth": 0, "other": 0}
    k = make_results()["modes"]["kube-fanout"]
    assert report.by_verb(k)["auth"] == 1150 and report.by_verb(k)["writes"] == 525
    assert report.upstream(k, auth=True) == 1150 and report.upstream(k, writes=True) == 525
    assert report.upstream({}) is None


def test_cached_resources_from_the_flag():
    assert report.cached_resources(make_results()) == ["pods", "nodes", "services",
                                                       "endpointslices", "configmaps"]
    assert report.cached_resources({}) == report.DEFAULT_CACHED


def test_compute_ratios():
    r = report.compute_ratios(make_results())
    assert r["upstream_requests"] == pytest.approx(2965 / 1676, abs=1e-3)
    assert r["upstream_cached_reads"] == 2440          # kube-fanout mode: a single WATCH
    assert r["apiserver_watchers_peak"] == pytest.approx(1162 / 17, abs=1e-3)
    assert r["apiserver_cpu_s"] == pytest.approx(3.0)  # 0.9 vs 0.3 CPU s per s
    assert r["p99_latency"]["pods"] == pytest.approx(1.6, rel=0.01)
    # memory per watch stream: apiserver +320 MiB vs kube-fanout +30 MiB, same streams
    assert r["memory_per_watcher"] == pytest.approx(320 / 30, rel=1e-3)
    assert report.compute_ratios({"modes": {"direct": make_results()["modes"]["direct"]}}) == {}


def test_ratio_helpers():
    assert report.ratio(6, 3) == 2 and report.ratio(1, 0) is None and report.ratio(None, 1) is None
    assert report.fmt_ratio(6, 3) == "2×" and report.fmt_ratio(5, 0) == "∞"
    assert report.fmt_ratio(0, 0) == "—" and report.fmt_ratio(None, 2) == ""
    assert report.fmt_ratio(123456, 1) == "123,456×"
    assert report.fmt_ms(1440) == "1.44" and report.fmt_ms(250000) == "250"
    assert report.fmt_ms(None) == "—"


def rows_by_label(results):
    return {label.strip(): (cells, r) for label, cells, r in report.summary_rows(results)}


def test_summary_rows():
    rows = rows_by_label(make_results())
    assert rows["agents (kubelets / kube-proxies / pollers)"][0] == ["255 (200 / 50 / 5)"] * 2
    cells, r = rows["upstream requests (resources, all verbs)"]
    assert cells == ["2,965", "1,676"] and r == "1.77×"
    assert rows["writes (churn)"][0] == ["525", "525"]
    assert rows["auth reviews (kube-fanout checking its clients)"][0] == ["0", "1,150"]
    assert rows["LIST"] == (["1,200", "0"], "∞")
    assert rows["WATCH"][0] == ["1,200", "1"]
    assert rows["complete / checked watch streams"][0] == ["1,148 / 1,150", "1,150 / 1,150"]
    assert rows["kube-fanout CPU s"][0][0] == "—"      # not running in direct mode
    assert rows["pods latency ms p50 / p90 / p99 / max"] == (
        ["1.44 / 5.72 / 10.7 / 13.4", "0.9 / 3.58 / 6.71 / 8.39"], "1.6×")
    assert rows["events timed (pods / nodes / endpointslices)"][0] == ["300 / 75 / 75"] * 2
    assert rows["apiserver watches: peak (at start)"][0] == ["1,162 (2)", "17 (4)"]
    assert "run problem" not in rows
    assert rows["churn writes made (late slots skipped)"][0] == ["600"] * 2
    assert rows["events received by the agents"][0] == ["1,440"] * 2   # the timeline's last


def test_reference_watch_rows_only_when_it_ran():
    res = make_results()
    assert not any(label.startswith("one watcher") for label in rows_by_label(res))
    res["modes"]["kube-fanout"]["kf_load"]["reference"] = {
        "latency_us": {"pods": {"count": 300, "p50": 7140, "p90": 11500, "p99": 16200,
                                "max": 21200}},
        "streams_checked": 3, "streams_complete": 3, "missing_events": 0}
    rows = rows_by_label(res)
    assert rows["one watcher straight at the apiserver: pods ms p50 / p90 / p99 / max"][0] == [
        "—", "7.14 / 11.5 / 16.2 / 21.2"]
    assert "one watcher straight at the apiserver: nodes ms p50 / p90 / p99 / max" not in rows
    report.render_table(res)


def test_kube_fanouts_own_delay_from_its_histogram():
    res = make_results()
    label = "kube-fanout's part (arrival from the upstream → write) ms p50 / p90 / p99"
    assert label not in rows_by_label(res)
    res["modes"]["kube-fanout"]["kube_fanout"] = {"counters_delta": {
        "kube_fanout_watch_delay_seconds_bucket{le=0.001}": 50,
        "kube_fanout_watch_delay_seconds_bucket{le=0.0025}": 90,
        "kube_fanout_watch_delay_seconds_bucket{le=0.005}": 100,
        "kube_fanout_watch_delay_seconds_bucket{le=+Inf}": 100}}
    # p50 at the first bucket's top, p90 at the second's, p99 nine tenths into the third.
    assert rows_by_label(res)[label][0] == ["—", "1 / 2.5 / 4.75"]
    assert harness.histogram_quantile(0.5, {}) is None


def test_cpu_per_event_counts_the_churn_and_drain_only():
    res = make_results()
    label = "server CPU per event received, µs (churn and drain)"
    direct, kf = res["modes"]["direct"], res["modes"]["kube-fanout"]
    # kube-fanout's fixture: 40 % of a core in every sample; kf_load started 1.5 s after the
    # samples did, ramped 1.3 s, churned 15 s and drained 5 s: its window is 2.8-22.8 s, of
    # which the samples (0-19 s) cover 16.2 s, 6.48 CPU s, over its events.
    events = kf["kf_load"]["timeline"][-1]["events"]
    assert events > 0  # Setup: the fixture has events to divide by.
    assert harness.cpu_per_event_us(kf) == pytest.approx(6.48 / events * 1e6)
    kf["kf_load"]["watch"] = {"events": 1000}  # The total, when kf_load gives it.
    assert harness.cpu_per_event_us(kf) == pytest.approx(6480)
    # Direct: the apiserver's (90 %), its window from its own offsets.
    direct["kf_load"]["watch"] = {"events": 2000}
    assert harness.cpu_per_event_us(direct) is not None
    kf["kf_load"]["watch"] = {"events": 0}
    kf["kf_load"]["timeline"] = []
    assert harness.cpu_per_event_us(kf) is None
    assert rows_by_label(res)[label][0][1] == "—"
    assert harness.cpu_per_event_us({}) is None


def test_summary_rows_survive_a_failed_mode():
    res = make_results()
    res["modes"]["kube-fanout"].update(kf_load=None, error="kf_load exited with status 1",
                                       processes={}, apiserver_requests=None)
    rows = rows_by_label(res)
    assert rows["run problem"][0] == ["", "kf_load exited with status 1"]
    assert rows["watch streams"][0] == ["1,150", "—"]
    report.render_table(res)
    report.render_html(res)


def test_one_mode_has_no_ratio_column():
    res = make_results()
    del res["modes"]["direct"]
    table = report.render_table(res)
    assert "direct/kube-fanout" not in table and "kube-fanout" in table.splitlines()[0]
    assert all(r == "" for _, _, r in report.summary_rows(res))


def test_render_table_is_aligned():
    lines = report.render_table(make_results()).splitlines()
    assert lines[0].split()[-1] == "direct/kube-fanout"
    assert set(lines[1]) <= {"-", " "}
    assert any(line.startswith("watch streams") for line in lines)


def test_render_html_is_self_contained_and_well_formed(tmp_path):
    page = report.render_html(make_results())
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(src|href)\s*=|@import|url\(|<script""", page)
    assert page.count("<svg") >= 9        # 3 CDFs, bars, 2 timelines, 3 processes x 2
    for m in re.finditer(r"<svg.*?</svg>", page, re.S):   # each chart is well-formed XML
        ET.fromstring(m.group(0))
    assert "kube-fanout" in page and "direct / kube-fanout" in page
    assert "kube_fanout_upstream_rv_probes_total{resource=pods}" in page
    res = make_results()
    res["modes"]["direct"]["kf_load"]["failure_samples"] = ["LIST pods: connection refused"]
    assert "direct: kf_load: LIST pods: connection refused" in report.render_html(res)


def test_write_report_and_the_cli(tmp_path):
    res = make_results()
    table = report.write_report(copy.deepcopy(res), tmp_path)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["ratios"]["upstream_cached_reads"] == 2440
    assert (tmp_path / "report.html").stat().st_size > 5000
    assert "watch streams" in table
    out = subprocess.run([sys.executable, str(HERE / "report.py"), str(tmp_path / "results.json")],
                         capture_output=True, text=True, check=True).stdout
    assert "direct/kube-fanout" in out


def test_run_load_cli_without_a_cluster(tmp_path):
    run_load = str(HERE / "run-load")
    assert "--kubelets" in subprocess.run([run_load, "--help"], capture_output=True, text=True,
                                          check=True).stdout
    out = subprocess.run([run_load, "--dry-run", "--preset", "1k", "--kubelets", "7",
                          "--modes", "kube-fanout"], capture_output=True, text=True,
                         check=True).stdout
    assert "--kubelets=7" in out and "--kube-proxies=80" in out and "--label=kube-fanout" in out
    bad = subprocess.run([run_load, "--modes", "direct,nope"], capture_output=True, text=True)
    assert bad.returncode == 2
    report.write_report(make_results(), tmp_path)
    again = subprocess.run([run_load, "--report-from", str(tmp_path / "results.json")],
                           capture_output=True, text=True, check=True).stdout
    assert "upstream requests" in again


def test_run_load_module_imports_and_has_pure_helpers():
    loader = importlib.machinery.SourceFileLoader("run_load", str(HERE / "run-load"))
    spec = importlib.util.spec_from_loader("run_load", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    args = mod.parse_args(["--kubelets", "1000", "--modes", "direct", "--duration", "60"])
    assert args.modes == ["direct"] and args.scenario["kubelets"] == 1000
    assert args.scenario["duration"] == 60


# --- svg -------------------------------------------------------------------------------------

def test_ticks():
    assert svg.nice_ticks(0, 97) == [0, 20, 40, 60, 80, 100]
    assert svg.log_ticks(0.3, 40) == [0.1, 1.0, 10.0, 100.0]
    assert svg.log_ticks(1.5, 30)[:3] == [1.0, 2.0, 5.0]
    assert svg.num(1500) == "1.5k" and svg.num(0) == "0" and svg.num(0.25) == "0.25"


def test_charts_render_and_handle_empty_data():
    ch = svg.Chart("t", xlog=True).line("a", "#000", [(0, 1), (1, 0.5), (10, 1)]).vline(1, "#f00")
    out = ch.svg()
    ET.fromstring(out)
    assert "polyline" in out and "class=\"marker\"" in out    # x=0 dropped on the log axis
    assert "no data" in svg.Chart("empty").svg()
    bars = svg.bar_chart("b", ["LIST", "GET"], [("d", "#f00", [100, 0]), ("k", "#00f", [1, 5])],
                         ylog=True)
    ET.fromstring(bars)
    assert bars.count("<rect x=") == 3 + 2    # 3 non-zero bars + 2 legend swatches
    assert "no data" in svg.bar_chart("b", ["x"], [("d", "#f00", [0])])


def test_hollow_node_rows_only_with_hollow_nodes():
    assert not any(k.startswith("hollow") for k in rows_by_label(make_results()))
    res = make_results()
    res["modes"]["kube-fanout"]["hollow"] = {
        "nodes": 3, "ready": 3, "pods": 9, "pods_running": 8,
        "kubelet_connections": {"min": 1, "max": 1, "mean": 1.0},
        "proxy_connections": {"min": 1, "max": 2, "mean": 1.33},
        "kubelet_rss_mib_mean": 78.04, "proxy_rss_mib_mean": 66.0}
    rows = rows_by_label(res)
    assert rows["hollow nodes: Ready / pods Running (of)"][0] == ["—", "3 of 3 / 8 of 9"]
    assert rows["hollow node connections: kubelet / kube-proxy (mean, max)"][0] == [
        "—", "1.0 (1) / 1.3 (2)"]
    assert rows["hollow node RSS MiB: kubelet / kube-proxy (mean)"][0] == ["— / —", "78.0 / 66.0"]
    report.render_table(res)
    report.render_html(res)


def test_pod_start_quantiles():
    import pod_start
    assert pod_start.quantiles([]) == {"count": 0, "p50": None, "p90": None, "max": None}
    q = pod_start.quantiles(list(range(1, 11)))
    assert (q["count"], q["p50"], q["p90"], q["max"]) == (10, 5, 9, 10)
    assert pod_start.quantiles([7]) == {"count": 1, "p50": 7, "p90": 7, "max": 7}


def test_pod_start_from_kubelet_log_and_watch():
    import calendar
    import pod_start
    log = ('I1129 08:08:24.426306     885 fake_topology_manager.go:100] "AddContainer" '
           'pod="ns-1/hollow-0-1" containerName="c"\n'
           'I1129 08:08:25.062381     885 pod_startup_latency_tracker.go:295] "Mark when the pod '
           'was running for the first time" pod="ns-1/hollow-0-1" rv="2571"\n'
           'I1129 08:08:27.5     885 pod_startup_latency_tracker.go:295] "Mark when the pod '
           'was running for the first time" pod="ns-1/hollow-0-1" rv="2600"\n')  # the first
    seen = pod_start.kubelet_running([log, "no such line\n"], 2026)
    t = calendar.timegm((2026, 11, 29, 8, 8, 25))
    assert list(seen) == ["hollow-0-1"] and abs(seen["hollow-0-1"] - (t + 0.062381)) < 1e-6
    # A pod not seen Running counts in neither figure's values.
    bound = {"hollow-0-1": t - 2.0, "b": 100.5, "c": 101.0}
    out = pod_start.summarize(bound, {"hollow-0-1": t - 0.5, "b": 102.0}, seen)
    assert out["kubelet_ms"] == {"count": 1, "p50": 2062.4, "p90": 2062.4, "max": 2062.4}
    assert out["watch_ms"] == {"count": 2, "p50": 1500.0, "p90": 1500.0, "max": 1500.0}
    assert pod_start.summarize(bound, {}, {})["watch_ms"]["p50"] is None


def test_kubelet_log_errors_counted_per_line():
    import pod_start
    logs = ['E1129 08:06:05.626391 29471 nestedpendingoperations.go:348] Operation failed. '
            'Error: MountVolume.SetUp failed for volume "kube-api-access-x" : failed to sync '
            'configmap cache: timed out waiting for the condition\n'
            'I1129 08:03:09 kubelet.go:1] SyncLoop ADD\n',
            'E1129 08:05:12 status_manager.go:1164] "Failed to get status for pod" err="pods '
            'is forbidden"\nE1129 08:06:12 x.go:1] failed to sync configmap cache: timed out\n']
    counts = pod_start.count_log_errors(logs)
    assert (counts["configmap_sync"], counts["mount_failed"], counts["status_get"]) == (2, 1, 1)
    assert sum(counts.values()) == 4 and set(counts) == set(pod_start.KUBELET_ERRORS)


def test_hollow_pod_start_rows():
    res = make_results()
    for label, p50 in (("direct", 1000.0), ("kube-fanout", 1250.0)):
        res["modes"][label]["hollow"] = {
            "nodes": 1, "ready": 1, "pods": 3, "pods_running": 3,
            "pod_start": {"kubelet_ms": {"count": 3, "p50": p50, "p90": 1900.4, "max": 2100.0},
                          "watch_ms": {"count": 3, "p50": 900.0, "p90": 1800.0, "max": 2000.0}},
            "kubelet_log_errors": {"configmap_sync": 4, "secret_sync": 0, "mount_failed": 4,
                                   "status_get": 2, "status_update": 0, "node_status": 1,
                                   "sync_pod": 0}}
    rows = rows_by_label(res)
    cells, ratio = rows["hollow pods bound→Running p50 / p90 / max (ms, kubelet)"]
    assert cells == ["1,000 / 1,900 / 2,100", "1,250 / 1,900 / 2,100"] and ratio == "0.8×"
    assert rows["hollow pods bound→Running p50 / p90 / max (ms, harness watch)"][0] == [
        "900 / 1,800 / 2,000"] * 2
    assert rows["hollow kubelet log: configmap / secret sync, mount, status get / update, node, "
                "sync pod"][0] == ["4 / 0 / 4 / 2 / 0 / 1 / 0"] * 2
    report.render_table(res)
    report.render_html(res)


def test_client_go_command_and_connect_cost():
    import client_go
    s = harness.resolve_scenario("base", {"kubelets": 50, "kube_proxies": 0, "pollers": 0})
    env = {"KF_APISERVER_URL": "https://127.0.0.1:1", "KF_CA_FILE": "/ca.crt",
           "KF_CA_KEY_FILE": "/ca.key", "KF_ADMIN_TOKEN": "t"}
    cmd = client_go.command("/fleet", s, 1000, 10, "https://127.0.0.1:2", env, "/o.json")
    assert "--server=https://127.0.0.1:2" in cmd and "--apiserver=https://127.0.0.1:1" in cmd
    assert "--agents=1000" in cmd and "--nodes=50" in cmd and "--ramp=10" in cmd
    assert "--configmap=lcm-0" in cmd  # base: 2 configmaps per kubelet, mounted by its pods
    assert f"--duration={50 / 200 + 30 + 5:g}" in cmd
    s0 = dict(s, configmaps_per_kubelet=0)
    assert not any(a.startswith("--configmap") for a in client_go.command(
        "/f", s0, 1, 1, "u", env, "o"))
    # 1 CPU s per sample before t=5; the ramp (5..15) plus SETTLE_S costs 2 CPU s per second;
    # RSS 100 MiB before, 110 after.
    raw = [(t, t if t <= 5 else 5 + 2 * (t - 5), 100 if t <= 5 else 110) for t in range(30)]
    c = client_go.connect_cost(raw, 5, 10, 1000)
    assert c["cpu_ms_per_agent"] == pytest.approx(2 * (10 + client_go.SETTLE_S) * 1000 / 1000)
    assert c["rss_kib_per_agent"] == pytest.approx(10 * 1024 / 1000, abs=0.1)
    assert client_go.connect_cost(raw, 29, 10, 1000)["cpu_ms_per_agent"] is None


def test_client_go_rows_only_with_a_fleet():
    assert not any(k.startswith("client-go") for k in rows_by_label(make_results()))
    res = make_results()
    for label, server, cpu in (("direct", "kube-apiserver", 12.0), ("kube-fanout", "kube-fanout",
                                                                     4.0)):
        res["modes"][label]["client_go"] = {
            "agents": 100, "started": 100, "synced": 99 if label == "direct" else 100,
            "sync_ms": {"p50": 120.0, "p99": 900.0}, "failed_requests": 7,
            "failures": {"handshake": 3, "eof_reset": 2, "timeout": 2}, "status_429": 5,
            "list_fallbacks": {"pods": 4}, "watch_errors": {"eof_reset": 1},
            "events": {"pods": 10, "nodes": 5}, "latency_ms": {"pods": {"p50": 3.0, "p99": 40.0,
                                                                         "max": 80.0}},
            "connect_cost": {server: {"cpu_ms_per_agent": cpu, "rss_kib_per_agent": 90.0}}}
    rows = rows_by_label(res)
    assert rows["client-go agents: synced / started (sync ms p50 / p99)"][0] == [
        "99 / 100 (120 / 900)", "100 / 100 (120 / 900)"]
    assert rows["client-go requests without answer: handshake / EOF-reset / other"][0] == [
        "3 / 2 / 2", "3 / 2 / 2"]
    assert rows["client-go 429s / LISTs (WatchList fell back) / watch errors"][0] == [
        "5 / 4 / 1", "5 / 4 / 1"]
    cost = rows["client-go connect: server CPU ms / RSS KiB per agent"]
    assert cost[0] == ["12.00 / 90.0", "4.00 / 90.0"] and cost[1] == "3×"
    assert rows["client-go pods latency ms p50 / p99 / max"][0] == ["3.0 / 40.0 / 80.0"] * 2
    report.render_table(res)
    report.render_html(res)
