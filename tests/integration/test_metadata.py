"""PartialObjectMetadata from the cache, compared byte for byte with the real apiserver.

Metadata-only clients (client-go's metadata client and informers: the garbage collector, quota,
operators) send `Accept: ...;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1` for a LIST and
`as=PartialObjectMetadata` for a GET and a WATCH, protobuf first. kube-fanout answers those of
its cached kinds from the cache, in JSON and protobuf, with the apiserver's bytes: the lists
(`"items":null` when empty), objects, the NotFound Status (JSON: the apiserver negotiates errors
without the conversion), watch events, bookmarks and WatchList's end marker. Table and a metadata
form asked of the other kind of endpoint (the apiserver's 406) stay the apiserver's.
"""
import json
import time

import pytest

from kfrig import scaled
from test_cache import namespace_factory, objects, routed  # noqa: F401
from test_clients import (InformerRun, informer_binary, proxy_lines_for, split,  # noqa: F401
                          wait_for)
from test_protobuf import (PROTO, compare, frame_event, list_items, marked, object_meta,
                           open_watch, read_frames, unknown, wait_cached)

META = "meta.k8s.io;v=v1"
JSON_LIST = f"application/json;as=PartialObjectMetadataList;g={META},application/json"
JSON_OBJECT = f"application/json;as=PartialObjectMetadata;g={META},application/json"
# client-go's metadata client (k8s.io/client-go/metadata): protobuf first.
CLIENT_LIST = (f"{PROTO};as=PartialObjectMetadataList;g={META},"
               f"application/json;as=PartialObjectMetadataList;g={META},application/json")
CLIENT_OBJECT = (f"{PROTO};as=PartialObjectMetadata;g={META},"
                 f"application/json;as=PartialObjectMetadata;g={META},application/json")


