"""Two kube-fanout replicas behind one address (issue: "Beyond one replica", item 2), on the
real control plane. The address is a loopback TCP balancer the test controls (kfrig.Relay,
moved from one replica to the other: its connections cut, new ones to the other replica):

- a watch moved between replicas mid-stream resumes from its last resourceVersion, without a
  410 or a relist, and sees every event once and in order; both replicas served it from
  their caches;
- a paginated LIST continued on the other replica with the same continue token gets the
  pages the apiserver gives for that token, byte for byte, from the cache.

Each test checks its setup (writes made, events seen, moves happened) before it compares.
"""
import asyncio
import json
import uuid

import pytest

from kfrig import SANITIZER, Proxy, Relay, control_plane, metric_values
from kfwatch import Watcher, wait_for
from test_warm_restart import create_configmap

APF_HEADER = "x-kubernetes-pf-flowschema-uid"  # The apiserver's; kube-fanout's cache has none.


def cache_watches(cluster, proxy):
    text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
    return metric_values(text, "kube_fanout_cache_requests_total").get('{verb="watch"}', 0)


def start_replicas(cluster, tmp_path):
    replicas = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        replicas.append(Proxy.start(cluster, tmp_path / name,
                                    extra_args=["--cache-resources=configmaps"]))
    return replicas


def move(relay, to):
    """Cuts every connection through the balancer; new ones go to `to`."""
    relay.cut()
    relay.target_port = to.port
    relay.restore()


def test_a_watch_moved_between_replicas_resumes_from_its_rv_with_every_event_once_in_order(
        cluster, namespace, tmp_path):
    a, b = start_replicas(cluster, tmp_path)
    relay = Relay(a.port)
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    try:
        listed = cluster.request("GET", f"{path}?resourceVersion=0", port=a.port, tls=False)
        assert listed.status == 200
        rv0 = json.loads(listed.body)["metadata"]["resourceVersion"]

        async def scenario():
            watcher = Watcher(relay.port, path, cluster.token("admin"), rv0)
            watcher.target = 30
            task = asyncio.create_task(watcher.run(asyncio.Semaphore(1), stop_on_gone=True))
            await wait_for(lambda: watcher.connects == 1, 10, "the watch to connect")
            writes = []
            for i in range(30):
                if i in (10, 20):
                    # Mid-stream: the watch has seen some of the writes so far, the replica
                    # it moves to may not have seen them all yet.
                    await asyncio.to_thread(move, relay, b if i == 10 else a)
                writes.append(await asyncio.to_thread(create_configmap, cluster, namespace,
                                                      f"cm-{i}"))
                await asyncio.sleep(0.03)
            await wait_for(watcher.done.is_set, 30, "all 30 events")
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            return watcher, writes

        watcher, writes = asyncio.run(scenario())
        assert len(writes) == 30
        assert watcher.connects == 3  # Setup: moved twice (a → b → a), resumed each time.
        assert cache_watches(cluster, a) == 2 and cache_watches(cluster, b) == 1
        assert watcher.gone == 0 and watcher.passed_through == 0
        assert watcher.events == writes  # Every event once, in the order written.
        assert watcher.rvs == sorted(set(watcher.rvs))
    finally:
        relay.stop()
        for p in (a, b):
            p.stop()


def test_a_paginated_list_continues_on_the_other_replica_with_the_same_token(
        cluster, namespace, tmp_path):
    a, b = start_replicas(cluster, tmp_path)
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    try:
        for i in range(12):
            create_configmap(cluster, namespace, f"page-{i:02d}")
        replica_pages, apiserver_pages = [], []
        token, turn = None, 0
        while True:
            query = f"{path}?limit=5" + (f"&continue={token}" if token else "")
            replica = (a, b)[turn % 2]
            got = cluster.request("GET", query, port=replica.port, tls=False)
            want = cluster.request("GET", query)
            assert got.status == 200 and want.status == 200, (got.body, want.body)
            assert APF_HEADER not in got.headers  # Served from the replica's cache.
            replica_pages.append(got.body)
            apiserver_pages.append(want.body)
            token = json.loads(got.body)["metadata"].get("continue")
            turn += 1
            if not token:
                break
        assert turn == 3  # Setup: 12 objects in pages of 5 over a, b, a.
        assert replica_pages == apiserver_pages  # The same pages, byte for byte.
        names = [i["metadata"]["name"] for p in replica_pages for i in json.loads(p)["items"]]
        assert names == [f"page-{i:02d}" for i in range(12)]
        rvs = {json.loads(p)["metadata"]["resourceVersion"] for p in replica_pages}
        assert len(rvs) == 1  # One snapshot across both replicas.
    finally:
        for p in (a, b):
            p.stop()


