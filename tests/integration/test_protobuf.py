"""Protobuf from the cache, compared byte for byte with the real apiserver.

A client that asks for protobuf (client-go's `application/vnd.kubernetes.protobuf,
application/json`, or protobuf alone) gets from kube-fanout's cache exactly the bytes the
apiserver sends: LIST (selectors, limit and continue), GET (and the NotFound Status), WATCH
frames from an RV, bookmarks and WatchList's end marker, the in-band 410. The protobuf cache of
a resource starts with the first request for it (passed through meanwhile), so each test first
waits until its requests are routed to the cache.

Frames are read here with a minimal protobuf reader (length-delimited fields only), enough to
check that a test's setup happened before anything is compared.
"""
import http.client
import json
import struct
import time

import pytest

from kfrig import Proxy, metric_values, same_snapshot, scaled, varint, wait_until
from test_cache import (ALLOWED_HEADER_DIFFERENCES, namespace_factory, objects,  # noqa: F401
                        routed)

PROTO = "application/vnd.kubernetes.protobuf"
CLIENT_GO = "application/vnd.kubernetes.protobuf,application/json"
DROP = "application/json;drop=metadata.managedFields"  # The managedFields opt-out.
_case = iter(range(1, 1 << 30))


def fields(message):
    """(number, wire type, value) of each field of a protobuf message."""
    out, i = [], 0
    while i < len(message):
        key, i = varint(message, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(message, i)
        elif wire == 2:
            n, i = varint(message, i)
            value, i = message[i:i + n], i + n
        elif wire == 1:
            value, i = message[i:i + 8], i + 8
        elif wire == 5:
            value, i = message[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        out.append((number, wire, value))
    return out


def field(message, number, default=b""):
    return next((v for n, _, v in fields(message) if n == number), default)


def unknown(body):
    """(kind, raw) of an envelope."""
    assert body[:4] == b"k8s\0", body[:20]
    raw = body[4:]
    return field(field(raw, 1), 2).decode(), field(raw, 2)


def list_items(body):
    kind, raw = unknown(body)
    assert kind.endswith("List"), kind
    meta = field(raw, 1)
    return [v for n, _, v in fields(raw) if n == 2], field(meta, 2).decode(), field(meta, 3)


def object_meta(message):
    meta = field(message, 1)
    return {"name": field(meta, 1).decode(), "resourceVersion": field(meta, 6).decode(),
            "annotations": {field(e, 1).decode(): field(e, 2).decode()
                            for n, _, e in fields(meta) if n == 12}}


def split_frames(data):
    frames = []
    while len(data) >= 4:
        (n,) = struct.unpack(">I", data[:4])
        if len(data) < 4 + n:
            break
        frames.append(data[:4 + n])
        data = data[4 + n:]
    return frames, data


def frame_event(frame):
    """(type, kind, object message) of a watch frame."""
    event = frame[4:]
    kind, raw = unknown(field(field(event, 2), 1))
    return field(event, 1).decode(), kind, raw


def get(cluster, path, port=None, accept=PROTO, marker=True):
    headers = {"Accept": accept, "User-Agent": "kube-fanout-tests"}
    return cluster.request("GET", path, headers=headers, port=port)


def marked(path):
    sep = "&" if "?" in path else "?"
    m = f"kfcase=pb{next(_case)}"
    return f"{path}{sep}{m}", m


def compare(cluster, proxy, path, accept=PROTO):
    """The apiserver's and the cache's answer at the same resourceVersion (kfrig.same_snapshot),
    asserted equal and routed to the cache."""
    p, m = marked(path)
    direct, cached = same_snapshot(cluster, proxy,
                                   lambda port: get(cluster, p, port=port, accept=accept), p,
                                   headers={"Accept": accept})
    assert cached.status == direct.status, (path, cached.body[:200], direct.body[:200])
    assert cached.body == direct.body, path
    strip = lambda h: {k: v for k, v in h.items() if k not in ALLOWED_HEADER_DIFFERENCES}
    assert strip(cached.headers) == strip(direct.headers), path
    assert routed(proxy, m) == "cache", path
    return cached


def wait_cached(cluster, proxy, path, accept=PROTO):
    """Until the resource's protobuf cache answers (it starts with the first request)."""
    deadline = time.monotonic() + scaled(20)
    while time.monotonic() < deadline:
        p, m = marked(path)
        res = get(cluster, p, port=proxy.secure_port, accept=accept)
        assert res.status == 200, res.body[:300]
        assert res.headers["content-type"] == PROTO
        if routed(proxy, m) == "cache":
            return
        time.sleep(0.2)
    raise AssertionError(f"{path}: protobuf never served from the cache:\n{proxy.log_tail()}")


def test_protobuf_lists_and_gets_match_the_apiserver(cluster, cached_proxy, objects):
    ns = objects
    wait_cached(cluster, cached_proxy, "/api/v1/pods?resourceVersion=0")
    wait_cached(cluster, cached_proxy, "/api/v1/configmaps?resourceVersion=0")
    wait_cached(cluster, cached_proxy, "/api/v1/nodes?resourceVersion=0")
    # The setup happened: the lists have the objects the fixture made, in protobuf.
    items, _, _ = list_items(compare(cluster, cached_proxy,
                                     f"/api/v1/namespaces/{ns}/pods?resourceVersion=0").body)
    assert [object_meta(i)["name"] for i in items] == ["p0", "p1", "p2", "p3"]
    for path in [
        f"/api/v1/namespaces/{ns}/configmaps?resourceVersion=0",
        "/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3Dnode-a",
        "/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3D",
        f"/api/v1/namespaces/{ns}/pods?resourceVersion=0&labelSelector=app%3Dweb%2Ctier",
        f"/api/v1/namespaces/{ns}/pods?resourceVersion=0&fieldSelector=status.phase!%3DRunning",
        f"/api/v1/namespaces/{ns}/configmaps?resourceVersion=0&labelSelector=idx%3E0",
        "/api/v1/namespaces/no-such-namespace/pods?resourceVersion=0",
        "/api/v1/nodes?resourceVersion=0",
        f"/api/v1/namespaces/{ns}/pods/p1?resourceVersion=0",
        f"/api/v1/namespaces/{ns}/pods/nope",  # NotFound Status in protobuf (no RV: the cache's)
        "/api/v1/nodes/node-a?resourceVersion=0",
    ]:
        compare(cluster, cached_proxy, path)
    # client-go's Accept picks protobuf too.
    res = compare(cluster, cached_proxy, f"/api/v1/namespaces/{ns}/pods/p0?resourceVersion=0",
                  accept=CLIENT_GO)
    assert object_meta(unknown(res.body)[1])["name"] == "p0"


def test_protobuf_pages_continue_like_the_apiserver(cluster, cached_proxy, objects):
    ns = objects
    wait_cached(cluster, cached_proxy, "/api/v1/pods?resourceVersion=0")
    # A consistent first page, then its continue token, on both; pages must agree.
    base = f"/api/v1/namespaces/{ns}/pods?limit=2"
    p, m = marked(base)
    direct = get(cluster, p)
    cached = get(cluster, p, port=cached_proxy.secure_port)
    assert routed(cached_proxy, m) == "cache"
    d_items, d_rv, d_cont = list_items(direct.body)
    c_items, c_rv, c_cont = list_items(cached.body)
    assert len(d_items) == 2 and d_cont, "the first page must have a continue token"
    assert c_items == d_items
    # The cache's RV may be newer than the apiserver's read: each continues its own token.
    for first, port in ((direct, None), (cached, cached_proxy.secure_port)):
        items, _, cont = list_items(first.body)
        res = get(cluster, f"{base}&continue={cont.decode()}", port=port)
        assert res.status == 200
        rest, _, _ = list_items(res.body)
        assert [object_meta(i)["name"] for i in items + rest] == ["p0", "p1", "p2", "p3"]
    # Same RV, same token: byte for byte.
    if c_rv == d_rv:
        assert cached.body == direct.body


def open_watch(cluster, port, path, accept=PROTO, identity="admin"):
    conn = cluster.connection(port or cluster.port, tls=True, timeout=scaled(15))
    conn.request("GET", path, headers={"Accept": accept,
                                       "Authorization": f"Bearer {cluster.token(identity)}"})
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()[:300]
    return conn, resp


def read_frames(resp, count, timeout):
    data, frames = b"", []
    deadline = time.monotonic() + timeout
    while len(frames) < count and time.monotonic() < deadline:
        chunk = resp.read1(65536)
        if not chunk:
            break
        data += chunk
        got, data = split_frames(data)
        frames += got
    return frames


def test_protobuf_watch_frames_match_the_apiserver(cluster, cached_proxy, namespace):
    ns = namespace
    cluster.kubectl("create", "configmap", "w0", "-n", ns, "--from-literal=a=0")
    wait_cached(cluster, cached_proxy, f"/api/v1/namespaces/{ns}/configmaps?resourceVersion=0")
    res = get(cluster, f"/api/v1/namespaces/{ns}/configmaps")
    _, rv, _ = list_items(res.body)
    path = f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=30"
    p, m = marked(path)
    streams = [open_watch(cluster, None, p), open_watch(cluster, cached_proxy.secure_port, p)]
    cluster.kubectl("create", "configmap", "w1", "-n", ns, "--from-literal=b=1")
    cluster.kubectl("label", "configmap", "w1", "-n", ns, "x=y")
    cluster.kubectl("delete", "configmap", "w1", "-n", ns)
    direct, cached = (read_frames(r, 3, scaled(15)) for _, r in streams)
    for conn, _ in streams:
        conn.close()
    assert routed(cached_proxy, m) == "cache"  # Logged when the watch ends.
    assert [frame_event(f)[0] for f in direct] == ["ADDED", "MODIFIED", "DELETED"]
    assert cached == direct
    assert [m_ for m_ in metric_values(
        cluster.request("GET", "/metrics", port=cached_proxy.port, tls=False).body.decode(),
        "kube_fanout_cache_protobuf_requests_total").values()][0] >= 3


def test_protobuf_watchlist_bookmarks_and_410(cluster, cached_proxy, namespace):
    ns = namespace
    for i in range(2):
        cluster.kubectl("create", "configmap", f"wl{i}", "-n", ns, f"--from-literal=i={i}")
    wait_cached(cluster, cached_proxy, f"/api/v1/namespaces/{ns}/configmaps?resourceVersion=0")
    path = (f"/api/v1/namespaces/{ns}/configmaps?watch=1&sendInitialEvents=true"
            "&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=30")
    results = []
    for port in (None, cached_proxy.secure_port):
        p, m = marked(path)
        conn, resp = open_watch(cluster, port, p, accept=CLIENT_GO)
        assert resp.getheader("Content-Type") == f"{PROTO};stream=watch"
        frames = read_frames(resp, 3, scaled(15))
        conn.close()
        if port:
            assert routed(cached_proxy, m) == "cache"
        results.append(frames)
    direct, cached = results
    initial = direct[:2]
    # Initial state, then the end marker: objects byte for byte; the bookmark's RV is each
    # server's own list RV, so the bookmark is compared with its RV taken out.
    assert [frame_event(f)[0] for f in direct] == ["ADDED", "ADDED", "BOOKMARK"]
    assert cached[:2] == direct[:2]
    for frames in (direct, cached):
        kind, message = frame_event(frames[2])[1:]
        meta = object_meta(message)
        assert kind == "ConfigMap"
        assert meta["annotations"] == {"k8s.io/initial-events-end": "true"}
    d_rv = object_meta(frame_event(direct[2])[2])["resourceVersion"]
    c_rv = object_meta(frame_event(cached[2])[2])["resourceVersion"]
    assert direct[2].replace(d_rv.encode(), b"RV") == cached[2].replace(c_rv.encode(), b"RV")

    # A watch from an RV older than the cache's window: what the apiserver answers (its 410
    # in one ERROR frame, or, while its window still holds that RV, the events since, which
    # the cache fills in from it: test_backfill.py).
    p, m = marked(f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion=1")
    first = []
    for port in (None, cached_proxy.secure_port):
        conn, resp = open_watch(cluster, port, p)
        first.append(read_frames(resp, 1, scaled(10)))
        conn.close()
    assert routed(cached_proxy, m) == "cache"
    direct, cached = first
    # The first frame each (a read may bring more: the events of a window that holds RV 1).
    assert direct and cached, (direct, cached)
    if frame_event(direct[0])[0] == "ERROR":
        etype, kind, status = frame_event(direct[0])
        assert (kind, field(status, 4).decode()) == ("Status", "Expired")
        assert [v for n, _, v in fields(status) if n == 6] == [410]
        if frame_event(cached[0])[0] != "ERROR":
            # The cache's window reaches back further than the apiserver's has by now: an
            # earlier fill on this rig from RV 1 (test_backfill.py) put its history before the
            # window. Its events are then the namespace's, from its first create.
            assert cached[0] == initial[0], (frame_event(cached[0])[:2],
                                             fields(frame_event(cached[0])[2]))
            return
    assert cached[0] == direct[0], (frame_event(cached[0])[:2], fields(frame_event(cached[0])[2]),
                                    fields(frame_event(direct[0])[2]))


@pytest.fixture(scope="module")
def widgets(cluster, tmp_path_factory):
    """A CRD (widgets.kf-test.example.com), two widgets, and kube-fanout caching them."""
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.kf-test.example.com"},
           "spec": {"group": "kf-test.example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {
                                      "type": "object",
                                      "x-kubernetes-preserve-unknown-fields": True}}}]}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(crd))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                    "crd/widgets.kf-test.example.com")
    for i in range(2):
        w = {"apiVersion": "kf-test.example.com/v1", "kind": "Widget",
             "metadata": {"name": f"w{i}", "namespace": "default"}, "spec": {"i": i}}
        deadline = time.monotonic() + scaled(30)
        while cluster.kubectl("apply", "-f", "-", input=json.dumps(w),
                              check=False).returncode != 0:
            assert time.monotonic() < deadline, "the CRD's API never served"
            time.sleep(0.5)
    from kfrig import Proxy
    p = Proxy.start(cluster, tmp_path_factory.mktemp("widgets"),
                    extra_args=["--cache-resources=pods,widgets.kf-test.example.com/v1"])
    yield p
    assert p.stop() == 0, p.log_tail()


