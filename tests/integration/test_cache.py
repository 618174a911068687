"""kube-fanout serving LIST, GET and WATCH from its cache, compared with the real apiserver.

Each case sends the same request to the apiserver and to kube-fanout and compares status and
body bytes (headers: see ALLOWED_HEADER_DIFFERENCES), and checks from kube-fanout's request log
that the answer really came from the cache.
"""
import itertools
import json
import socket
import threading
import time

import pytest

from kfrig import (Proxy, apiserver_watches, kubectl_watch_listed, metric_values, open_watch,
                   read_events, routed, same_snapshot, scaled, wait_until)

# Headers only the apiserver sends (per-request audit and priority-and-fairness identifiers).
ALLOWED_HEADER_DIFFERENCES = {"audit-id", "x-kubernetes-pf-flowschema-uid",
                              "x-kubernetes-pf-prioritylevel-uid", "date"}

_case = itertools.count()


def compare(cluster, proxy, path, identity="admin", expect_route="cache"):
    marker = f"kfcase={next(_case)}"
    sep = "&" if "?" in path else "?"
    marked = f"{path}{sep}{marker}"
    headers = {"User-Agent": "kube-fanout-tests"}
    direct, cached = same_snapshot(
        cluster, proxy, lambda port: cluster.request("GET", marked, identity=identity,
                                                     headers=headers, port=port), path)
    assert cached.status == direct.status, (path, cached.body[:300], direct.body[:300])
    assert cached.body == direct.body, path
    strip = lambda h: {k: v for k, v in h.items()
                       if k not in ALLOWED_HEADER_DIFFERENCES}
    assert strip(cached.headers) == strip(direct.headers), path
    assert routed(proxy, marker) == expect_route, path
    return cached