def test_metadata_lists_and_gets_match_the_apiserver(cluster, cached_proxy, objects):
    ns = objects
    # The setup happened: the form, and the objects the fixture made, with their managedFields.
    res = compare(cluster, cached_proxy, f"/api/v1/namespaces/{ns}/pods?resourceVersion=0",
                  accept=JSON_LIST)
    body = json.loads(res.body)
    assert (body["kind"], body["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
    assert [i["metadata"]["name"] for i in body["items"]] == ["p0", "p1", "p2", "p3"]
    assert all(i["kind"] == "PartialObjectMetadata" and "spec" not in i for i in body["items"])
    assert all(i["metadata"]["managedFields"] for i in body["items"])
    for path in [
        f"/api/v1/namespaces/{ns}/configmaps?resourceVersion=0",
        f"/api/v1/namespaces/{ns}/pods?resourceVersion=0&labelSelector=app%3Dweb%2Ctier",
        "/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3Dnode-a",
        "/api/v1/namespaces/no-such-namespace/pods?resourceVersion=0",  # "items":null
        "/api/v1/nodes?resourceVersion=0",
    ]:
        compare(cluster, cached_proxy, path, accept=JSON_LIST)
    assert b'"items":null' in compare(
        cluster, cached_proxy, f"/api/v1/namespaces/{ns}/pods?resourceVersion=0&labelSelector=x",
        accept=JSON_LIST).body
    # Pages at one RV (Exact): continue tokens and remainingItemCount as the apiserver's.
    rv = body["metadata"]["resourceVersion"]
    page = f"/api/v1/namespaces/{ns}/pods?limit=3&resourceVersion={rv}&resourceVersionMatch=Exact"
    first = json.loads(compare(cluster, cached_proxy, page, accept=JSON_LIST).body)
    assert first["metadata"]["remainingItemCount"] == 1
    last = json.loads(compare(cluster, cached_proxy,
                              f"/api/v1/namespaces/{ns}/pods?limit=3&continue="
                              f"{first['metadata']['continue']}", accept=JSON_LIST).body)
    assert [i["metadata"]["name"] for i in first["items"] + last["items"]] == [
        "p0", "p1", "p2", "p3"]
    for path in [f"/api/v1/namespaces/{ns}/pods/p1?resourceVersion=0",
                 f"/api/v1/namespaces/{ns}/pods/p1",
                 f"/api/v1/namespaces/{ns}/pods/nope",
                 "/api/v1/nodes/node-a?resourceVersion=0"]:
        compare(cluster, cached_proxy, path, accept=JSON_OBJECT)


def test_metadata_in_protobuf_matches_the_apiserver(cluster, cached_proxy, objects):
    ns = objects
    wait_cached(cluster, cached_proxy, "/api/v1/pods?resourceVersion=0", accept=CLIENT_LIST)
    res = compare(cluster, cached_proxy, f"/api/v1/namespaces/{ns}/pods?resourceVersion=0",
                  accept=CLIENT_LIST)
    assert unknown(res.body)[0] == "PartialObjectMetadataList"
    items, _, _ = list_items(res.body)
    assert [object_meta(i)["name"] for i in items] == ["p0", "p1", "p2", "p3"]
    compare(cluster, cached_proxy,
            f"/api/v1/namespaces/{ns}/pods?resourceVersion=0&labelSelector=app%3Ddb",
            accept=CLIENT_LIST)
    res = compare(cluster, cached_proxy, f"/api/v1/namespaces/{ns}/pods/p2?resourceVersion=0",
                  accept=CLIENT_OBJECT)
    assert unknown(res.body)[0] == "PartialObjectMetadata"
    # The NotFound Status: JSON, as the apiserver negotiates an error without the conversion.
    res = compare(cluster, cached_proxy, f"/api/v1/namespaces/{ns}/pods/nope",
                  accept=CLIENT_OBJECT)
    assert res.status == 404 and res.body.startswith(b'{"kind":"Status"')


def test_what_only_the_apiserver_renders_still_passes_through(cluster, cached_proxy, objects):
    ns = objects
    for path, accept, status in [
            (f"/api/v1/namespaces/{ns}/pods?resourceVersion=0",
             f"application/json;as=Table;g={META},application/json", 200),
            (f"/api/v1/namespaces/{ns}/pods?resourceVersion=0", JSON_OBJECT, 406),
            (f"/api/v1/namespaces/{ns}/pods/p0?resourceVersion=0", JSON_LIST, 406)]:
        p, m = marked(path)
        direct = cluster.request("GET", p, headers={"Accept": accept})
        proxied = cluster.request("GET", p, port=cached_proxy.secure_port,
                                  headers={"Accept": accept})
        assert (proxied.status, direct.status) == (status, status), proxied.body[:300]
        if status == 406:
            assert proxied.body == direct.body
        assert routed(cached_proxy, m) == "passthrough", (path, accept)


def read_lines(resp, count, timeout):
    data, deadline = b"", time.monotonic() + timeout
    while data.count(b"\n") < count and time.monotonic() < deadline:
        chunk = resp.read1(65536)
        if not chunk:
            break
        data += chunk
    return data.split(b"\n")[:count]


def watch_both(cluster, cached_proxy, path, accept, changes, read, count):
    """The same watch through the apiserver and kube-fanout; `changes` run once both are open;
    each stream read (`read(resp, count, timeout)`) and checked to come from the cache."""
    p, m = marked(path)
    streams = [open_watch(cluster, None, p, accept=accept),
               open_watch(cluster, cached_proxy.secure_port, p, accept=accept)]
    changes()
    got = [read(r, count, scaled(15)) for _, r in streams]
    for conn, _ in streams:
        conn.close()
    assert routed(cached_proxy, m) == "cache"  # Logged when the watch ends.
    return got


def test_metadata_watch_streams_the_apiservers_events(cluster, cached_proxy, namespace):
    ns = namespace
    cluster.kubectl("create", "configmap", "w0", "-n", ns, "--from-literal=a=0")
    # The protobuf cache started first, so its window reaches back to the RV watched from.
    wait_cached(cluster, cached_proxy, f"/api/v1/namespaces/{ns}/configmaps?resourceVersion=0",
                accept=CLIENT_LIST)
    rv = json.loads(cluster.request(
        "GET", f"/api/v1/namespaces/{ns}/configmaps").body)["metadata"]["resourceVersion"]

    def changes(name):
        def run():
            cluster.kubectl("create", "configmap", name, "-n", ns, "--from-literal=b=1")
            cluster.kubectl("label", "configmap", name, "-n", ns, "x=y")
            cluster.kubectl("label", "configmap", name, "-n", ns, "x-")  # leaves x=y
            cluster.kubectl("delete", "configmap", name, "-n", ns)
        return run

    # JSON, from an RV, with a label selector the object enters and leaves.
    path = (f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={rv}"
            "&labelSelector=x%3Dy&timeoutSeconds=30")
    direct, cached = watch_both(cluster, cached_proxy, path, JSON_OBJECT, changes("w1"),
                                read_lines, 2)
    events = [json.loads(line) for line in direct]
    assert [(e["type"], e["object"]["kind"]) for e in events] == [
        ("ADDED", "PartialObjectMetadata"), ("DELETED", "PartialObjectMetadata")]
    assert cached == direct
    # Protobuf (client-go's metadata informer), every event: w1's four, then w2's.
    path = f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=30"
    direct, cached = watch_both(cluster, cached_proxy, path, CLIENT_OBJECT, changes("w2"),
                                read_frames, 8)
    assert len(direct) == 8
    assert [frame_event(f)[:2] for f in direct[-4:]] == [
        (t, "PartialObjectMetadata") for t in ("ADDED", "MODIFIED", "MODIFIED", "DELETED")]
    assert cached == direct


def test_metadata_watchlist_ends_with_the_apiservers_bookmark(cluster, cached_proxy,
                                                              namespace):
    ns = namespace
    for i in range(2):
        cluster.kubectl("create", "configmap", f"wl{i}", "-n", ns, f"--from-literal=i={i}")
    wait_cached(cluster, cached_proxy, f"/api/v1/namespaces/{ns}/configmaps?resourceVersion=0",
                accept=CLIENT_LIST)
    path = (f"/api/v1/namespaces/{ns}/configmaps?watch=1&sendInitialEvents=true"
            "&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=30")
    # JSON: the initial ADDEDs, then the end bookmark; its RV is each server's own list RV.
    direct, cached = watch_both(cluster, cached_proxy, path, JSON_OBJECT, lambda: None,
                                read_lines, 3)
    assert [json.loads(line)["type"] for line in direct] == ["ADDED", "ADDED", "BOOKMARK"]
    assert cached[:2] == direct[:2]
    marks = [json.loads(lines[2])["object"] for lines in (direct, cached)]
    for mark in marks:
        assert mark["metadata"].pop("resourceVersion")
    assert marks[0] == marks[1] == {
        "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
        "metadata": {"annotations": {"k8s.io/initial-events-end": "true"}}}
    d_rv, c_rv = (json.loads(lines[2])["object"]["metadata"]["resourceVersion"]
                  for lines in (direct, cached))
    assert direct[2].replace(d_rv.encode(), b"RV") == cached[2].replace(c_rv.encode(), b"RV")
    # Protobuf.
    direct, cached = watch_both(cluster, cached_proxy, path, CLIENT_OBJECT, lambda: None,
                                read_frames, 3)
    assert [frame_event(f)[:2] for f in direct] == [
        ("ADDED", "PartialObjectMetadata"), ("ADDED", "PartialObjectMetadata"),
        ("BOOKMARK", "PartialObjectMetadata")]
    assert cached[:2] == direct[:2]
    d_rv, c_rv = (object_meta(frame_event(f[2])[2])["resourceVersion"] for f in (direct, cached))
    assert direct[2].replace(d_rv.encode(), b"RV") == cached[2].replace(c_rv.encode(), b"RV")


@pytest.mark.parametrize("watchlist", [True, False], ids=["watchlist", "list-then-watch"])
def test_client_go_metadata_informer_sees_the_same_events_through_the_cache(
        cluster, cached_proxy, namespace, informer_binary, tmp_path, watchlist):
    """client-go's metadata informer (k8s.io/client-go/metadata/metadatainformer, v0.36.3) of
    ConfigMaps beside direct: the same handler calls, its requests answered from the cache."""
    ns = namespace
    cluster.kubectl("create", "configmap", "pre", "-n", ns, "--from-literal=a=0")
    mode = "watchlist" if watchlist else "list"
    runs = {name: InformerRun(informer_binary, cluster, server, f"{ns}-node", watchlist,
                              f"kf-metadata-informer/{ns}/{mode}/{name}", tmp_path,
                              extra_args=["--metadata=configmaps", f"--namespace={ns}"])
            for name, server in (("direct", cluster.url), ("cached", cached_proxy.server))}
    name = "metadata-configmaps"
    try:
        assert wait_for(lambda: all(r.synced() for r in runs.values()), scaled(30)), \
            {n: r.stderr_tail() for n, r in runs.items()}
        cluster.kubectl("create", "configmap", "live", "-n", ns, "--from-literal=b=1")
        cluster.kubectl("label", "configmap", "live", "-n", ns, "x=y")
        cluster.kubectl("delete", "configmap", "pre", "-n", ns)
        assert wait_for(lambda: all(len(r.events(name)) >= 4 for r in runs.values()),
                        scaled(20)), {n: r.events(name) for n, r in runs.items()}
        time.sleep(1)
    finally:
        codes = {n: r.stop() for n, r in runs.items()}
    assert codes == {"direct": 0, "cached": 0}, {n: r.stderr_tail() for n, r in runs.items()}
    direct, cached = (split(runs[n].events(name)) for n in ("direct", "cached"))
    # The setup happened: the initial object, then the three changes.
    assert [op for op, key, _ in direct[0]] == ["add"] and direct[0][0][1] == f"{ns}/pre"
    assert [(op, key.split("/")[1]) for op, key, _ in direct[1]] == [
        ("add", "live"), ("update", "live"), ("delete", "pre")]
    assert cached == direct
    # Its LIST or WatchList and its WATCH went to the cache, in protobuf as client-go asked. A
    # watch is logged when kube-fanout sees it end, which may be just after the informer stopped.
    def logged():
        return [e for e in proxy_lines_for(cached_proxy,
                                           f"kf-metadata-informer/{ns}/{mode}/cached")
                if "PartialObjectMetadata" in e.get("accept", "")]
    wait_for(lambda: {e["verb"] for e in logged()} >= {"watch"}, scaled(10))
    lines = logged()
    assert lines and {e["route"] for e in lines} == {"cache"}, lines
    assert {e["verb"] for e in lines} == ({"watch"} if watchlist else {"list", "watch"}), lines