def test_custom_resources_have_no_protobuf_as_with_the_apiserver(cluster, widgets):
    """Custom resources have no protobuf: client-go's Accept gets JSON (from the cache), a
    protobuf-only Accept the apiserver's 406, exactly as direct."""
    path = "/apis/kf-test.example.com/v1/namespaces/default/widgets?resourceVersion=0"
    deadline = time.monotonic() + scaled(20)
    while True:  # The cache lists the CRD's objects once it has started.
        p, m = marked(path)
        direct = get(cluster, p, accept=CLIENT_GO)
        cached = get(cluster, p, port=widgets.secure_port, accept=CLIENT_GO)
        if routed(widgets, m) == "cache" and cached.body == direct.body:
            break
        assert time.monotonic() < deadline, (cached.body[:300], direct.body[:300])
        time.sleep(0.3)
    assert direct.headers["content-type"] == "application/json"
    assert [i["metadata"]["name"] for i in json.loads(direct.body)["items"]] == ["w0", "w1"]
    assert cached.headers["content-type"] == "application/json"
    # A custom resource's GET from the cache, and its NotFound, as the apiserver's.
    for name, query in (("w1", "?resourceVersion=0"), ("nope", "")):
        p, m = marked(f"/apis/kf-test.example.com/v1/namespaces/default/widgets/{name}{query}")
        direct = get(cluster, p, accept=CLIENT_GO)
        cached = get(cluster, p, port=widgets.secure_port, accept=CLIENT_GO)
        assert (cached.status, cached.body) == (direct.status, direct.body)
        assert routed(widgets, m) == "cache"
    p, m = marked(path)
    direct = get(cluster, p, accept=PROTO)
    proxied = get(cluster, p, port=widgets.secure_port, accept=PROTO)
    assert direct.status == 406, direct.body[:300]
    assert (proxied.status, proxied.body) == (direct.status, direct.body)
    assert routed(widgets, m) == "passthrough"