@pytest.fixture(scope="module")
def objects(cluster, namespace_factory):
    """Objects to list: pods bound to two nodes and unbound, with labels; configmaps; a node."""
    ns = namespace_factory()
    k = lambda *a, **kw: cluster.kubectl(*a, **kw)
    manifests = []
    for i, (node, app, tier) in enumerate([("node-a", "web", "front"), ("node-a", "db", "back"),
                                           ("node-b", "web", "back"), ("", "web", None)]):
        labels = {"app": app}
        if tier:
            labels["tier"] = tier
        spec = {"containers": [{"name": "c", "image": "busybox"}]}
        if node:
            spec["nodeName"] = node
        manifests.append({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": f"p{i}", "namespace": ns, "labels": labels},
                          "spec": spec})
    for i in range(3):
        manifests.append({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": f"cm{i}", "namespace": ns,
                                       "labels": {"idx": str(i)}}, "data": {"i": str(i)}})
    manifests.append({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": "node-a", "labels": {"kubernetes.io/hostname": "node-a"}}})
    k("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                            "items": manifests}))
    return ns


@pytest.fixture(scope="module")
def namespace_factory(cluster):
    made = []

    def make():
        name = f"kf-cache-{len(made)}-{int(time.time() * 1000) % 100000}"
        cluster.kubectl("create", "namespace", name)
        cluster.kubectl("create", "serviceaccount", "default", "-n", name)
        made.append(name)
        return name

    yield make
    for name in made:
        cluster.kubectl("delete", "namespace", name, "--wait=false")


def test_list_from_cache_matches_the_apiserver_byte_for_byte(cluster, cached_proxy, objects):
    ns = objects
    for path in [
        f"/api/v1/namespaces/{ns}/pods?resourceVersion=0",
        f"/api/v1/namespaces/{ns}/configmaps?resourceVersion=0",
        f"/api/v1/namespaces/{ns}/pods?resourceVersion=0&limit=500",  # limit ignored at RV 0
        "/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3Dnode-a",
        "/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3D",
        f"/api/v1/namespaces/{ns}/pods?resourceVersion=0&labelSelector=app%3Dweb",
        f"/api/v1/namespaces/{ns}/pods?resourceVersion=0&labelSelector=app%3Dweb%2Ctier",
        f"/api/v1/namespaces/{ns}/pods?resourceVersion=0&labelSelector=!tier",
        f"/api/v1/namespaces/{ns}/pods?resourceVersion=0&labelSelector=tier%20in%20(front%2Cx)",
        f"/api/v1/namespaces/{ns}/pods?resourceVersion=0&labelSelector=tier%20notin%20(front)",
        f"/api/v1/namespaces/{ns}/pods?resourceVersion=0&labelSelector=tier!%3Dback",
        f"/api/v1/namespaces/{ns}/pods?resourceVersion=0&fieldSelector=metadata.name%3Dp1",
        f"/api/v1/namespaces/{ns}/pods?resourceVersion=0&fieldSelector=status.phase!%3DRunning",
        f"/api/v1/namespaces/{ns}/configmaps?resourceVersion=0&labelSelector=idx%3E0",
        "/api/v1/namespaces/no-such-namespace/pods?resourceVersion=0",  # items: []
        "/api/v1/nodes?resourceVersion=0",
        "/api/v1/namespaces?resourceVersion=0",
        "/apis/discovery.k8s.io/v1/endpointslices?resourceVersion=0",
    ]:
        compare(cluster, cached_proxy, path)


def test_get_from_cache_matches_the_apiserver(cluster, cached_proxy, objects):
    ns = objects
    for path in [f"/api/v1/namespaces/{ns}/pods/p0?resourceVersion=0",
                 f"/api/v1/namespaces/{ns}/configmaps/cm1?resourceVersion=0",
                 # Not there: the cache's NotFound once it is proven current (no RV); an RV=0
                 # GET of an object not cached is the apiserver's, whose watch cache is
                 # usually ahead (below).
                 f"/api/v1/namespaces/{ns}/configmaps/missing",
                 "/api/v1/nodes/node-a?resourceVersion=0",
                 "/api/v1/nodes/missing",
                 "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/x"]:
        compare(cluster, cached_proxy, path)
    for path in [f"/api/v1/namespaces/{ns}/configmaps/missing?resourceVersion=0",
                 "/api/v1/nodes/missing?resourceVersion=0"]:
        compare(cluster, cached_proxy, path, expect_route="passthrough")


def test_consistent_reads_are_served_from_the_cache_and_never_stale(cluster, cached_proxy,
                                                                   objects):
    # RV "" must reflect every write made before the request: kube-fanout probes the upstream's
    # RV and waits until its cache has it. Configmaps here are quiet while secrets change (the
    # global RV moves past the configmaps cache), so the cache must prove it is current.
    ns = objects
    metrics = lambda: cluster.request("GET", "/metrics", port=cached_proxy.port, tls=False
                                      ).body.decode()
    before = metric_values(metrics(), "kube_fanout_upstream_rv_probes_total").get(
        '{resource="configmaps"}', 0)
    headers = {"User-Agent": "kube-fanout-tests"}
    for i in range(4):
        cluster.kubectl("create", "configmap", f"fresh{i}", "-n", ns)
        marker = f"kffresh={i}"
        got = cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps/fresh{i}?{marker}",
                              port=cached_proxy.secure_port, headers=headers)
        assert got.status == 200
        assert routed(cached_proxy, marker) == "cache"
        cluster.kubectl("create", "secret", "generic", f"other{i}", "-n", ns)
        marker = f"kffresh=list{i}"
        listed = cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps?{marker}",
                                 port=cached_proxy.secure_port, headers=headers)
        assert routed(cached_proxy, marker) == "cache"
        items = json.loads(listed.body)["items"]
        assert f"fresh{i}" in [o["metadata"]["name"] for o in items]
        # At least as new as the apiserver's answer made after it.
        direct = json.loads(cluster.request("GET", f"/api/v1/namespaces/{ns}/secrets").body)
        assert int(json.loads(listed.body)["metadata"]["resourceVersion"]) >= max(
            int(s["metadata"]["resourceVersion"]) for s in direct["items"]
            if s["metadata"]["name"] == f"other{i}")
    after = metric_values(metrics(), "kube_fanout_upstream_rv_probes_total")[
        '{resource="configmaps"}']
    assert after > before  # The quiet cache had to prove it was current.


def test_one_consistent_read_per_interval_goes_to_the_apiserver_at_once(cluster, namespace,
                                                                         tmp_path):
    """--consistent-read-passthrough-interval (default 1s): proving a quiet cache current waits
    for the apiserver's bookmark timer (1-2 s), so the first consistent LIST or GET of a
    resource in each interval goes to the apiserver (as fast as direct); the reads right
    after it are proven and served from the cache; reads at an RV are never sent."""
    ns = namespace
    cluster.kubectl("create", "configmap", "cr0", "-n", ns, "--from-literal=a=0")
    proxy = Proxy.start(cluster, tmp_path, extra_args=[
        "--cache-resources=configmaps", "--consistent-read-passthrough-interval=2s",
        "--consistent-get-passthrough-qps=0"])
    headers = {"User-Agent": "kube-fanout-tests"}
    path = f"/api/v1/namespaces/{ns}/configmaps"

    def read(target, marker):
        sep = "&" if "?" in target else "?"
        res = cluster.request("GET", f"{target}{sep}{marker}", port=proxy.secure_port,
                              headers=headers)
        assert res.status == 200, res.body[:300]
        return routed(proxy, marker), res

    try:
        # Cached at RV 0 (never sent): the cache is up.
        route, res = read(f"{path}?resourceVersion=0", "kfcr=warm")
        assert route == "cache"
        assert [o["metadata"]["name"] for o in json.loads(res.body)["items"]] == ["cr0"]
        time.sleep(2.2)  # A fresh interval.
        started = time.monotonic()
        first, res = read(path, "kfcr=first")
        first_ms = (time.monotonic() - started) * 1000
        second, res2 = read(path, "kfcr=second")
        third, _ = read(f"{path}/cr0", "kfcr=get")
        assert (first, second, third) == ("passthrough", "cache", "cache")
        assert json.loads(res.body)["items"] == json.loads(res2.body)["items"]
        time.sleep(2.2)
        fourth, _ = read(f"{path}/cr0", "kfcr=get2")
        paged, _ = read(f"{path}?limit=1", "kfcr=paged")
        assert (fourth, paged) == ("passthrough", "cache")
        counts = metric_values(cluster.request("GET", "/metrics", port=proxy.port, tls=False)
                               .body.decode(), "kube_fanout_consistent_read_passthroughs_total")
        assert counts.get('{resource="configmaps"}') == 2, counts
        print(f"\nconsistent read passed through in {first_ms:.1f} ms")
    finally:
        proxy.stop()


def test_consistent_gets_go_to_the_apiserver_at_once_within_their_budget(cluster, namespace,
                                                                         tmp_path):
    """--consistent-get-passthrough-qps (default 50 a second per resource): a consistent GET
    costs the apiserver one object's read, less than the proof that would serve it from the
    cache when few reads share it, and it then waits for no proof (a kubelet GETs each pod
    before it writes its status, one pod after another). Within the budget such GETs go to the
    apiserver at once, its own answers; past it they are proven and served from the cache."""
    ns = namespace
    cluster.kubectl("create", "configmap", "cg0", "-n", ns, "--from-literal=a=0")
    headers = {"User-Agent": "kube-fanout-tests"}
    path = f"/api/v1/namespaces/{ns}/configmaps"
    direct = cluster.request("GET", f"{path}/cg0", headers=headers)
    assert direct.status == 200, direct.body[:300]

    def get(proxy, marker):
        res = cluster.request("GET", f"{path}/cg0?{marker}", port=proxy.secure_port,
                              headers=headers)
        assert res.status == 200, res.body[:300]
        assert json.loads(res.body) == json.loads(direct.body)
        return routed(proxy, marker)

    def passthroughs(proxy):
        text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
        return metric_values(text, "kube_fanout_consistent_read_passthroughs_total").get(
            '{resource="configmaps"}', 0)

    # The default budget, without the interval's turn: none of these waits for a proof.
    (tmp_path / "default").mkdir()
    (tmp_path / "two").mkdir()
    proxy = Proxy.start(cluster, tmp_path / "default", extra_args=[
        "--cache-resources=configmaps", "--consistent-read-passthrough-interval=0"])
    try:
        # The cache is up: a read at RV 0 is its own (never sent).
        warm = cluster.request("GET", f"{path}?resourceVersion=0&kfcg=warm",
                               port=proxy.secure_port, headers=headers)
        assert warm.status == 200 and routed(proxy, "kfcg=warm") == "cache"
        routes = [get(proxy, f"kfcg=d{i}") for i in range(3)]
        assert routes == ["passthrough"] * 3, routes
        assert passthroughs(proxy) == 3
        # A LIST is no GET: it is proven and served from the cache.
        listed = cluster.request("GET", f"{path}?kfcg=list", port=proxy.secure_port,
                                 headers=headers)
        assert listed.status == 200 and routed(proxy, "kfcg=list") == "cache"
    finally:
        assert proxy.stop() == 0
    # Two a second: the third GET in a row waits for a proof and is served from the cache.
    proxy = Proxy.start(cluster, tmp_path / "two", extra_args=[
        "--cache-resources=configmaps", "--consistent-read-passthrough-interval=0",
        "--consistent-get-passthrough-qps=2"])
    try:
        routes = [get(proxy, f"kfcg=t{i}") for i in range(4)]
        assert routes[:2] == ["passthrough"] * 2, routes
        assert "cache" in routes[2:], routes
        assert passthroughs(proxy) == routes.count("passthrough")
    finally:
        assert proxy.stop() == 0


def test_resources_the_apiserver_does_not_watch_cache_are_proven_by_content(cluster, cached_proxy,
                                                                           namespace_factory):
    """The apiserver keeps no watch cache for Events (--watch-cache-sizes defaults events#0):
    their watches carry no bookmarks, so no bookmark can prove an events cache current. A
    consistent LIST of them is read from etcd, though, and a cache of fewer than 500 objects is
    proven by its proof's own list (the same objects at the same versions): consistent reads of
    events are then served from the cache like configmaps', at once and never refused. (A larger
    events cache is told apart by its first proof's ending without a bookmark and its reads go
    to the apiserver: kube_fanout_upstream_bookmarks.)"""
    ns = namespace_factory()
    event = {"apiVersion": "v1", "kind": "Event",
             "metadata": {"name": "e0", "namespace": ns},
             "involvedObject": {"kind": "Pod", "name": "p", "namespace": ns},
             "reason": "Tested", "message": "m", "type": "Normal"}
    cluster.kubectl("create", "-f", "-", input=json.dumps(event))
    cluster.kubectl("create", "configmap", "quiet", "-n", ns)
    headers = {"User-Agent": "kube-fanout-tests"}

    def kf_metric(name, resource):
        values = metric_values(cluster.request("GET", "/metrics", port=cached_proxy.port,
                                               tls=False).body.decode(), name)
        return values.get(f'{{resource="{resource}"}}', 0)

    if kf_metric("kube_fanout_cache_objects", "events") >= 500:
        pytest.skip("the session's events cache is past one proof page")

    def read(path):
        marker = f"kfnocache={next(_case)}"
        started = time.monotonic()
        got = cluster.request("GET", f"{path}?{marker}", port=cached_proxy.secure_port,
                              headers=headers)
        why = [line for line in cached_proxy.log_lines() if marker in line]
        assert got.status == 200, (path, got.body[:300], why)  # Never refused.
        return routed(cached_proxy, marker), time.monotonic() - started, got

    proofs = kf_metric("kube_fanout_cache_content_proofs_total", "events")
    for tick in range(3):
        # A write elsewhere: the apiserver's RV moves past both caches.
        cluster.kubectl("create", "secret", "generic", f"tick{tick}", "-n", ns)
        for path in [f"/api/v1/namespaces/{ns}/events", f"/api/v1/namespaces/{ns}/events/e0",
                     f"/api/v1/namespaces/{ns}/configmaps/quiet"]:
            got_route, took, _ = read(path)
            assert got_route == "cache", path
            assert took < 2, (path, took)  # No wait for a bookmark that cannot come.
    assert kf_metric("kube_fanout_cache_content_proofs_total", "events") > proofs
    _, _, listed = read(f"/api/v1/namespaces/{ns}/events")
    assert [e["metadata"]["name"] for e in json.loads(listed.body)["items"]] == ["e0"]


def _without(path, *params):
    base, _, query = path.partition("?")
    kept = [p for p in query.split("&") if p.split("=")[0] not in params]
    return base + "?" + "&".join(kept)


def compare_pages(cluster, proxy, path, between=lambda page: None):
    """Compares `path` and each page its continue tokens lead to (`between(n)` after page n);
    the number of pages."""
    pages = 0
    while True:
        page = json.loads(compare(cluster, proxy, path).body)
        pages += 1
        token = page["metadata"].get("continue")
        if not token:
            return pages
        between(pages)
        path = _without(path, "resourceVersion", "resourceVersionMatch", "continue") + \
            f"&continue={token}"


def test_paginated_lists_from_cache_match_the_apiserver_page_by_page(cluster, cached_proxy,
                                                                     objects):
    # The state at one RV, paged: exact RV, the legacy RV+limit, NotOlderThan, selectors, the
    # pods' node index. Every page (continue tokens included) byte-identical to the apiserver's,
    # though objects change between pages: a continued list stays on its snapshot.
    ns = objects
    rv = json.loads(cluster.request("GET", f"/api/v1/namespaces/{ns}/pods").body)[
        "metadata"]["resourceVersion"]
    cases = [
        f"/api/v1/pods?resourceVersion={rv}&resourceVersionMatch=Exact&limit=2",
        f"/api/v1/namespaces/{ns}/pods?resourceVersion={rv}&limit=1",
        f"/api/v1/namespaces/{ns}/pods?resourceVersion={rv}&resourceVersionMatch=Exact",
        f"/api/v1/namespaces/{ns}/pods?resourceVersion={rv}&resourceVersionMatch=NotOlderThan"
        "&limit=3",
        f"/api/v1/namespaces/{ns}/pods?resourceVersion={rv}&limit=1&labelSelector=app%3Dweb",
        f"/api/v1/pods?resourceVersion={rv}&resourceVersionMatch=NotOlderThan&limit=1"
        "&fieldSelector=spec.nodeName%3Dnode-a",
        f"/api/v1/namespaces/{ns}/configmaps?resourceVersion={rv}&limit=2",
        f"/api/v1/namespaces/{ns}/configmaps?resourceVersion={rv}&limit=1&labelSelector=idx",
    ]
    pages = 0
    for i, path in enumerate(cases):
        # Change the state under the continued list.
        pages += compare_pages(cluster, cached_proxy, path, lambda n, i=i: cluster.kubectl(
            "label", "configmap", "cm2", "-n", ns, f"turn={i}-{n}", "--overwrite"))
    assert pages >= 15


def test_lists_of_a_cache_of_a_thousand_objects_match_the_apiserver(cluster, cached_proxy,
                                                                    namespace_factory):
    # From 1,000 objects on, a cache's lists are built in the list pool, off the I/O threads
    # (proxy/serve/list_pool.h): the same bytes as the apiserver's, selected and paged too.
    ns = namespace_factory()
    items = [{"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": f"many{i:04d}", "namespace": ns,
                           "labels": {"group": str(i % 7)}}, "data": {"i": str(i)}}
             for i in range(1000)]
    cluster.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                           "items": items}), timeout=300)
    base = f"/api/v1/namespaces/{ns}/configmaps"
    whole = json.loads(compare(cluster, cached_proxy, f"{base}?resourceVersion=0").body)
    assert len(whole["items"]) == 1000
    group = json.loads(compare(cluster, cached_proxy,
                               f"{base}?resourceVersion=0&labelSelector=group%3D3").body)
    assert len(group["items"]) == 143
    assert compare_pages(cluster, cached_proxy, f"{base}?limit=400") == 3


