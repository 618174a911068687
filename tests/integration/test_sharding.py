"""Sharded LIST and WATCH (KEP-5866, `shardSelector=shardRange(...)`) served from the cache.

The module starts its own control plane with the apiserver's ShardedListAndWatch gate on (the
session's rig has it off) and a kube-fanout in front of it; each case sends the same request to
the apiserver and to kube-fanout and compares status and bytes, and kube-fanout's request log
shows where its answer came from. With the gate off (the session's rig), the apiserver ignores
the parameter, and so must kube-fanout.
"""
import itertools
import json
import urllib.parse
import uuid

import pytest

from kfrig import (Proxy, control_plane, open_watch, read_events, routed, same_snapshot,
                   scaled)

_case = itertools.count()
LOWER = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
UPPER = "shardRange(object.metadata.uid,'0x8000000000000000','0x10000000000000000')"
UPPER_NORMAL = "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"
# Two quarters joined, with the whitespace and parentheses CEL allows.
SPLIT = ("( shardRange(object.metadata.uid,'0x0000000000000000','0x4000000000000000') )||"
         "shardRange( object.metadata.uid , \"0xc000000000000000\" , '0x10000000000000000' )")
SPLIT_NORMAL = ("shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000') || "
                "shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')")


def fnv1a64(value):
    h = 0xcbf29ce484222325
    for b in value.encode():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def q(selector):
    return urllib.parse.quote(selector, safe="")


@pytest.fixture(scope="module")
def gated_cluster():
    """A control plane whose apiserver shards (KF_SHARDED_CLUSTER_DIR: one already running)."""
    with control_plane("KF_SHARDED_CLUSTER_DIR", "kf-sharded-",
                       apiserver_args="--feature-gates=ShardedListAndWatch=true") as c:
        yield c


def start_proxy(cluster, tmp_path_factory, name):
    p = Proxy.start(cluster, tmp_path_factory.mktemp(name))
    return p


@pytest.fixture(scope="module")
def gated_proxy(gated_cluster, tmp_path_factory):
    p = start_proxy(gated_cluster, tmp_path_factory, "sharded-proxy")
    yield p
    assert p.stop() == 0, p.log_tail()