def test_a_watch_older_than_the_protobuf_cache_is_vouched_for_by_the_json_cache(
        cluster, namespace_factory, tmp_path):
    """A protobuf cache not in --protobuf-cache-resources starts with the first protobuf request,
    later than the JSON one (and at another RV on each replica), so a client's RV can predate its
    window. The apiserver's
    longer window would serve such a watch; kube-fanout does too: when its JSON cache shows
    nothing the watch would see happened in between, from the window's start; when something
    did, with the events in between filled in from the upstream (test_backfill.py)."""
    quiet, busy = namespace_factory(), namespace_factory()
    # Started at the first protobuf request (not with the JSON cache, as by default).
    proxy = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources=configmaps",
                                                       "--protobuf-cache-resources="])
    try:
        listed = cluster.request("GET", f"/api/v1/namespaces/{quiet}/configmaps?resourceVersion=0",
                                 port=proxy.port, tls=False)
        assert listed.status == 200, listed.body[:300]
        rv0 = json.loads(listed.body)["metadata"]["resourceVersion"]
        for i in range(3):  # After rv0, before the protobuf cache: only in `busy`.
            made = cluster.kubectl("create", "configmap", f"b{i}", "-n", busy,
                                   f"--from-literal=i={i}", "-o",
                                   "jsonpath={.metadata.resourceVersion}").stdout
        # The JSON cache has seen them (a read at least that fresh, which it waits for) before
        # the protobuf cache lists: else it could not vouch for the window's start yet.
        caught_up = cluster.request("GET", f"/api/v1/namespaces/{busy}/configmaps"
                                    f"?resourceVersion={made}", port=proxy.port, tls=False)
        assert caught_up.status == 200, caught_up.body[:300]
        assert int(json.loads(caught_up.body)["metadata"]["resourceVersion"]) >= int(made)
        wait_cached(cluster, proxy, f"/api/v1/namespaces/{quiet}/configmaps?resourceVersion=0")
        _, window_start, _ = list_items(get(cluster, f"/api/v1/namespaces/{quiet}/configmaps",
                                            port=proxy.secure_port).body)
        assert int(window_start) > int(rv0) + 2  # Setup: the protobuf window starts after.

        path = f"/api/v1/namespaces/{quiet}/configmaps?watch=1&resourceVersion={rv0}" \
               "&timeoutSeconds=30"
        p, m = marked(path)
        streams = [open_watch(cluster, None, p), open_watch(cluster, proxy.secure_port, p)]
        cluster.kubectl("create", "configmap", "q0", "-n", quiet, "--from-literal=a=0")
        cluster.kubectl("delete", "configmap", "q0", "-n", quiet)
        direct, cached = (read_frames(r, 2, scaled(15)) for _, r in streams)
        for conn, _ in streams:
            conn.close()
        assert [frame_event(f)[0] for f in direct] == ["ADDED", "DELETED"]
        assert cached == direct  # No 410: the same frames as the apiserver's.
        assert routed(proxy, m) == "cache"
        vouched = metric_values(cluster.request("GET", "/metrics", port=proxy.port,
                                                tls=False).body.decode(),
                                "kube_fanout_cache_watches_vouched_total")
        assert vouched.get("", 0) >= 1, vouched

        # The busy namespace had events between rv0 and the window: the JSON cache cannot
        # vouch, and the protobuf cache fills them in from the upstream, as the apiserver
        # replays them.
        p, m = marked(f"/api/v1/namespaces/{busy}/configmaps?watch=1&resourceVersion={rv0}"
                      "&timeoutSeconds=30")
        streams = [open_watch(cluster, None, p), open_watch(cluster, proxy.secure_port, p)]
        direct, cached = (read_frames(r, 3, scaled(15)) for _, r in streams)
        for conn, _ in streams:
            conn.close()
        assert routed(proxy, m) == "cache"
        assert [frame_event(f)[0] for f in direct] == ["ADDED"] * 3
        assert cached == direct
    finally:
        proxy.stop()