def test_requests_the_cache_cannot_answer_exactly_go_to_the_apiserver(cluster, cached_proxy,
                                                                     objects):
    ns = objects
    for path in [f"/api/v1/namespaces/{ns}/pods?resourceVersion=1&resourceVersionMatch=Exact",
                 f"/api/v1/namespaces/{ns}/pods?limit=1&continue=bm90LWEtdG9rZW4",  # 400
                 f"/api/v1/namespaces/{ns}/pods?labelSelector=a%20b",  # apiserver's own 400
                 f"/api/v1/namespaces/{ns}/pods?fieldSelector=foo%3Dbar",
                 f"/api/v1/namespaces/{ns}/configmaps?fieldSelector=data.x%3D1",
                 f"/api/v1/namespaces/{ns}/pods?watch=1&sendInitialEvents=true"]:  # 422
        compare(cluster, cached_proxy, path, expect_route="passthrough")


def test_unauthorized_clients_get_the_apiservers_own_answer(cluster, cached_proxy, objects):
    for who in ("alice", "anonymous"):
        compare(cluster, cached_proxy, f"/api/v1/namespaces/{objects}/pods?resourceVersion=0",
                identity=who, expect_route="passthrough")


def test_each_read_passed_through_is_counted_under_its_reason(cluster, cached_proxy, objects):
    """proxy/serve/README.md's decision table: a read of a cached kind the apiserver answers is
    counted by why (kube_fanout_cache_passed_through_total{reason})."""
    ns = objects
    pods = f"/api/v1/namespaces/{ns}/pods"
    cases = [
        ("not_cacheable", f"{pods}?resourceVersionMatch=NotOlderThan", "admin", {}),  # 422
        # Exact at an RV long past the cache's window: the cache finds it cannot answer.
        ("serve_declined", f"{pods}?resourceVersion=1&resourceVersionMatch=Exact", "admin", {}),
        ("representation", f"{pods}?resourceVersion=0", "admin", {"Accept": "application/yaml"}),
        ("selector", f"{pods}?fieldSelector=foo%3Dbar", "admin", {}),
        ("denied", f"{pods}?resourceVersion=0", "alice", {}),
        ("unknown_user", f"{pods}?resourceVersion=0", "anonymous", {}),
    ]

    def reasons():
        return metric_values(cluster.request("GET", "/metrics", port=cached_proxy.port,
                                             tls=False).body.decode(),
                             "kube_fanout_cache_passed_through_total")

    for i, (reason, path, who, headers) in enumerate(cases):
        label = f'{{reason="{reason}"}}'
        before = reasons()
        assert label in before, before  # Every reason is rendered, from 0.
        marker = f"kfpass={i}"
        res = cluster.request("GET", f"{path}&{marker}", identity=who,
                              port=cached_proxy.secure_port,
                              headers={"User-Agent": "kube-fanout-tests", **headers})
        # 410: Exact at RV 1 once etcd was compacted (test_compaction, test_backfill on this rig).
        assert res.status in (200, 400, 401, 403, 410, 422), (reason, res.status, res.body[:200])
        assert routed(cached_proxy, marker) == "passthrough", reason
        after = reasons()
        changed = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
        assert after[label] == before[label] + 1, (reason, changed)


