"""Real client-go informers, as kubelet and kube-proxy run them, through kube-fanout.

tests/clients/informer (Go, client-go v0.36.3) runs three shared informers for one node: its
pods (fieldSelector=spec.nodeName), its Node (fieldSelector=metadata.name) and kube-proxy's
EndpointSlices (labelSelector=!service.kubernetes.io/headless,
!service.kubernetes.io/service-proxy-name), and prints every handler call. Each test runs it
twice at once, against the apiserver and against kube-fanout, with WatchList on or off (client-go
reads KUBE_FEATURE_WatchListClient), changes pods, EndpointSlices and Nodes, and compares what
the two informers saw.

The program is built once per version of its sources (tests/clients/build-informer) into
${KUBE_FANOUT_CACHE:-~/.cache/kube-fanout}/bin/informer-<hash>/informer (never into the tree).
"""
import json
import os
import pathlib
import signal
import subprocess
import threading
import time

import pytest

from kfrig import metric_values

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "tests/clients/build-informer"
RUN_LIMIT_S = 45        # --duration: the informer stops by itself after this at the latest
SYNC_TIMEOUT_S = 15
EVENTS_TIMEOUT_S = 15
SETTLE_S = 1.0          # after the expected events, time for unexpected extra ones to show
HEADLESS = "service.kubernetes.io/headless"
PROXY_NAME = "service.kubernetes.io/service-proxy-name"
SERVICE_NAME = "kubernetes.io/service-name"


@pytest.fixture(scope="session")
def informer_binary():
    """The informer program, built by tests/clients/build-informer or reused from its cache."""
    build = subprocess.run([str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=1800)
    if build.returncode != 0:
        pytest.fail(f"{BUILD_SCRIPT} failed:\n{build.stdout}{build.stderr}")
    if build.stderr:
        print(build.stderr.strip())
    return pathlib.Path(build.stdout.strip())


class InformerRun:
    """One informer process; its stdout lines are collected as they come."""

    def __init__(self, binary, cluster, server, node, watchlist, user_agent, log_dir,
                 http1=False, extra_args=()):
        self.user_agent = user_agent
        self.lines = []
        self.stderr_path = log_dir / f"{user_agent.replace('/', '_')}.stderr"
        self._lock = threading.Lock()
        env = {**os.environ, "KUBE_FEATURE_WatchListClient": "true" if watchlist else "false"}
        self.process = subprocess.Popen(
            [str(binary), f"--server={server}", f"--ca-file={cluster.env['KF_CA_FILE']}",
             f"--token={cluster.token('admin')}", f"--node={node}",
             f"--duration={RUN_LIMIT_S}", f"--user-agent={user_agent}"]
            + (["--http1.1"] if http1 else []) + list(extra_args),
            stdout=subprocess.PIPE, stderr=open(self.stderr_path, "wb"), text=True, env=env)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.process.stdout:
            with self._lock:
                self.lines.append(json.loads(line))

    def snapshot(self):
        with self._lock:
            return list(self.lines)

    def events(self, informer=None):
        return [l for l in self.snapshot() if "informer" in l and
                (informer is None or l["informer"] == informer)]

    def synced(self):
        return any(l.get("synced") for l in self.snapshot())

    def first(self, key):
        return next((l for l in self.snapshot() if key in l), None)

    def stop(self):
        """SIGTERM (the program ends as at --duration); returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self._reader.join(timeout=5)
        return code

    def stderr_tail(self, n=20):
        return "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-n:])


def wait_for(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


class Api:
    """Writes to the apiserver for the test's scenario (JSON over HTTP, admin)."""

    def __init__(self, cluster):
        self.cluster = cluster

    def send(self, method, path, obj=None, content_type="application/json", expect=(200, 201)):
        body = json.dumps(obj).encode() if obj is not None else None
        resp = self.cluster.request(method, path, body=body,
                                    headers={"Content-Type": content_type})
        assert resp.status in expect, (method, path, resp.status, resp.body[:500])
        return json.loads(resp.body) if resp.body else None

    def create(self, path, obj):
        return self.send("POST", path, obj)

    def patch(self, path, patch):
        return self.send("PATCH", path, patch, "application/merge-patch+json")

    def delete(self, path, expect=(200, 202)):
        return self.send("DELETE", path, expect=expect)


def pod(ns, name, node):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}}


def node_object(name):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}


def slice_object(ns, name, service, extra_labels=None):
    labels = {SERVICE_NAME: service, **(extra_labels or {})}
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}],
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}


def names_and_rvs(cluster, path, port=None):
    resp = cluster.request("GET", path, port=port)
    assert resp.status == 200, (path, resp.body[:300])
    return sorted((o["metadata"].get("namespace", ""), o["metadata"]["name"],
                   o["metadata"]["resourceVersion"]) for o in json.loads(resp.body)["items"])