@pytest.fixture(scope="module")
def configmaps(gated_cluster):
    """24 ConfigMaps in a fresh namespace: {name: uid}, with labels on every third."""
    ns = f"kf-shard-{uuid.uuid4().hex[:10]}"
    gated_cluster.kubectl("create", "namespace", ns)
    items = [{"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": f"cm{i:02d}", "namespace": ns,
                           "labels": {"third": "yes"} if i % 3 == 0 else {}},
              "data": {"k": str(i)}} for i in range(24)]
    gated_cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1",
                                                                "kind": "List",
                                                                "items": items}))
    listed = json.loads(gated_cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps").body)
    uids = {o["metadata"]["name"]: o["metadata"]["uid"] for o in listed["items"]}
    assert len(uids) == 24
    yield ns, uids
    gated_cluster.kubectl("delete", "namespace", ns, "--wait=false")


def compare(cluster, proxy, path, expect_route="cache", accept="application/json"):
    """The same GET of the apiserver and kube-fanout: status and body equal; kube-fanout's route."""
    marker = f"kfshard={next(_case)}"
    marked = f"{path}{'&' if '?' in path else '?'}{marker}"
    headers = {"Accept": accept}
    direct, cached = same_snapshot(
        cluster, proxy, lambda port: cluster.request("GET", marked, port=port, headers=headers),
        path, headers=headers)
    assert cached.status == direct.status, (path, cached.body[:300], direct.body[:300])
    assert cached.body == direct.body, (path, cached.body[:400], direct.body[:400])
    assert routed(proxy, marker) == expect_route, path
    return direct


def names(body):
    return [o["metadata"]["name"] for o in json.loads(body)["items"]]


def test_sharded_lists_from_cache_match_the_apiserver(gated_cluster, gated_proxy, configmaps):
    ns, uids = configmaps
    base = f"/api/v1/namespaces/{ns}/configmaps"
    lower = {n for n, u in uids.items() if fnv1a64(u) < 1 << 63}
    assert 0 < len(lower) < 24, "both halves hold objects"
    halves = {}
    for selector, normal in ((LOWER, LOWER), (UPPER, UPPER_NORMAL)):
        direct = compare(gated_cluster, gated_proxy, f"{base}?shardSelector={q(selector)}")
        listed = json.loads(direct.body)
        assert listed["metadata"]["shardInfo"] == {"selector": normal}
        halves[selector] = set(names(direct.body))
    assert halves[LOWER] == lower
    assert halves[LOWER] | halves[UPPER] == set(uids) and not halves[LOWER] & halves[UPPER]
    # The same in protobuf (kube-fanout's protobuf cache): ListMeta field 5.
    for selector in (LOWER, UPPER):
        direct = compare(gated_cluster, gated_proxy, f"{base}?shardSelector={q(selector)}",
                         accept="application/vnd.kubernetes.protobuf")
        assert b"shardInfo" not in direct.body and selector[:10].encode() in direct.body
    # || joins, parentheses and whitespace, echoed in the apiserver's normal form.
    split = compare(gated_cluster, gated_proxy, f"{base}?shardSelector={q(SPLIT)}")
    assert json.loads(split.body)["metadata"]["shardInfo"]["selector"] == SPLIT_NORMAL
    assert set(names(split.body)) == {n for n, u in uids.items()
                                      if fnv1a64(u) < 1 << 62 or fnv1a64(u) >= 3 << 62}
    # By namespace; with a label selector; at RV=0; an empty selector selects everything.
    by_ns = "shardRange(object.metadata.namespace,'0x0000000000000000','0x8000000000000000')"
    got = compare(gated_cluster, gated_proxy, f"{base}?shardSelector={q(by_ns)}")
    assert len(names(got.body)) == (24 if fnv1a64(ns) < 1 << 63 else 0)
    got = compare(gated_cluster, gated_proxy,
                  f"{base}?labelSelector=third%3Dyes&shardSelector={q(LOWER)}")
    assert set(names(got.body)) == {n for n in lower if int(n[2:]) % 3 == 0}
    compare(gated_cluster, gated_proxy, f"{base}?resourceVersion=0&shardSelector={q(UPPER)}")
    got = compare(gated_cluster, gated_proxy, f"{base}?shardSelector=")
    assert len(names(got.body)) == 24 and "shardInfo" not in json.loads(got.body)["metadata"]


def test_sharded_pages_match_the_apiserver_page_by_page(gated_cluster, gated_proxy, configmaps):
    ns, uids = configmaps
    base = f"/api/v1/namespaces/{ns}/configmaps"
    for selector in (LOWER, UPPER):
        seen, cont, pages = [], None, 0
        while True:
            path = f"{base}?limit=4&shardSelector={q(selector)}"
            if cont:
                path += f"&continue={cont}"
            listed = json.loads(compare(gated_cluster, gated_proxy, path).body)
            pages += 1
            seen += [o["metadata"]["name"] for o in listed["items"]]
            # remainingItemCount counts the whole collection: the apiserver's, not the shard's.
            assert "shardInfo" in listed["metadata"]
            cont = listed["metadata"].get("continue")
            if not cont:
                break
        assert pages >= 2 and len(seen) == len(set(seen))
        half = {n for n, u in uids.items() if (fnv1a64(u) < 1 << 63) == (selector == LOWER)}
        assert set(seen) == half


def test_malformed_shard_selectors_get_the_apiservers_answer(gated_cluster, gated_proxy,
                                                            configmaps):
    ns, _ = configmaps
    base = f"/api/v1/namespaces/{ns}/configmaps"
    for selector in ("shardRange(object.metadata.uid,'0x0','0x8000000000000000')",
                     "shardRange(object.metadata.uid,'0x8000000000000000','0x0000000000000000')",
                     "shardRange(object.metadata.name,'0x0000000000000000','0x8000000000000000')",
                     f"{LOWER} ||", "   ", "bad(",
                     "shardRange(object.metadata.uid,'0x000000000000000A','0x8000000000000000')"):
        got = compare(gated_cluster, gated_proxy, f"{base}?shardSelector={q(selector)}",
                      expect_route="passthrough")
        assert got.status == 500 and b"invalid shard selector" in got.body, selector
        got = compare(gated_cluster, gated_proxy, f"{base}?watch=1&shardSelector={q(selector)}",
                      expect_route="passthrough")
        assert got.status == 500 and b"invalid shard selector" in got.body, selector


def test_sharded_watches_stream_the_apiservers_events(gated_cluster, gated_proxy):
    ns = f"kf-shard-{uuid.uuid4().hex[:10]}"
    gated_cluster.kubectl("create", "namespace", ns)
    base = f"/api/v1/namespaces/{ns}/configmaps"
    rv = json.loads(gated_cluster.request("GET", base).body)["metadata"]["resourceVersion"]
    compare(gated_cluster, gated_proxy, f"{base}?resourceVersion={rv}")  # The cache has it.
    watches = {}
    for who, port in (("direct", gated_cluster.port), ("cached", gated_proxy.secure_port)):
        for selector in (LOWER, UPPER):
            marker = f"kfshard=w{who}{selector == LOWER}"
            watches[(who, selector)] = open_watch(
                gated_cluster, port,
                f"{base}?watch=1&resourceVersion={rv}&shardSelector={q(selector)}&{marker}")
    k = lambda *a: gated_cluster.kubectl(*a, "-n", ns)
    made = [f"w{i:02d}" for i in range(16)]
    for name in made:
        k("create", "configmap", name, "--from-literal=k=1")
    uids = {o["metadata"]["name"]: o["metadata"]["uid"]
            for o in json.loads(gated_cluster.request("GET", base).body)["items"]}
    assert set(uids) == set(made)
    for name in made[:8]:
        k("patch", "configmap", name, "-p", '{"data":{"k":"2"}}')
    for name in made[8:12]:
        k("delete", "configmap", name)
    lower = {n for n in made if fnv1a64(uids[n]) < 1 << 63}
    assert 0 < len(lower) < 16
    seen = {}
    for selector in (LOWER, UPPER):
        # Every object: ADDED; the first 8: MODIFIED; the next 4: DELETED.
        mine = [n for n in made if (n in lower) == (selector == LOWER)]
        expected = len(mine) + sum(1 for n in mine if n in made[:12])
        direct = read_events(watches[("direct", selector)][1], expected, scaled(15))
        cached = read_events(watches[("cached", selector)][1], expected, scaled(15))
        assert len(direct) == expected, selector
        assert cached == direct, selector
        seen[selector] = {json.loads(line)["object"]["metadata"]["name"] for line in direct}
    assert seen[LOWER] | seen[UPPER] == set(made) and not seen[LOWER] & seen[UPPER]
    for conn, _ in watches.values():
        conn.close()
    for selector in (LOWER, UPPER):  # Logged when the watch ends.
        assert routed(gated_proxy, f"kfshard=wcached{selector == LOWER}") == "cache"
    # A watch from RV=0 (the initial state as ADDED events), once both caches have the writes.
    for selector in (LOWER, UPPER):
        compare(gated_cluster, gated_proxy, f"{base}?resourceVersion=0&shardSelector={q(selector)}")
        mine = [n for n in made[:8] + made[12:] if (n in lower) == (selector == LOWER)]
        streams = [open_watch(gated_cluster, port, f"{base}?watch=1&resourceVersion=0"
                                                   f"&shardSelector={q(selector)}")
                   for port in (gated_cluster.port, gated_proxy.secure_port)]
        direct, cached = (read_events(resp, len(mine), scaled(15)) for _, resp in streams)
        assert [json.loads(line)["object"]["metadata"]["name"] for line in direct] == mine
        assert cached == direct, selector
        for conn, _ in streams:
            conn.close()
    gated_cluster.kubectl("delete", "namespace", ns, "--wait=false")


def test_without_the_gate_the_shard_selector_is_ignored(cluster, tmp_path_factory):
    """The session's rig (gate off): the apiserver answers the whole set without shardInfo, and
    kube-fanout answers the same from its cache."""
    p = start_proxy(cluster, tmp_path_factory, "unsharded-proxy")
    try:
        ns = f"kf-shard-{uuid.uuid4().hex[:10]}"
        cluster.kubectl("create", "namespace", ns)
        for i in range(6):
            cluster.kubectl("create", "configmap", f"c{i}", "-n", ns, "--from-literal=k=1")
        base = f"/api/v1/namespaces/{ns}/configmaps"
        for selector in (LOWER, UPPER, "bad("):
            got = compare(cluster, p, f"{base}?shardSelector={q(selector)}")
            assert len(names(got.body)) == 6
            assert "shardInfo" not in json.loads(got.body)["metadata"]
        # A watch gets every object's event too.
        streams = [open_watch(cluster, port, f"{base}?watch=1&resourceVersion=0"
                                             f"&shardSelector={q(LOWER)}")
                   for port in (cluster.port, p.secure_port)]
        direct, cached = (read_events(resp, 6, scaled(15)) for _, resp in streams)
        assert len(direct) == 6 and cached == direct
        for conn, _ in streams:
            conn.close()
        cluster.kubectl("delete", "namespace", ns, "--wait=false")
    finally:
        assert p.stop() == 0, p.log_tail()