def test_watch_from_cache_streams_the_apiservers_events(cluster, cached_proxy, namespace_factory):
    ns = namespace_factory()
    cluster.kubectl("create", "configmap", "seed", "-n", ns, "--from-literal=k=0")
    rv = json.loads(cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps").body)[
        "metadata"]["resourceVersion"]
    # Wait until the cache has the seed, so both watches start from the same state.
    compare(cluster, cached_proxy, f"/api/v1/namespaces/{ns}/configmaps?resourceVersion={rv}")
    writes = lambda: metric_values(cluster.request("GET", "/metrics", port=cached_proxy.port,
                                                   tls=False).body.decode(),
                                   "kube_fanout_watch_writes_total")
    writes_before = writes()
    batched = lambda: metric_values(cluster.request("GET", "/metrics", port=cached_proxy.port,
                                                    tls=False).body.decode(),
                                    "kube_fanout_watch_batched_sends_total").get("", 0)
    batched_before = batched()
    watches = {}
    # Over TLS and over plain HTTP/1.1 the wake-up writes each event when the socket takes it
    # at once (else the watch's loop does): both must be the apiserver's stream.
    for name, port, tls in (("direct", cluster.port, True),
                            ("cached", cached_proxy.secure_port, True),
                            ("plain", cached_proxy.port, False)):
        collection = f"/api/v1/namespaces/{ns}/configmaps?watch=1"
        for variant, path in (
                ("from-rv", f"{collection}&resourceVersion={rv}"),
                ("labels", f"{collection}&resourceVersion={rv}&labelSelector=keep%3Dyes"),
                ("initial", f"{collection}&resourceVersion=0"),
                # The legacy /watch/ paths, of a collection and of one object by name.
                ("legacy", f"/api/v1/watch/namespaces/{ns}/configmaps?resourceVersion={rv}"),
                ("legacy-name",
                 f"/api/v1/watch/namespaces/{ns}/configmaps/a?resourceVersion={rv}"),
                # ... with selectors, which they honour as the query form does.
                ("legacy-labels", f"/api/v1/watch/namespaces/{ns}/configmaps"
                                  f"?resourceVersion={rv}&labelSelector=keep%3Dyes"),
                ("legacy-fields", f"/api/v1/watch/namespaces/{ns}/configmaps"
                                  f"?resourceVersion={rv}&fieldSelector=metadata.name%3Dseed")):
            watches[(name, variant)] = open_watch(cluster, port, path, tls=tls)
    k = lambda *a: cluster.kubectl(*a, "-n", ns)
    k("create", "configmap", "a", "--from-literal=k=1")
    k("label", "configmap", "a", "keep=yes")       # enters the label selection: ADDED
    k("patch", "configmap", "a", "-p", '{"data":{"k":"2"}}')
    k("label", "configmap", "a", "keep-")          # leaves it: DELETED with the old state
    k("delete", "configmap", "a")
    k("delete", "configmap", "seed")
    expected = {"from-rv": 6, "labels": 2, "initial": 7, "legacy": 6, "legacy-name": 5,
                "legacy-labels": 2, "legacy-fields": 1}
    for variant, n in expected.items():
        direct = read_events(watches[("direct", variant)][1], n)
        cached = read_events(watches[("cached", variant)][1], n)
        plain = read_events(watches[("plain", variant)][1], n)
        assert len(direct) == n, variant
        assert cached == direct, variant
        assert plain == direct, variant
        if variant in ("legacy-labels", "legacy-fields"):
            # The selected streams hold only what they select (both events of "a" entering and
            # leaving the label selection; seed's deletion).
            names = [json.loads(line)["object"]["metadata"]["name"] for line in cached]
            assert names == {"legacy-labels": ["a", "a"], "legacy-fields": ["seed"]}[variant]
    # The cached watches' events after their start went out from the wake-up: 30 events on
    # each listener (the label-selected streams also get the patch's MODIFIED, past what they
    # read; fewer writes if a wake-up found two), over TLS as over plain HTTP/1.1.
    direct_writes = (writes()['{path="direct"}'] - writes_before.get('{path="direct"}', 0))
    assert 14 <= direct_writes <= 60
    # They went as io_uring sends, over TLS as over plain HTTP/1.1 (--io-uring, on by
    # default), unless kube-fanout said at start that io_uring is refused here.
    logged = [json.loads(line) for line in cached_proxy.log_lines() if line.startswith("{")]
    serving = [line for line in logged if line.get("msg") == "serving"]
    assert serving, cached_proxy.log_tail()
    if serving[-1].get("io_uring"):
        assert 14 <= batched() - batched_before <= direct_writes
    else:
        assert any(line.get("msg", "").startswith("io_uring unavailable") for line in logged)
    for conn, _ in watches.values():
        conn.close()
    # A TLS watch alone (in a namespace no watch above selects) gets its events from the
    # wake-up too.
    ns2 = namespace_factory()
    conn, resp = open_watch(cluster, cached_proxy.secure_port,
                            f"/api/v1/namespaces/{ns2}/configmaps?watch=1&resourceVersion=0")
    before = writes().get('{path="direct"}', 0)
    for i in range(3):
        cluster.kubectl("create", "configmap", f"tls-{i}", "-n", ns2)
    assert [json.loads(line)["object"]["metadata"]["name"]
            for line in read_events(resp, 3)] == ["tls-0", "tls-1", "tls-2"]
    assert 1 <= writes()['{path="direct"}'] - before <= 3
    conn.close()
    # A watch is logged when it ends.
    assert routed(cached_proxy, f"namespaces/{ns}/configmaps?watch=1") == "cache"
    assert routed(cached_proxy, f"watch/namespaces/{ns}/configmaps/a?") == "cache"


