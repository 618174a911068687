"""CBOR (KEP-4222, `Accept: application/cbor`) served from the cache.

The module starts its own control plane with the apiserver's CBORServingAndStorage gate on (the
session's rig has it off) and a kube-fanout in front of it that caches Secrets too; each case
sends the same request to the apiserver and to kube-fanout and compares status, Content-Type
and the DECODED bodies (the apiserver writes a struct's fields in an order that varies between
calls, so bytes cannot be compared), and kube-fanout's request log shows where its answer came
from. With the gate off (the session's rig), the apiserver refuses CBOR, and so does
kube-fanout, by passing such requests to it.
"""
import io
import itertools
import json
import threading
import time
import uuid

import cbor2
import pytest

from kfrig import Proxy, control_plane, metric_values, routed, same_snapshot

_case = itertools.count()
CBOR = {"Accept": "application/cbor"}


@pytest.fixture(scope="module")
def gated_cluster():
    """A control plane whose apiserver serves CBOR (KF_CBOR_CLUSTER_DIR: one already running)."""
    with control_plane("KF_CBOR_CLUSTER_DIR", "kf-cbor-",
                       apiserver_args="--feature-gates=CBORServingAndStorage=true") as c:
        yield c


SERVES = "the upstream serves CBOR for this resource: the cache answers it"
COLLECTIONS = {"pods": "/api/v1/pods", "nodes": "/api/v1/nodes",
               "namespaces": "/api/v1/namespaces", "configmaps": "/api/v1/configmaps",
               "secrets": "/api/v1/secrets"}


def cbor_learned(proxy):
    """The resources whose reflector has found that the upstream serves CBOR."""
    return {json.loads(line).get("resource") for line in proxy.log_lines() if SERVES in line}


def learn_cbor(cluster, proxy, resources):
    """kube-fanout asks its upstream whether it serves CBOR when a client first asks for it:
    that first request is the apiserver's; once answered, the cache serves CBOR."""
    for resource in resources:
        marker = f"kfcbor={next(_case)}"
        r = cluster.request("GET", f"{COLLECTIONS[resource]}?limit=1&{marker}",
                            port=proxy.port, tls=False, headers=CBOR)
        assert r.status == 200, r.body[:300]
        assert routed(proxy, marker) == "passthrough"  # Not known yet: the apiserver's.
    deadline = time.monotonic() + 10
    while not set(resources) <= cbor_learned(proxy) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert set(resources) <= cbor_learned(proxy), proxy.log_tail()


@pytest.fixture(scope="module")
def gated_proxy(gated_cluster, tmp_path_factory):
    p = Proxy.start(gated_cluster, tmp_path_factory.mktemp("cbor-proxy"),
                    extra_args=["--cache-resources=pods,nodes,namespaces,configmaps,secrets"])
    # Nothing asked at the start: no client has asked for CBOR yet.
    assert cbor_learned(p) == set(), p.log_tail()
    learn_cbor(gated_cluster, p, list(COLLECTIONS))
    yield p
    assert p.stop() == 0, p.log_tail()


def create(cluster, path, obj):
    r = cluster.request("POST", path, body=json.dumps(obj),
                        headers={"Content-Type": "application/json"})
    assert r.status == 201, (path, r.status, r.body[:300])
    return json.loads(r.body)


@pytest.fixture(scope="module")
def objects(gated_cluster):
    """A namespace with 12 ConfigMaps (data, binaryData, labels on every third), 6 Secrets
    (bytes, some not UTF-8) and 4 Pods on two nodes."""
    ns = f"kf-cbor-{uuid.uuid4().hex[:10]}"
    create(gated_cluster, "/api/v1/namespaces",
           {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    create(gated_cluster, f"/api/v1/namespaces/{ns}/serviceaccounts",
           {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
    for i in range(12):
        create(gated_cluster, f"/api/v1/namespaces/{ns}/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"cm{i:02d}", "labels": {"third": "yes"} if i % 3 == 0 else {}},
            "data": {"k": str(i), "text": "caf\u00e9"},
            "binaryData": {"b": "AAEC/w==", "empty": ""}})
    for i in range(6):
        create(gated_cluster, f"/api/v1/namespaces/{ns}/secrets", {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"s{i}"},
            "type": "Opaque", "data": {"raw": "gICA/w==", "n": "MTIz"}})
    for i in range(4):
        create(gated_cluster, f"/api/v1/namespaces/{ns}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"},
            "spec": {"nodeName": f"node-{i % 2}", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"limits": {"cpu": "100m"}},
                                     "ports": [{"containerPort": 8080 + i}]}]}})
    yield ns
    gated_cluster.request("DELETE", f"/api/v1/namespaces/{ns}")


def decode(body):
    assert body.startswith(b"\xd9\xd9\xf7"), body[:40]  # Self-described CBOR.
    return cbor2.loads(body)