def apiserver_reads(cluster, resource):
    """LISTs of `resource` the apiserver has served, and its watches of it open now
    (apiserver_request_total counts a watch only when it ends)."""
    text = cluster.request("GET", "/metrics").body.decode()
    lists = {labels: v for labels, v in metric_values(text, "apiserver_request_total").items()
             if f'resource="{resource}"' in labels and 'verb="LIST"' in labels}
    watches = sum(v for labels, v in
                  metric_values(text, "apiserver_longrunning_requests").items()
                  if f'resource="{resource}"' in labels and 'verb="WATCH"' in labels)
    return {"LIST": lists, "open WATCH": watches}


def list_increase(before, after):
    """LISTs served between two apiserver_reads, by their labels (scope, code, ...)."""
    grown = {labels: v - before.get(labels, 0) for labels, v in after.items()}
    return {labels: v for labels, v in grown.items() if v}


def progress_watches(cluster, proxy):
    text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
    return metric_values(text, "kube_fanout_upstream_progress_watches_total").get(
        '{resource="configmaps"}', 0)


@pytest.fixture(scope="module")
def quiet_cluster():
    """A control plane only this module's replicas read: the session's also serves long-lived
    kube-fanouts (the `cached_proxy` fixture's), whose self-checks LIST every cached resource
    now and then and would be counted as this test's reads."""
    with control_plane("KF_REPLICAS_CLUSTER_DIR", "kf-replicas-") as c:
        yield c


def test_losing_a_replica_moves_its_watchers_to_the_other_without_reads_at_the_apiserver(
        quiet_cluster, tmp_path):
    cluster = quiet_cluster
    namespace = f"kf-replicas-{uuid.uuid4().hex[:10]}"
    cluster.kubectl("create", "namespace", namespace)
    a, b = start_replicas(cluster, tmp_path)
    relay = Relay(a.port)
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    watchers = 200 if SANITIZER else 1000  # A sanitized build is several times slower.
    try:
        listed = cluster.request("GET", f"{path}?resourceVersion=0", port=a.port, tls=False)
        rv0 = json.loads(listed.body)["metadata"]["resourceVersion"]

        async def scenario():
            pool = [Watcher(relay.port, path, cluster.token("admin"), rv0)
                    for _ in range(watchers)]
            gate = asyncio.Semaphore(100)
            tasks = [asyncio.create_task(w.run(gate, stop_on_gone=True)) for w in pool]
            await wait_for(lambda: all(w.connects == 1 for w in pool), 60, "watchers")
            writes = [await asyncio.to_thread(create_configmap, cluster, namespace, f"cm-{i}")
                      for i in range(5)]
            await wait_for(lambda: all(len(w.events) == 5 for w in pool), 60, "5 events")
            for w in pool:
                w.target = 10
            before = await asyncio.to_thread(apiserver_reads, cluster, "configmaps")
            a.process.kill()  # Lost: its connections die with it.
            a.process.wait()
            await asyncio.to_thread(move, relay, b)
            writes += [await asyncio.to_thread(create_configmap, cluster, namespace, f"cm-{i}")
                       for i in range(5, 10)]
            await wait_for(lambda: all(w.done.is_set() for w in pool), 120, "all moved")
            await asyncio.sleep(4)  # b's progress watches (timeoutSeconds=3), if any, ended.
            after = await asyncio.to_thread(apiserver_reads, cluster, "configmaps")
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            return pool, writes, {"LIST": list_increase(before["LIST"], after["LIST"]),
                                  "open WATCH": after["open WATCH"] - before["open WATCH"]}

        pool, writes, reads = asyncio.run(scenario())
        assert all(w.connects >= 2 for w in pool)  # Setup: every watcher moved (retrying
        # while the balancer was being moved counts too).
        assert cache_watches(cluster, b) == watchers
        assert sum(w.gone for w in pool) == 0 and sum(w.passed_through for w in pool) == 0
        assert all(w.events == writes for w in pool)
        # No LIST reached the apiserver, and it holds one watch fewer (a's), none new; b's
        # short progress watches (watchers arriving with an RV b had not reached yet: one at
        # a time, shared by all) have ended by now.
        progress = progress_watches(cluster, b)
        listed = [line for p in (a, b) for line in p.log_path.read_text().splitlines()
                  if "cache synced" in line or "relist" in line or "self-check" in line]
        assert not reads["LIST"] and reads["open WATCH"] <= -1, (reads, progress, listed)
        assert progress <= 3
        print(f"\nlost replica: {watchers} watchers moved to the other, 0 410s; apiserver "
              f"requests of configmaps during the move: {reads} (b's progress watches: "
              f"{progress:.0f})")
    finally:
        relay.stop()
        for p in (a, b):
            p.stop()