# A WatchList, and the legacy watches from "" and "0" that allow bookmarks: the apiserver
# defaults their sendInitialEvents to true (SetListOptionsDefaults), so they end their initial
# events with the same bookmark.
@pytest.mark.parametrize("query", [
    "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
    "&resourceVersion=0",
    "allowWatchBookmarks=true&resourceVersion=0",
    "allowWatchBookmarks=true",
], ids=["watchlist", "legacy-rv0", "legacy-rv-empty"])
def test_watch_list_initial_events_end_with_the_bookmark(cluster, cached_proxy, objects, query):
    path = f"/api/v1/namespaces/{objects}/configmaps?watch=1&{query}"
    n = len(json.loads(cluster.request(
        "GET", f"/api/v1/namespaces/{objects}/configmaps").body)["items"])
    streams = {}
    for name, port in (("direct", cluster.port), ("cached", cached_proxy.secure_port)):
        conn, resp = open_watch(cluster, port, path)
        streams[name] = [json.loads(l) for l in read_events(resp, n + 1)]
        conn.close()
    direct, cached = streams["direct"], streams["cached"]
    assert [e["type"] for e in cached] == ["ADDED"] * n + ["BOOKMARK"]
    assert cached[:n] == direct[:n]  # Same objects, same order.
    # The end marker: the apiserver's bookmark object, at the cache's RV.
    bookmark, expected = cached[n]["object"], direct[n]["object"]
    assert int(bookmark["metadata"].pop("resourceVersion")) >= max(
        int(e["object"]["metadata"]["resourceVersion"]) for e in cached[:n])
    expected["metadata"].pop("resourceVersion")
    assert bookmark == expected
    assert bookmark["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_watch_from_an_rv_older_than_the_window_gets_410_in_band(cluster, tmp_path):
    # A tiny window: a few events push the start past RV 1.
    p = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources=configmaps",
                                                   "--watch-cache-window-bytes=1"])
    try:
        ns = "default"
        for i in range(3):
            cluster.kubectl("create", "configmap", f"w410-{i}", "-n", ns)

        def cached():  # The window moved past RV 2 with them.
            listed = cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps?"
                                     "resourceVersion=0", port=p.port, tls=False)
            return all(f'"w410-{i}"'.encode() in listed.body for i in range(3))

        wait_until(cached, 10, "the three configmaps in the cache")
        conn, resp = open_watch(cluster, p.secure_port,
                                f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion=2")
        assert resp.status == 200
        line = json.loads(resp.readline())
        assert line["type"] == "ERROR"
        status = line["object"]
        assert (status["kind"], status["reason"], status["code"]) == ("Status", "Expired", 410)
        assert status["message"].startswith("too old resource version: 2 (")
        assert resp.read() == b""  # Then the stream ends cleanly.
        conn.close()
    finally:
        for i in range(3):
            cluster.kubectl("delete", "configmap", f"w410-{i}", "-n", "default", check=False)
        assert p.stop() == 0


def test_kubectl_get_and_watch_through_the_cache(cluster, cached_proxy, namespace_factory):
    ns = namespace_factory()
    out = cluster.kubectl("get", "configmaps", "-n", ns, "-o", "name", server=cached_proxy.server)
    assert out.returncode == 0
    cluster.kubectl("create", "configmap", "kw0", "-n", ns)
    import subprocess
    watch = subprocess.Popen(
        [cluster.env["KF_KUBECTL"], f"--server={cached_proxy.server}",
         f"--certificate-authority={cluster.env['KF_CA_FILE']}", "--kubeconfig=/dev/null",
         f"--token={cluster.token('admin')}", "-n", ns, "get", "configmaps", "-w",
         "--output-watch-events", "-o", "custom-columns=E:.type,N:.object.metadata.name",
         "--no-headers"], stdout=subprocess.PIPE, text=True)
    try:
        kubectl_watch_listed(watch, "kw0")  # Before the changes.
        cluster.kubectl("create", "configmap", "kw", "-n", ns)
        cluster.kubectl("delete", "configmap", "kw", "-n", ns)
        seen = []
        deadline = time.monotonic() + 10
        while len(seen) < 2 and time.monotonic() < deadline:
            line = watch.stdout.readline().split()
            if line and line[1] == "kw":
                seen.append(line[0])
    finally:
        watch.terminate()
        watch.wait(timeout=10)
    assert seen == ["ADDED", "DELETED"]


def test_many_watchers_cost_the_apiserver_one_watch(cluster, cached_proxy):
    before = apiserver_watches(cluster, "pods")
    conns = [open_watch(cluster, cached_proxy.secure_port,
                        f"/api/v1/pods?watch=1&resourceVersion=0"
                        f"&fieldSelector=spec.nodeName%3Dnode-{i}")
             for i in range(50)]
    assert all(resp.status == 200 for _, resp in conns)
    metrics = cluster.request("GET", "/metrics", port=cached_proxy.port, tls=False).body.decode()
    assert metric_values(metrics, "kube_fanout_watchers")['{resource="pods"}'] >= 50
    assert apiserver_watches(cluster, "pods") == before  # Not one more upstream watch.
    upstream = metric_values(metrics, "kube_fanout_upstream_watches_total")
    assert upstream['{resource="pods"}'] >= 1
    assert metric_values(metrics, "kube_fanout_cache_synced")['{resource="pods"}'] == 1
    for conn, _ in conns:
        conn.close()


def stalled_watch(cluster, port, path):
    """A watch on kube-fanout's plain `port` by a client with a tiny receive buffer that never
    reads."""
    stalled = socket.socket()
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect(("127.0.0.1", port))
    stalled.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                    f"{cluster.token('admin')}\r\nUser-Agent: stalled\r\n\r\n".encode())
    return stalled