def compare(cluster, proxy, path, expect_route="cache", status=200):
    """The same CBOR GET of the apiserver and kube-fanout: status, Content-Type and decoded
    body equal; kube-fanout's route. Returns the apiserver's decoded body."""
    marker = f"kfcbor={next(_case)}"
    marked = f"{path}{'&' if '?' in path else '?'}{marker}"
    direct, cached = same_snapshot(
        cluster, proxy, lambda port: cluster.request("GET", marked, port=port, headers=CBOR),
        path, headers=CBOR)
    assert direct.status == status, (path, direct.status, direct.body[:300])
    assert cached.status == direct.status, (path, cached.body[:300], direct.body[:300])
    assert cached.headers["content-type"] == direct.headers["content-type"] == "application/cbor"
    assert decode(cached.body) == decode(direct.body), path
    assert routed(proxy, marker) == expect_route, path
    return decode(direct.body)


def names(listed):
    return [o[b"metadata"][b"name"].decode() for o in listed[b"items"]]


def test_gets_from_cache_match_the_apiserver_decoded(gated_cluster, gated_proxy, objects):
    ns = objects
    cm = compare(gated_cluster, gated_proxy, f"/api/v1/namespaces/{ns}/configmaps/cm03")
    # What the comparison rests on: byte strings, []byte under tag 22, integers as integers.
    assert cm[b"kind"] == b"ConfigMap" and cm[b"data"][b"text"] == "caf\u00e9".encode()
    assert cm[b"binaryData"][b"b"] == cbor2.CBORTag(22, b"\x00\x01\x02\xff")
    assert cm[b"binaryData"][b"empty"] == cbor2.CBORTag(22, b"")
    secret = compare(gated_cluster, gated_proxy, f"/api/v1/namespaces/{ns}/secrets/s1")
    assert secret[b"data"][b"raw"] == cbor2.CBORTag(22, b"\x80\x80\x80\xff")
    pod = compare(gated_cluster, gated_proxy, f"/api/v1/namespaces/{ns}/pods/p2")
    assert pod[b"spec"][b"containers"][0][b"ports"][0][b"containerPort"] == 8082
    assert pod[b"spec"][b"terminationGracePeriodSeconds"] == 0
    compare(gated_cluster, gated_proxy, f"/api/v1/nodes/nope", status=404)
    missing = compare(gated_cluster, gated_proxy, f"/api/v1/namespaces/{ns}/secrets/nope",
                      status=404)
    assert missing[b"kind"] == b"Status" and missing[b"code"] == 404


@pytest.mark.parametrize("query", [
    "", "?labelSelector=third%3Dyes", "?labelSelector=third%21%3Dyes",
    "?fieldSelector=metadata.name%3Dcm05", "?resourceVersion=0", "?labelSelector=none%3Dnone",
])
def test_configmap_lists_from_cache_match_the_apiserver_decoded(gated_cluster, gated_proxy,
                                                                objects, query):
    listed = compare(gated_cluster, gated_proxy, f"/api/v1/namespaces/{objects}/configmaps{query}")
    assert listed[b"kind"] == b"ConfigMapList"
    if "none" not in query:
        assert names(listed), query
        assert all(b"kind" not in o for o in listed[b"items"])  # Items carry no TypeMeta.


def test_secret_and_pod_lists_from_cache_match_the_apiserver_decoded(gated_cluster, gated_proxy,
                                                                     objects):
    ns = objects
    secrets = compare(gated_cluster, gated_proxy, f"/api/v1/namespaces/{ns}/secrets")
    assert names(secrets) == [f"s{i}" for i in range(6)]
    pods = compare(gated_cluster, gated_proxy,
                   f"/api/v1/namespaces/{ns}/pods?fieldSelector=spec.nodeName%3Dnode-1")
    assert names(pods) == ["p1", "p3"]
    compare(gated_cluster, gated_proxy, "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-0")


def test_pages_from_cache_match_the_apiserver_page_by_page(gated_cluster, gated_proxy, objects):
    base = f"/api/v1/namespaces/{objects}/configmaps?limit=5"
    path, seen, pages = base, [], 0
    while True:
        page = compare(gated_cluster, gated_proxy, path)
        pages += 1
        seen += names(page)
        token = page[b"metadata"].get(b"continue")
        if not token:
            break
        assert page[b"metadata"][b"remainingItemCount"] == 12 - len(seen)
        path = f"{base}&continue={token.decode()}"
    assert pages == 3 and seen == [f"cm{i:02d}" for i in range(12)]


def read_seq(resp):
    """Every item of an application/cbor-seq body, read to its end."""
    body = resp.read()
    stream, items = io.BytesIO(body), []
    while stream.tell() < len(body):
        items.append(cbor2.load(stream))
    return items