def wait_until_caches_have(cluster, proxy, paths):
    """Until RV=0 lists from the apiserver's watch cache and kube-fanout's cache both show the
    current (consistent-read) state, so both informers' initial LISTs start from the same state.
    """
    for path in paths:
        sep = "&" if "?" in path else "?"
        truth = names_and_rvs(cluster, path)
        assert wait_for(lambda: names_and_rvs(cluster, f"{path}{sep}resourceVersion=0") == truth
                        and names_and_rvs(cluster, f"{path}{sep}resourceVersion=0",
                                          port=proxy.secure_port) == truth, 10), path


def split(events):
    """(initial adds as a sorted list, later handler calls in order), each (op, key, rv).

    The initial adds' order is not part of client-go's contract (a WatchList's initial events
    are replayed from a map), so they are compared as sets.
    """
    initial = sorted((e["op"], e["key"], e["rv"]) for e in events if e.get("initial"))
    later = [(e["op"], e["key"], e["rv"]) for e in events if not e.get("initial")]
    return initial, later


def proxy_lines_for(proxy, user_agent):
    out = []
    for line in proxy.log_lines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("user_agent") == user_agent:
            out.append(entry)
    return out


def http2_cache_reads(cluster, proxy):
    """Requests kube-fanout has served from its cache over HTTP/2 so far."""
    text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
    return metric_values(text, "kube_fanout_http2_requests_total")['{route="cache"}']


def report(runs, proxy):
    """Everything needed to diagnose a difference: both runs and kube-fanout's log for its run."""
    parts = []
    for name, run in runs.items():
        parts.append(f"--- {name} ({run.user_agent}) stdout:")
        parts += [json.dumps(l) for l in run.snapshot()]
        parts.append(f"--- {name} stderr (tail):\n{run.stderr_tail()}")
    parts.append("--- kube-fanout log lines of the cached run:")
    parts += [json.dumps(l) for l in proxy_lines_for(proxy, runs["cached"].user_agent)]
    return "\n".join(parts)


@pytest.mark.parametrize("proto", ["HTTP/2.0", "HTTP/1.1"], ids=["h2", "http1.1"])
@pytest.mark.parametrize("watchlist", [True, False], ids=["watchlist", "list-then-watch"])
def test_kubelet_and_kube_proxy_informers_see_the_same_events_through_kube_fanout(
        cluster, cached_proxy, namespace, informer_binary, tmp_path, watchlist, proto):
    ns = namespace
    node, other = f"{ns}-node", f"{ns}-other"
    api = Api(cluster)
    pods = f"/api/v1/namespaces/{ns}/pods"
    slices = f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices"
    for name in (node, other):
        api.create("/api/v1/nodes", node_object(name))
    try:
        # The initial state: one pod on each node; three slices, of which kube-proxy's selector
        # keeps only the first.
        api.create(pods, pod(ns, "pre", node))
        api.create(pods, pod(ns, "pre-other", other))
        api.create(slices, slice_object(ns, "svc-a-pre", "svc-a"))
        api.create(slices, slice_object(ns, "svc-h-pre", "svc-h", {HEADLESS: ""}))
        api.create(slices, slice_object(ns, "svc-p-pre", "svc-p", {PROXY_NAME: "other-proxy"}))
        wait_until_caches_have(cluster, cached_proxy, [
            f"/api/v1/pods?fieldSelector=spec.nodeName%3D{node}",
            f"/api/v1/nodes?fieldSelector=metadata.name%3D{node}",
            slices])

        mode = "watchlist" if watchlist else "list"
        http1 = proto == "HTTP/1.1"
        h2_cache_reads = http2_cache_reads(cluster, cached_proxy)
        runs = {name: InformerRun(informer_binary, cluster, server, node, watchlist,
                                  f"kf-informer/{ns}/{mode}/{proto}/{name}", tmp_path, http1)
                for name, server in (("direct", cluster.url), ("cached", cached_proxy.server))}
        try:
            synced = wait_for(lambda: all(r.synced() for r in runs.values()), SYNC_TIMEOUT_S)
            assert synced, "an informer did not sync:\n" + report(runs, cached_proxy)
            expected = scenario(api, ns, node, other, pods, slices)
            wait_for(lambda: all(
                len([e for e in r.events() if relevant(e, ns, node)]) >= len(expected)
                for r in runs.values()), EVENTS_TIMEOUT_S)
            time.sleep(SETTLE_S)
        finally:
            codes = {name: run.stop() for name, run in runs.items()}
        assert codes == {"direct": 0, "cached": 0}, f"exit codes {codes}:\n" + report(
            runs, cached_proxy)

        def poke():
            """Two events for each of the cached run's watches (to end any still open)."""
            for i in range(2):
                api.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {"kf-poke": str(i)}}})
                api.patch(f"{pods}/pre", {"metadata": {"labels": {"kf-poke": str(i)}}})
                api.patch(f"{slices}/svc-p-pre", {"metadata": {"labels": {"kf-poke": str(i)}}})

        check(runs, cached_proxy, ns, node, other, expected, watchlist, poke)
        # client-go negotiated the protocol by ALPN, with the apiserver and with kube-fanout
        # alike; over HTTP/2 kube-fanout's metrics count the streams served from its cache.
        for name, run in runs.items():
            protos = {r.get("proto") for r in run.first("requests")["log"] if r["status"]}
            assert protos == {proto}, f"{name}: {protos}\n" + report(runs, cached_proxy)
        served = http2_cache_reads(cluster, cached_proxy) - h2_cache_reads
        assert (served >= 3) if not http1 else (served == 0), served
    finally:
        for name in (node, other):
            cluster.request("DELETE", f"/api/v1/nodes/{name}")