def big_events_reach_a_reader(cluster, secure_port, ns, path, count=30):
    """Creates `count` ConfigMaps of 400 KiB in `ns` while a reader watches `path` on
    kube-fanout's `secure_port`; asserts the reader got each, in order. Returns its connection."""
    conn, healthy = open_watch(cluster, secure_port, path)
    got = []
    reader = threading.Thread(target=lambda: got.extend(read_events(healthy, count, 60)))
    reader.start()
    for i in range(count):
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"big{i}"},
              "data": {"v": "x" * (400 * 1024)}}
        assert cluster.request("POST", f"/api/v1/namespaces/{ns}/configmaps",
                               body=json.dumps(cm).encode(),
                               headers={"Content-Type": "application/json"}).status == 201
    reader.join(timeout=60)
    assert [json.loads(line)["object"]["metadata"]["name"] for line in got] == [
        f"big{i}" for i in range(count)]
    return conn


def test_a_client_that_stops_reading_is_cut_and_others_are_unaffected(cluster, tmp_path,
                                                                     namespace_factory):
    ns = namespace_factory()
    p = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources=configmaps",
                                                   "--watcher-max-queue-bytes=2097152"])
    try:
        path = f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion=0"
        stalled = stalled_watch(cluster, p.port, path)
        conn = big_events_reach_a_reader(cluster, p.secure_port, ns, path)
        metrics = cluster.request("GET", "/metrics", port=p.port, tls=False).body.decode()
        assert metric_values(metrics, "kube_fanout_watchers_cut_total")[
            '{resource="configmaps",reason="queue_bytes"}'] >= 1
        assert metric_values(metrics, "kube_fanout_watch_queue_bytes")[
            '{resource="configmaps"}'] <= 2097152
        conn.close()
        stalled.close()
    finally:
        assert p.stop() == 0