def test_protobuf_caches_listed_start_with_the_json_ones(cluster, namespace, tmp_path):
    """With --protobuf-cache-resources (the manifests list the kinds kubelet and kube-proxy watch)
    a protobuf cache starts with the JSON one, so a protobuf watch resuming from an RV the JSON
    cache already had gets the events in between from the cache, where one started at its first
    protobuf request has them filled in from the upstream first (the test above)."""
    ns = namespace
    proxy = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources=configmaps,namespaces",
                                                       "--protobuf-cache-resources=configmaps"])
    try:
        listed = cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps?resourceVersion=0",
                                 port=proxy.port, tls=False)
        assert listed.status == 200, listed.body[:300]
        rv0 = json.loads(listed.body)["metadata"]["resourceVersion"]
        for i in range(3):  # After rv0, before any protobuf request.
            cluster.kubectl("create", "configmap", f"b{i}", "-n", ns, f"--from-literal=i={i}")
        wait_cached(cluster, proxy, f"/api/v1/namespaces/{ns}/configmaps?resourceVersion=0")
        log = proxy.log_tail(400)
        assert "protobuf cache starting" in log and "at start" in log, log

        path = f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={rv0}" \
               "&timeoutSeconds=30"
        p, m = marked(path)
        streams = [open_watch(cluster, None, p), open_watch(cluster, proxy.secure_port, p)]
        direct, cached = (read_frames(r, 3, scaled(15)) for _, r in streams)
        for conn, _ in streams:
            conn.close()
        assert [frame_event(f)[0] for f in direct] == ["ADDED"] * 3
        assert cached == direct  # The events since rv0, not a 410.
        assert routed(proxy, m) == "cache"
    finally:
        proxy.stop()


