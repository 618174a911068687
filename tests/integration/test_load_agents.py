"""The load harness's simulated node agents (tests/load: kf_load), in every wire form, through
kube-fanout.

kf_load makes the figures of docs/load.md. Here a small scenario of it runs on the real control
plane against kube-fanout's TLS listener in each of the four wire forms (JSON or protobuf, HTTP/1.1
or HTTP/2), and the test checks that the churn happened and reached the agents, that every watch
stream got every event once and in order, and how many connections the agents held: one per
watch over HTTP/1.1, one per agent over HTTP/2 (all of a node's streams multiplexed, as
client-go's transport does). kube-fanout's own counters must show the HTTP/2 requests and, for
protobuf, the cache's protobuf answers.
"""
import json
import os
import pathlib
import subprocess
import time

import pytest

from kfrig import free_port, metric_values, scaled

ROOT = pathlib.Path(__file__).resolve().parents[2]
KF_LOAD = ROOT / "build/tests/load/kf_load"
KUBELETS, PROXIES = 12, 2
CONFIGMAPS = 2
STREAMS = KUBELETS * (2 + CONFIGMAPS) + 2 * PROXIES


def counter(proxy, cluster, name):
    text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
    return sum(metric_values(text, name).values())


def counter_rise(proxy, cluster, name, before, expected, timeout=10):
    """How much `name` rose from `before`, once it reached `expected` or `timeout` (scaled)
    passed. Both counters are added to when a request's answer ends, and a watch's ends when
    kube-fanout has seen its stream or connection closed and the watch has unwound: just after
    kf_load exits, not before (under ThreadSanitizer an HTTP/2 run read 96 of its 104 at once)."""
    start = time.monotonic()
    first = None
    while True:
        rise = counter(proxy, cluster, name) - before
        first = rise if first is None else first
        if rise >= expected or time.monotonic() > start + scaled(timeout):
            print(f"{name}: +{first:.0f} when kf_load exited, +{rise:.0f} "
                  f"{time.monotonic() - start:.2f} s later")
            return rise
        time.sleep(0.1)


@pytest.mark.parametrize("wire,http2", [("json", False), ("protobuf", False), ("json", True),
                                        ("protobuf", True)],
                         ids=["json-http1.1", "protobuf-http1.1", "json-h2", "protobuf-h2"])
def test_agents_get_every_event_in_each_wire_form(cluster, cached_proxy, tmp_path, wire, http2):
    assert KF_LOAD.is_file(), f"{KF_LOAD} is not built (cmake --build --preset ci)"
    h2_before = counter(cached_proxy, cluster, "kube_fanout_http2_requests_total")
    pb_before = counter(cached_proxy, cluster, "kube_fanout_cache_protobuf_requests_total")
    out = tmp_path / "result.json"
    cmd = [str(KF_LOAD), f"--target={cached_proxy.server}", f"--apiserver={cluster.url}",
           f"--ca-file={cluster.env['KF_CA_FILE']}", "--token-env=KF_ADMIN_TOKEN",
           f"--label={wire}-{'h2' if http2 else 'http1.1'}",
           f"--namespace=kf-load-it-{free_port()}", f"--kubelets={KUBELETS}",
           f"--kube-proxies={PROXIES}", "--pollers=0", f"--configmaps-per-kubelet={CONFIGMAPS}",
           "--ramp-rate=100", "--duration=6", "--drain=3", "--pod-rate=6", "--node-rate=2",
           "--slice-rate=2", "--event-rate=0", "--threads=1", f"--wire={wire}", f"--out={out}"]
    if http2:
        cmd.append("--http2")
    run = subprocess.run(cmd, env={**os.environ, "KF_ADMIN_TOKEN": cluster.token("admin")},
                         capture_output=True, text=True, timeout=scaled(180))
    assert run.returncode == 0, run.stderr[-3000:]
    r = json.loads(out.read_text())

    # The setup happened: the churn wrote, and the agents received events of every kind.
    writes = r["churn"]["writes"]
    assert writes["pods"] >= 20 and writes["nodes"] >= 5 and writes["endpointslices"] >= 5, writes
    assert r["churn"]["failed"] == 0
    for kind in ("pods", "nodes", "endpointslices"):
        assert r["latency_us"][kind]["count"] > 0, (kind, r["latency_us"][kind])
    c = r["completeness"]
    assert c["watch_streams"] == STREAMS and c["checked"] == STREAMS, c
    assert c["complete"] == STREAMS, c
    assert (c["missing_events"], c["out_of_order"], c["duplicates"]) == (0, 0, 0), c
    assert c["relisted_after_410"] == 0, c
    assert r["requests"]["errors"] == 0 and r["connections"]["failed"] == 0, r["requests"]

    # One connection per watch over HTTP/1.1; one per agent over HTTP/2.
    peak = r["connections"]["peak_open"]
    if http2:
        assert peak == KUBELETS + PROXIES, r["connections"]
        # Every LIST and every WATCH.
        assert counter_rise(cached_proxy, cluster, "kube_fanout_http2_requests_total", h2_before,
                            2 * STREAMS) >= 2 * STREAMS
    else:
        assert peak == STREAMS, r["connections"]
    if wire == "protobuf":
        assert counter_rise(cached_proxy, cluster, "kube_fanout_cache_protobuf_requests_total",
                            pb_before, 2 * STREAMS) >= 2 * STREAMS