def open_cbor_watch(cluster, port, path):
    conn = cluster.connection(port or cluster.port, timeout=30)
    conn.request("GET", path, headers={"Authorization": f"Bearer {cluster.token('admin')}",
                                       **CBOR})
    return conn.getresponse()


def watch_both(cluster, proxy, path, writes):
    """The same CBOR watch of the apiserver and kube-fanout, opened before `writes` run; every
    event each sent until the watch's timeout, without periodic bookmarks."""
    marker = f"kfcbor={next(_case)}"
    marked = f"{path}&{marker}"
    direct = open_cbor_watch(cluster, None, marked)
    cached = open_cbor_watch(cluster, proxy.secure_port, marked)
    for r in (direct, cached):
        assert r.status == 200 and r.getheader("content-type") == "application/cbor-seq"
    writes()
    results = []
    for r in (direct, cached):
        results.append([e for e in read_seq(r) if e[b"type"] != b"BOOKMARK"
                        or b"annotations" in e[b"object"][b"metadata"]])
    assert routed(proxy, marker) == "cache", path
    return results


def test_watch_from_cache_sends_the_apiservers_events_decoded(gated_cluster, gated_proxy,
                                                            objects):
    ns = objects
    base = f"/api/v1/namespaces/{ns}"
    rv = json.loads(gated_cluster.request("GET", f"{base}/configmaps").body)[
        "metadata"]["resourceVersion"]
    # Let kube-fanout's cache reach the RV, so both watches start at the same point.
    compare(gated_cluster, gated_proxy, f"{base}/configmaps?limit=1")

    def writes():
        time.sleep(0.5)
        create(gated_cluster, f"{base}/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w1"},
            "binaryData": {"x": "3q2+7w=="}})
        patch = {"metadata": {"labels": {"third": "yes"}}, "data": {"k": "patched"}}
        r = gated_cluster.request("PATCH", f"{base}/configmaps/cm01", body=json.dumps(patch),
                                  headers={"Content-Type": "application/merge-patch+json"})
        assert r.status == 200, r.body[:300]
        # Leaves the label selection below: a DELETED for that watcher.
        patch = {"metadata": {"labels": {"third": "no"}}}
        r = gated_cluster.request("PATCH", f"{base}/configmaps/cm03", body=json.dumps(patch),
                                  headers={"Content-Type": "application/merge-patch+json"})
        assert r.status == 200, r.body[:300]
        r = gated_cluster.request("DELETE", f"{base}/configmaps/w1")
        assert r.status == 200, r.body[:300]

    path = (f"{base}/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=4"
            "&allowWatchBookmarks=true")
    direct, cached = watch_both(gated_cluster, gated_proxy, path, writes)
    assert [e[b"type"] for e in direct] == [b"ADDED", b"MODIFIED", b"MODIFIED", b"DELETED"]
    assert direct[0][b"object"][b"binaryData"][b"x"] == cbor2.CBORTag(22, b"\xde\xad\xbe\xef")
    assert cached == direct

    # A label selector the objects enter and leave.
    rv = json.loads(gated_cluster.request("GET", f"{base}/configmaps").body)[
        "metadata"]["resourceVersion"]
    compare(gated_cluster, gated_proxy, f"{base}/configmaps?limit=1")

    def moves():
        time.sleep(0.5)
        for name, value in (("cm02", "yes"), ("cm06", "no")):
            r = gated_cluster.request(
                "PATCH", f"{base}/configmaps/{name}",
                body=json.dumps({"metadata": {"labels": {"third": value}}}),
                headers={"Content-Type": "application/merge-patch+json"})
            assert r.status == 200, r.body[:300]

    path = (f"{base}/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=3"
            "&labelSelector=third%3Dyes")
    direct, cached = watch_both(gated_cluster, gated_proxy, path, moves)
    assert [e[b"type"] for e in direct] == [b"ADDED", b"DELETED"]
    assert cached == direct


def test_watch_list_sends_the_initial_events_and_the_end_bookmark(gated_cluster, gated_proxy,
                                                                 objects):
    path = (f"/api/v1/namespaces/{objects}/secrets?watch=1&sendInitialEvents=true"
            "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=2")
    direct, cached = watch_both(gated_cluster, gated_proxy, path, lambda: None)
    assert [e[b"type"] for e in direct] == [b"ADDED"] * 6 + [b"BOOKMARK"]
    assert cached[:-1] == direct[:-1]
    # Counted as CBOR answers (this watch, and the GETs, LISTs and watches before it).
    text = gated_cluster.request("GET", "/metrics", port=gated_proxy.port, tls=False).body.decode()
    assert sum(metric_values(text, "kube_fanout_cache_cbor_requests_total").values()) >= 10
    # The end bookmark: the same object but for its resourceVersion (each cache's own).
    end = [dict(e[b"object"]) for e in (direct[-1], cached[-1])]
    for o in end:
        assert o[b"metadata"][b"annotations"] == {b"k8s.io/initial-events-end": b"true"}
        o[b"metadata"] = {k: v for k, v in o[b"metadata"].items() if k != b"resourceVersion"}
    assert end[0] == end[1]