def test_an_unknown_client_starts_no_protobuf_cache_and_no_cbor_probe(cluster, namespace,
                                                                      tmp_path):
    """A protobuf cache costs the apiserver a LIST and a watch, and kube-fanout its memory; the
    question whether the upstream serves CBOR costs a LIST, what it does with drop= two. None is
    started for a client the apiserver does not know (no credentials, or a token it refuses):
    their reads get the apiserver's 401/403, and only an allowed user's first request starts
    them."""
    ns = namespace
    cluster.kubectl("create", "configmap", "a", "-n", ns, "--from-literal=a=1")
    proxy = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources=configmaps"])
    cbor = "application/cbor"
    try:
        base = f"/api/v1/namespaces/{ns}/configmaps"
        listed = cluster.request("GET", f"{base}?resourceVersion=0", port=proxy.port, tls=False)
        assert listed.status == 200 and b'"name":"a"' in listed.body, listed.body[:300]
        asked = 0
        for creds in ({}, {"Authorization": "Bearer kube-fanout-tests-not-a-token"}):
            for accept in (PROTO, CLIENT_GO, cbor, DROP):
                for path in (base, f"{base}/a", f"{base}?resourceVersion=0",
                             f"{base}?watch=1&timeoutSeconds=1"):
                    headers = {"Accept": accept, **creds}
                    direct = cluster.request("GET", path, identity="anonymous", headers=headers)
                    ours = cluster.request("GET", path, identity="anonymous",
                                           port=proxy.secure_port, headers=headers)
                    assert direct.status in (401, 403), (path, direct.status)
                    assert (ours.status, ours.body) == (direct.status, direct.body), path
                    asked += 1
        assert asked == 32
        time.sleep(scaled(1))  # A cache started or a probe sent would be in the log by now.
        log = proxy.log_tail(2000)
        assert "protobuf cache starting" not in log, log
        assert "CBOR for this resource" not in log, log
        assert "the upstream ignores drop=" not in log and "leaves managedFields out" not in log

        # The same requests from a user allowed: the protobuf cache starts, the probe is sent
        # (this apiserver's CBOR gate is off: it answers CBOR requests itself).
        wait_cached(cluster, proxy, f"{base}?resourceVersion=0")
        res = cluster.request("GET", f"{base}/a", port=proxy.secure_port, headers={"Accept": cbor})
        assert res.status == 406, (res.status, res.body[:200])
        wait_until(lambda: "does not serve CBOR for this resource" in proxy.log_tail(2000), 10,
                   "the CBOR probe's answer in the log")
        assert "protobuf cache starting" in proxy.log_tail(2000)
        # And drop= (the managedFields opt-out) of a user allowed: the probe goes out once.
        res = cluster.request("GET", f"{base}/a", port=proxy.secure_port, headers={"Accept": DROP})
        assert res.status == 200, (res.status, res.body[:200])
        wait_until(lambda: "the upstream ignores drop=" in proxy.log_tail(2000), 10,
                   "the drop= probe's answer in the log")
    finally:
        assert proxy.stop() == 0, proxy.log_tail()