def test_python_client_watch_sees_the_same_events_through_the_cache(cluster, cached_proxy,
                                                                     namespace_factory):
    kubernetes = pytest.importorskip("kubernetes")
    ns = namespace_factory()

    def client(host):
        cfg = kubernetes.client.Configuration()
        cfg.host = host
        cfg.ssl_ca_cert = cluster.env["KF_CA_FILE"]
        cfg.api_key = {"authorization": f"Bearer {cluster.token('admin')}"}
        return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(cfg))

    direct, cached = client(cluster.url), client(cached_proxy.server)
    rv = direct.list_namespaced_config_map(ns).metadata.resource_version
    results = {}

    def watch(name, api):
        w = kubernetes.watch.Watch()
        seen = []
        for ev in w.stream(api.list_namespaced_config_map, ns, resource_version=rv,
                           timeout_seconds=20):
            seen.append((ev["type"], ev["object"].metadata.name,
                         ev["object"].metadata.resource_version))
            if len(seen) == 4:
                w.stop()
        results[name] = seen

    threads = [threading.Thread(target=watch, args=a) for a in (("direct", direct),
                                                                ("cached", cached))]
    for t in threads:  # From `rv`: each sees every change after it, whenever it starts.
        t.start()
    cluster.kubectl("create", "configmap", "py", "-n", ns)
    cluster.kubectl("label", "configmap", "py", "-n", ns, "a=b")
    cluster.kubectl("create", "configmap", "py2", "-n", ns)
    cluster.kubectl("delete", "configmap", "py", "-n", ns)
    for t in threads:
        t.join(timeout=30)
    assert len(results["direct"]) == 4
    assert results["cached"] == results["direct"]


def test_watch_events_go_one_write_per_socket_with_io_uring_off(cluster, tmp_path,
                                                                  namespace_factory):
    # --io-uring=false (as where io_uring is refused): the wake-ups write each socket
    # themselves, and the streams are still the apiserver's.
    ns = namespace_factory()
    p = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources=configmaps",
                                                   "--io-uring=false"])
    try:
        cluster.kubectl("create", "configmap", "seed", "-n", ns)
        rv = json.loads(cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps").body)[
            "metadata"]["resourceVersion"]
        compare(cluster, p, f"/api/v1/namespaces/{ns}/configmaps?resourceVersion={rv}")
        path = f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={rv}"
        watches = {name: open_watch(cluster, port, path, tls=tls)
                   for name, port, tls in (("direct", cluster.port, True),
                                           ("tls", p.secure_port, True),
                                           ("plain", p.port, False))}
        for name in ("a", "b", "c"):
            cluster.kubectl("create", "configmap", name, "-n", ns)
        direct = read_events(watches["direct"][1], 3)
        assert len(direct) == 3
        assert read_events(watches["tls"][1], 3) == direct
        assert read_events(watches["plain"][1], 3) == direct
        metrics = cluster.request("GET", "/metrics", port=p.port, tls=False).body.decode()
        assert metric_values(metrics, "kube_fanout_watch_writes_total")['{path="direct"}'] >= 3
        assert metric_values(metrics, "kube_fanout_watch_batched_sends_total")[""] == 0
        # Each watch's writes of the 3 events timed from their arrival from the apiserver: at
        # least one write per watch, each well within a second here.
        delays = metric_values(metrics, "kube_fanout_watch_delay_seconds_count")[""]
        assert delays >= 2
        assert metric_values(metrics, "kube_fanout_watch_delay_seconds_bucket")['{le="1"}'] == delays
        assert 0 < metric_values(metrics, "kube_fanout_watch_delay_seconds_sum")[""] < delays
        serving = [json.loads(line) for line in p.log_lines() if '"msg":"serving"' in line]
        assert serving and serving[-1]["io_uring"] is False
        for conn, _ in watches.values():
            conn.close()
    finally:
        assert p.stop() == 0


def test_watches_continue_across_an_apiserver_restart(cluster, tmp_path, namespace_factory):
    # The upstream goes away mid-stream: downstream watches stay open, resume without a relist,
    # and see every event exactly once, in order.
    ns = namespace_factory()
    p = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources=configmaps"])
    try:
        cluster.kubectl("create", "configmap", "seed", "-n", ns)
        rv = json.loads(cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps").body)[
            "metadata"]["resourceVersion"]
        conn, watch = open_watch(cluster, p.secure_port,
                                 f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={rv}")
        assert watch.status == 200
        cluster.kubectl("create", "configmap", "before-1", "-n", ns)
        cluster.kubectl("create", "configmap", "before-2", "-n", ns)
        got = [json.loads(l) for l in read_events(watch, 2)]
        cluster.restart_apiserver()
        cluster.kubectl("create", "configmap", "after-1", "-n", ns)
        cluster.kubectl("delete", "configmap", "before-1", "-n", ns)
        got += [json.loads(l) for l in read_events(watch, 2, timeout=30)]
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in got] == [
            ("ADDED", "before-1"), ("ADDED", "before-2"), ("ADDED", "after-1"),
            ("DELETED", "before-1")]
        rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in got]
        assert rvs == sorted(rvs) and len(set(rvs)) == 4
        metrics = cluster.request("GET", "/metrics", port=p.port, tls=False).body.decode()
        assert metric_values(metrics, "kube_fanout_upstream_relists_total")[
            '{resource="configmaps"}'] == 0
        assert metric_values(metrics, "kube_fanout_upstream_watches_total")[
            '{resource="configmaps"}'] >= 2
        conn.close()
    finally:
        assert p.stop() == 0