def scenario(api, ns, node, other, pods, slices):
    """Changes pods, slices and nodes; returns the (informer, op, key) calls expected after the
    initial sync for this test's objects, in order per informer."""
    expect = []
    # Pods: kubelet only sees its node's. A graceful delete is an update (deletionTimestamp);
    # with no kubelet to finish it, a force delete follows: the apiserver first shortens the
    # grace period to 0 (an update), then removes the pod (the DELETE).
    api.create(pods, pod(ns, "p1", node))
    expect.append(("pods", "add", f"{ns}/p1"))
    api.create(pods, pod(ns, "q1", other))
    api.patch(f"{pods}/p1", {"metadata": {"labels": {"app": "web"}}})
    expect.append(("pods", "update", f"{ns}/p1"))
    api.patch(f"{pods}/q1", {"metadata": {"labels": {"app": "web"}}})
    api.patch(f"{pods}/pre/status", {"status": {"phase": "Running"}})  # as kubelet reports
    expect.append(("pods", "update", f"{ns}/pre"))
    api.patch(f"{pods}/pre-other/status", {"status": {"phase": "Running"}})
    api.delete(f"{pods}/p1")
    expect.append(("pods", "update", f"{ns}/p1"))
    api.delete(f"{pods}/p1?gracePeriodSeconds=0")
    expect.append(("pods", "update", f"{ns}/p1"))
    expect.append(("pods", "delete", f"{ns}/p1"))
    api.delete(f"{pods}/q1?gracePeriodSeconds=0")
    # EndpointSlices: kube-proxy's selector drops headless and other proxies' slices; a slice
    # that gains such a label leaves the selection (DELETE), one that loses it enters (ADD).
    api.create(slices, slice_object(ns, "svc-b-1", "svc-b"))
    expect.append(("endpointslices", "add", f"{ns}/svc-b-1"))
    api.patch(f"{slices}/svc-b-1", {"endpoints": [{"addresses": ["10.0.0.1"]},
                                                 {"addresses": ["10.0.0.2"]}]})
    expect.append(("endpointslices", "update", f"{ns}/svc-b-1"))
    api.patch(f"{slices}/svc-b-1", {"metadata": {"labels": {HEADLESS: ""}}})
    expect.append(("endpointslices", "delete", f"{ns}/svc-b-1"))
    api.patch(f"{slices}/svc-b-1", {"endpoints": [{"addresses": ["10.0.0.3"]}]})  # unseen
    api.patch(f"{slices}/svc-b-1", {"metadata": {"labels": {HEADLESS: None}}})
    expect.append(("endpointslices", "add", f"{ns}/svc-b-1"))
    api.patch(f"{slices}/svc-p-pre", {"metadata": {"labels": {PROXY_NAME: None}}})
    expect.append(("endpointslices", "add", f"{ns}/svc-p-pre"))
    api.patch(f"{slices}/svc-h-pre", {"endpoints": [{"addresses": ["10.0.0.9"]}]})  # unseen
    api.delete(f"{slices}/svc-a-pre")
    expect.append(("endpointslices", "delete", f"{ns}/svc-a-pre"))
    api.delete(f"{slices}/svc-h-pre")
    api.patch(f"{slices}/svc-b-1", {"metadata": {"labels": {SERVICE_NAME: "svc-b2"}}})
    expect.append(("endpointslices", "update", f"{ns}/svc-b-1"))
    api.delete(f"{slices}/svc-b-1")
    expect.append(("endpointslices", "delete", f"{ns}/svc-b-1"))
    # Nodes: each agent watches only its own.
    api.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {"kf-test": "1"}}})
    expect.append(("node", "update", node))
    api.patch(f"/api/v1/nodes/{other}", {"metadata": {"labels": {"kf-test": "1"}}})
    api.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {"kf-test": None}}})
    expect.append(("node", "update", node))
    return expect


