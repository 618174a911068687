"""A watch resumed from before the cache's window, against the real apiserver.

A kube-fanout started without a snapshot begins each cache at its upstream LIST (RV X). A client
resuming a watch from an RV r < X (an agent whose kube-fanout restarted) would get the events
(r, X] from the apiserver, whose window still holds r; kube-fanout fills its window in from one
short upstream watch from r (Reflector::Backfill) and streams the same events, byte for byte,
JSON and protobuf. An r the apiserver no longer serves gets the apiserver's own 410.

Each test checks its setup (objects written after r, the new cache's window after them, events
seen) before it compares.
"""
import json

from kfrig import Proxy, metric_values, open_watch, routed, scaled, wait_until
from test_compaction import compact_etcd
from test_protobuf import frame_event, marked, read_frames
from test_protobuf import open_watch as open_proto_watch

WRITES = 5  # Three creations, an update, a deletion.


def write_history(cluster, ns):
    """The namespace's ConfigMaps RV r (listed directly), then WRITES changes after it."""
    listed = cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps")
    assert listed.status == 200, listed.body[:300]
    r = int(json.loads(listed.body)["metadata"]["resourceVersion"])
    for i in range(3):
        cluster.kubectl("create", "configmap", f"h{i}", "-n", ns, f"--from-literal=i={i}")
    cluster.kubectl("label", "configmap", "h1", "-n", ns, "changed=yes")
    cluster.kubectl("delete", "configmap", "h2", "-n", ns)
    return r


def metric(proxy, cluster, name):
    text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
    return metric_values(text, name)


def read_lines(resp, n):
    lines = []
    while len(lines) < n:
        line = resp.readline()
        if not line:
            break
        lines.append(line)
    return lines


def test_a_watch_from_before_a_fresh_cache_gets_the_apiservers_events(cluster, namespace,
                                                                        tmp_path):
    ns = namespace
    r = write_history(cluster, ns)
    # A fresh kube-fanout, no snapshot: its caches (JSON and protobuf) list after the writes.
    proxy = Proxy.start(cluster, tmp_path, extra_args=[
        "--cache-resources=configmaps", "--protobuf-cache-resources=configmaps"])
    try:
        # Readiness waits for the JSON cache's list; the protobuf cache lists beside it.
        def listed():
            rvs = metric(proxy, cluster, "kube_fanout_cache_resource_version")
            return len(rvs) == 2 and all(v > r + WRITES - 1 for v in rvs.values())
        wait_until(listed, 30, "both caches listed after the writes")

        # JSON: the same lines as the apiserver's, in the same order.
        path, m = marked(f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={r}"
                         "&timeoutSeconds=30")
        streams = [open_watch(cluster, port, path) for port in (cluster.port, proxy.secure_port)]
        direct, cached = (read_lines(resp, WRITES) for _, resp in streams)
        for conn, _ in streams:
            conn.close()
        assert [json.loads(l)["type"] for l in direct] == [
            "ADDED", "ADDED", "ADDED", "MODIFIED", "DELETED"]
        assert cached == direct
        assert routed(proxy, m) == "cache"

        # Protobuf: its own cache, filled in by its own upstream watch.
        path, m = marked(f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={r}"
                         "&timeoutSeconds=30")
        streams = [open_proto_watch(cluster, port, path)
                   for port in (None, proxy.secure_port)]
        direct, cached = (read_frames(resp, WRITES, scaled(15)) for _, resp in streams)
        for conn, _ in streams:
            conn.close()
        assert [frame_event(f)[0] for f in direct] == [
            "ADDED", "ADDED", "ADDED", "MODIFIED", "DELETED"]
        assert cached == direct
        assert routed(proxy, m) == "cache"

        filled = metric(proxy, cluster, "kube_fanout_cache_backfills_total")
        assert filled['{resource="configmaps",result="filled"}'] == 1, filled
        assert filled['{resource="configmaps",encoding="protobuf",result="filled"}'] == 1, filled
        fills = [json.loads(l) for l in proxy.log_lines()
                 if "watch history filled in from the upstream" in l]
        assert {(f["encoding"], f["from"], f["result"]) for f in fills} == {
            ("json", r, "filled"), ("protobuf", r, "filled")}, fills
        assert all(f["events"] >= WRITES for f in fills), fills
    finally:
        assert proxy.stop() == 0


def test_a_selecting_watch_from_before_a_fresh_cache_sees_objects_enter_and_leave(
        cluster, namespace, tmp_path):
    """Objects that existed before r change their labels after it: whether each entered or left
    the selection depends on its state at r, which the upstream watch does not carry; the fill
    lists the resource at exactly r for it."""
    ns = namespace
    cluster.kubectl("create", "configmap", "leaves", "-n", ns)
    cluster.kubectl("create", "configmap", "enters", "-n", ns)
    cluster.kubectl("label", "configmap", "leaves", "-n", ns, "sel=in")
    cluster.kubectl("label", "configmap", "enters", "-n", ns, "sel=out")
    listed = cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps")
    r = int(json.loads(listed.body)["metadata"]["resourceVersion"])
    cluster.kubectl("label", "configmap", "leaves", "-n", ns, "sel=out", "--overwrite")
    cluster.kubectl("label", "configmap", "enters", "-n", ns, "sel=in", "--overwrite")
    cluster.kubectl("create", "configmap", "new", "-n", ns)
    cluster.kubectl("label", "configmap", "new", "-n", ns, "sel=in")
    proxy = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources=configmaps"])
    try:
        path, m = marked(f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={r}"
                         "&labelSelector=sel%3Din&timeoutSeconds=30")
        streams = [open_watch(cluster, port, path) for port in (cluster.port, proxy.secure_port)]
        direct, cached = (read_lines(resp, 3) for _, resp in streams)
        for conn, _ in streams:
            conn.close()
        assert [(json.loads(l)["type"], json.loads(l)["object"]["metadata"]["name"])
                for l in direct] == [("DELETED", "leaves"), ("ADDED", "enters"), ("ADDED", "new")]
        assert cached == direct
        assert routed(proxy, m) == "cache"
        assert metric(proxy, cluster, "kube_fanout_cache_backfills_total")[
            '{resource="configmaps",result="filled"}'] == 1
    finally:
        assert proxy.stop() == 0


def test_a_watch_from_an_rv_the_apiserver_no_longer_serves_gets_its_410(cluster, namespace,
                                                                         tmp_path):
    ns = namespace
    r = write_history(cluster, ns)
    # etcd compacted past r, and the apiserver's watch cache started afresh after it.
    assert compact_etcd(cluster) > r
    cluster.restart_apiserver()
    proxy = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources=configmaps"])
    try:
        path, m = marked(f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={r}"
                         "&timeoutSeconds=30")
        answers = []
        for port in (cluster.port, proxy.secure_port):
            conn, resp = open_watch(cluster, port, path)
            assert resp.status == 200
            answers.append(resp.read())  # One ERROR event, then the end.
            conn.close()
        direct, cached = answers
        status = json.loads(direct)["object"]
        assert (status["reason"], status["code"]) == ("Expired", 410), direct
        assert status["message"].startswith(f"too old resource version: {r} ("), direct
        assert cached == direct
        assert routed(proxy, m) == "cache"
        assert metric(proxy, cluster, "kube_fanout_cache_backfills_total")[
            '{resource="configmaps",result="too_old"}'] == 1
    finally:
        assert proxy.stop() == 0