def test_bookmarks_come_periodically_and_before_the_timeout(cluster, tmp_path, namespace_factory):
    ns = namespace_factory()
    p = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources=configmaps",
                                                   "--watch-bookmark-interval=1s"])
    try:
        cluster.kubectl("create", "configmap", "b1", "-n", ns)
        base = f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion=0"
        # The apiserver's own bookmark object for this kind, to compare shapes with.
        dconn, direct = open_watch(cluster, cluster.port,
                                   f"/api/v1/namespaces/{ns}/configmaps?watch=1"
                                   "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                                   "&allowWatchBookmarks=true&timeoutSeconds=3")
        reference = [json.loads(l) for l in read_events(direct, 2)][1]["object"]
        dconn.close()
        conn, watch = open_watch(cluster, p.secure_port,
                                 base + "&allowWatchBookmarks=true&timeoutSeconds=4")
        started = time.monotonic()
        events = [json.loads(l) for l in read_events(watch, 10, timeout=8)]
        assert watch.read() == b""  # Closed cleanly at the timeout.
        elapsed = time.monotonic() - started
        assert 3.5 < elapsed < 6
        assert events[0]["type"] == "ADDED"
        bookmarks = [e["object"] for e in events if e["type"] == "BOOKMARK"]
        # The first ends the initial events (a watch from "0" that allows bookmarks is a
        # WatchList to the apiserver: test_watch_list_initial_events_end_with_the_bookmark);
        # then ~1/s, and one 2 s before the timeout.
        assert len(bookmarks) >= 3
        rv = int(events[0]["object"]["metadata"]["resourceVersion"])
        for i, b in enumerate(bookmarks):
            assert int(b["metadata"].pop("resourceVersion")) >= rv
            end = {"annotations": {"k8s.io/initial-events-end": "true"}} if i == 0 else {}
            assert b == dict(reference, metadata=end)
        conn.close()
        # Without allowWatchBookmarks, none.
        conn, watch = open_watch(cluster, p.secure_port, base + "&timeoutSeconds=3")
        assert all(json.loads(l)["type"] != "BOOKMARK" for l in read_events(watch, 10, 5))
        conn.close()
    finally:
        assert p.stop() == 0


def test_odd_paths_of_cached_kinds_get_the_apiservers_answer(cluster, cached_proxy):
    compare(cluster, cached_proxy, "/api/v1/namespaces/default/nodes?resourceVersion=0",
            expect_route="passthrough")
    compare(cluster, cached_proxy, "/api/v1/namespaces/default?resourceVersion=0")
    compare(cluster, cached_proxy, "/api/v1/namespaces/nope")


# The cluster-scoped kinds kubelet (CSIDrivers, RuntimeClasses) and kube-proxy (ServiceCIDRs)
# of v1.36 watch besides the core ones (test_control_plane.py's hollow nodes show it): cached by
# default, so a node behind kube-fanout holds no watch at the apiserver.
NODE_AGENT_KINDS = {
    "/apis/storage.k8s.io/v1/csidrivers": {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
                                          "spec": {"attachRequired": False}},
    "/apis/node.k8s.io/v1/runtimeclasses": {"apiVersion": "node.k8s.io/v1",
                                           "kind": "RuntimeClass", "handler": "kf"},
    # The apiserver's own ServiceCIDR "kubernetes" (--service-cluster-ip-range): one made here
    # could not be deleted without the controller-manager's finalizer.
    "/apis/networking.k8s.io/v1/servicecidrs": None,
}


def test_node_agent_kinds_are_cached_by_default(cluster, cached_proxy):
    suffix = int(time.time() * 1000) % 100000
    names = {}
    for collection, manifest in NODE_AGENT_KINDS.items():
        if manifest is None:
            names[collection] = "kubernetes"
            continue
        names[collection] = f"kf-cache-{suffix}.example.com"
        body = {**manifest, "metadata": {"name": names[collection]}}
        made = cluster.request("POST", collection, body=json.dumps(body),
                               headers={"Content-Type": "application/json"})
        assert made.status == 201, made.body
    try:
        for collection, name in names.items():
            # Consistent first (the cache catches up with the creation), then every RV rule.
            compare(cluster, cached_proxy, collection)
            for path in (f"{collection}?resourceVersion=0", f"{collection}/{name}",
                         f"{collection}/{name}?resourceVersion=0", f"{collection}/kf-none",
                         f"{collection}?resourceVersion=0&fieldSelector=metadata.name%3D{name}"):
                compare(cluster, cached_proxy, path)
            rv = json.loads(cluster.request("GET", collection).body)["metadata"]["resourceVersion"]
            compare(cluster, cached_proxy, f"{collection}?resourceVersion={rv}")
            watch = f"{collection}?watch=1&resourceVersion={rv}&fieldSelector=metadata.name%3D{name}"
            streams = [open_watch(cluster, port, watch)
                       for port in (cluster.port, cached_proxy.secure_port)]
            patch = cluster.request("PATCH", f"{collection}/{name}",
                                    body=json.dumps({"metadata": {"labels": {"kf-cache": "x"}}}),
                                    headers={"Content-Type": "application/merge-patch+json"})
            assert patch.status == 200, patch.body
            cluster.request("PATCH", f"{collection}/{name}",
                            body=json.dumps({"metadata": {"labels": {"kf-cache": None}}}),
                            headers={"Content-Type": "application/merge-patch+json"})
            direct, cached = (read_events(resp, 2) for _, resp in streams)
            assert len(direct) == 2 and cached == direct, collection
            for conn, _ in streams:
                conn.close()
            assert routed(cached_proxy, watch) == "cache", collection
    finally:
        for collection, name in names.items():
            if NODE_AGENT_KINDS[collection] is not None:
                cluster.request("DELETE", f"{collection}/{name}")