def relevant(event, ns, node):
    """A handler call about this test's own objects, made after the initial sync."""
    return not event.get("initial") and (event["key"].startswith(f"{ns}/") or
                                         event["key"] == node)


def check(runs, proxy, ns, node, other, expected, watchlist, poke):
    direct, cached = runs["direct"], runs["cached"]
    details = lambda: report(runs, proxy)

    # The scenario itself, as the apiserver shows it (validates the test, not kube-fanout).
    got = [(e["informer"], e["op"], e["key"]) for e in direct.events() if relevant(e, ns, node)]
    for informer in ("pods", "node", "endpointslices"):
        assert [g for g in got if g[0] == informer] == [x for x in expected if x[0] == informer], \
            f"direct run: unexpected {informer} calls:\n{details()}"
    assert (("pods", "add", f"{ns}/pre", True) in
            [(e["informer"], e["op"], e["key"], e.get("initial", False))
             for e in direct.events()]), details()

    # Same handler calls, same resourceVersions, per informer.
    for informer in ("pods", "node", "endpointslices"):
        d_initial, d_later = split(direct.events(informer))
        c_initial, c_later = split(cached.events(informer))
        assert c_initial == d_initial, (
            f"{informer}: initial state differs through kube-fanout\n"
            f"direct only: {sorted(set(d_initial) - set(c_initial))}\n"
            f"cached only: {sorted(set(c_initial) - set(d_initial))}\n{details()}")
        assert c_later == d_later, (
            f"{informer}: handler calls after sync differ through kube-fanout\n"
            f"direct: {d_later}\ncached: {c_later}\n{details()}")

    # Nothing of the other node, nor of slices kube-proxy must not see, reached either run.
    for run in (direct, cached):
        keys = {(e["informer"], e["key"]) for e in run.events()}
        leaked = {k for k in keys if k[1] in (f"{ns}/pre-other", f"{ns}/q1", other,
                                              f"{ns}/svc-h-pre")}
        leaked |= {k for k in keys if k[0] == "node" and k[1] != node}
        assert not leaked, f"{run.user_agent} saw {sorted(leaked)}:\n{details()}"

    # How the initial state came: the same way in both runs.
    d_sync, c_sync = (r.first("synced")["initial_sync"] for r in (direct, cached))
    want = "watchlist" if watchlist else "list"
    assert d_sync == {"pods": want, "nodes": want, "endpointslices": want}, details()
    assert c_sync == d_sync, f"initial sync through kube-fanout: {c_sync}, direct: {d_sync}\n" \
        + details()

    # The cached run watched (not only listed), and kube-fanout served its reads from the cache.
    requests = cached.first("requests")["log"]
    reads = [r for r in requests if r["kind"] in ("list", "watch", "watchlist")]
    assert any(r["kind"] in ("watch", "watchlist") and r["status"] == 200 for r in reads), \
        details()
    assert all(r["status"] == 200 for r in reads), details()

    def logged():
        out = {}
        for entry in proxy_lines_for(proxy, cached.user_agent):
            out.setdefault(entry["uri"], []).append(entry)
        return out
    # kube-fanout logs a request when it ends; the informer's exit has just ended its watches.
    wait_for(lambda: all(r["uri"] in logged() for r in reads), 5)
    problems = []
    never_ended = [r["uri"] for r in reads if r["uri"] not in logged()]
    if never_ended:
        # For the report: two more events on each watched object make a write to the gone
        # client fail, which ends such a watch and logs its route.
        poke()
        wait_for(lambda: all(r["uri"] in logged() for r in reads), 5)
        problems.append(
            "still open in kube-fanout 5 s after the informer exited (a watch whose client is "
            "gone should end, and its upstream watch with it); ended after two more events on "
            f"the watched objects: {[(u, u in logged()) for u in never_ended]}")
    entries = logged()
    not_cached = [(r["uri"], [e["route"] for e in entries.get(r["uri"], [])]) for r in reads
                  if {e["route"] for e in entries.get(r["uri"], [])} != {"cache"}]
    # A known, documented limit (README, "What passes through anyway"): an RV-less WatchList is
    # a consistent read, and a resource with no recent events cannot show within the catch-up
    # timeout that its cache has reached the apiserver's current resourceVersion, so the
    # apiserver answers it. Every other read must come from the cache.
    consistent_watchlists = [u for u, _ in not_cached
                             if "sendInitialEvents=true" in u and "resourceVersion=" not in u]
    not_cached = [(u, routes) for u, routes in not_cached if u not in consistent_watchlists]
    if not_cached:
        problems.append(f"not served from kube-fanout's cache (uri, routes): {not_cached}")
    assert not problems, "\n".join(problems) + "\n" + details()