def test_a_warm_restarted_cache_serves_cbor(gated_cluster, objects, tmp_path):
    """A cache restored from a snapshot watches without listing; it still learns that the
    upstream serves CBOR (asked at the first CBOR request), so CBOR is the cache's again."""
    snapshots = tmp_path / "snapshots"
    for name in ("first", "again"):
        (tmp_path / name).mkdir()
    args = ["--cache-resources=configmaps", f"--cache-snapshot-dir={snapshots}",
            "--cache-snapshot-interval=1s"]
    first = Proxy.start(gated_cluster, tmp_path / "first", extra_args=args)
    try:
        learn_cbor(gated_cluster, first, ["configmaps"])
        compare(gated_cluster, first, f"/api/v1/namespaces/{objects}/configmaps/cm07")
        deadline = time.monotonic() + 20
        while not list(snapshots.glob("*.snap")) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert list(snapshots.glob("*.snap")), "a snapshot was written"
    finally:
        assert first.stop() == 0, first.log_tail()
    again = Proxy.start(gated_cluster, tmp_path / "again", extra_args=args)
    try:
        assert any("cache loaded from snapshot" in line
                   for line in again.log_lines()), again.log_tail()
        learn_cbor(gated_cluster, again, ["configmaps"])
        compare(gated_cluster, again, f"/api/v1/namespaces/{objects}/configmaps/cm07")
        compare(gated_cluster, again, f"/api/v1/namespaces/{objects}/configmaps?limit=4")
    finally:
        assert again.stop() == 0, again.log_tail()


def test_a_watch_from_an_rv_the_apiserver_no_longer_serves_gets_its_410(gated_cluster, objects,
                                                                        tmp_path):
    """etcd compacted past the RV and the apiserver restarted (so its watch cache starts after
    it); a fresh kube-fanout fills its window in from the upstream, which answers 410: the
    client gets the apiserver's ERROR event, in CBOR. (Restarts the module's apiserver: last.)"""
    from test_compaction import compact_etcd
    base = f"/api/v1/namespaces/{objects}/configmaps"
    rv = json.loads(gated_cluster.request("GET", base).body)["metadata"]["resourceVersion"]
    for i in range(3):
        create(gated_cluster, base, {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": f"late{i}"}})
    assert compact_etcd(gated_cluster) > int(rv)
    gated_cluster.restart_apiserver()
    proxy = Proxy.start(gated_cluster, tmp_path, extra_args=["--cache-resources=configmaps"])
    try:
        learn_cbor(gated_cluster, proxy, ["configmaps"])
        marker = f"kfcbor={next(_case)}"
        path = f"{base}?watch=1&resourceVersion={rv}&timeoutSeconds=30&{marker}"
        answers = []
        for port in (None, proxy.secure_port):
            r = open_cbor_watch(gated_cluster, port, path)
            assert r.status == 200 and r.getheader("content-type") == "application/cbor-seq"
            answers.append(read_seq(r))  # One ERROR event, then the end.
        direct, cached = answers
        assert len(direct) == 1 and direct[0][b"type"] == b"ERROR", direct
        status = direct[0][b"object"]
        assert (status[b"reason"], status[b"code"]) == (b"Expired", 410), status
        assert cached == direct
        assert routed(proxy, marker) == "cache"
    finally:
        assert proxy.stop() == 0, proxy.log_tail()


def test_without_the_gate_cbor_gets_the_apiservers_answer(cluster, cached_proxy, namespace):
    """The session's rig (gate off): the apiserver refuses CBOR with its 406, and kube-fanout
    passes CBOR requests to it."""
    create(cluster, f"/api/v1/namespaces/{namespace}/configmaps",
           {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
    for path in (f"/api/v1/namespaces/{namespace}/configmaps/c",
                 f"/api/v1/namespaces/{namespace}/configmaps",
                 f"/api/v1/namespaces/{namespace}/configmaps?watch=1&timeoutSeconds=1"):
        marker = f"kfcbor={next(_case)}"
        marked = f"{path}{'&' if '?' in path else '?'}{marker}"
        direct = cluster.request("GET", marked, headers=CBOR)
        ours = cluster.request("GET", marked, port=cached_proxy.secure_port, headers=CBOR)
        assert direct.status == 406, (path, direct.status, direct.body[:200])
        assert (ours.status, ours.body) == (direct.status, direct.body), path
        assert routed(cached_proxy, marker) == "passthrough", path
