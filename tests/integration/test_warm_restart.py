"""Warm restart (--cache-snapshot-dir; issue: "Beyond one replica", item 3) on the real control
plane. Many watchers follow kube-fanout; kube-fanout is killed with SIGKILL while the apiserver
takes more writes, and started again on the same ports:

- with a snapshot, every watcher resumes from its last resourceVersion without a 410 and sees
  every event once and in order, and the apiserver serves no LIST of any cached resource;
- without one (the comparison, in test_faults.py: SIGKILL and restart under 5,000 watchers),
  the restart costs a LIST per cached resource and a fill of each window from the upstream
  (docs/snapshot.md, "Without a snapshot") that the watchers wait for, or a watch
  passed through to the apiserver;
- a corrupt, stale or wrong-version snapshot, and a directory others may read, are refused
  with one log line and a metric, and the resource lists as before.

Each test checks its setup (objects created, events seen, snapshots written) before it
compares. KF_WARM_RESTART_WATCHERS sets the number of watch streams (default 5,000; 500
under a sanitizer).
"""
import asyncio
import json
import os
import signal
import subprocess
import time

from kfrig import SANITIZER, Proxy, metric_values, scaled, wait_until
from kfwatch import Watcher, stop_all, wait_for
from test_compaction import compact_etcd

# Fewer under a sanitizer (tests/sanitize), whose build is several times slower.
WATCHERS = int(os.environ.get("KF_WARM_RESTART_WATCHERS", "500" if SANITIZER else "5000"))
CACHED = ("pods", "nodes", "services", "namespaces", "configmaps", "endpointslices", "events",
          "csidrivers", "runtimeclasses", "servicecidrs")
DEFAULT_CACHES = len(CACHED) + 1  # Events twice: v1 and events.k8s.io/v1.


def apiserver_lists(cluster):
    """LISTs the apiserver has served of the resources kube-fanout caches, by resource."""
    text = cluster.request("GET", "/metrics").body.decode()
    out = {}
    for labels, v in metric_values(text, "apiserver_request_total").items():
        if 'verb="LIST"' not in labels:
            continue
        for r in CACHED:
            if f'resource="{r}"' in labels:
                out[r] = out.get(r, 0) + v
    return out


def lists_delta(before, after):
    return {r: after.get(r, 0) - before.get(r, 0) for r in CACHED
            if after.get(r, 0) != before.get(r, 0)}


def proxy_metric(cluster, proxy, name):
    text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
    return metric_values(text, name)


def kill_hard(proxy):
    proxy.process.send_signal(signal.SIGKILL)
    proxy.process.wait()


def restart(proxy, cluster):
    """The same command line again: same ports, same flags; returns when it is ready."""
    log = open(proxy.log_path, "ab")
    process = subprocess.Popen(proxy.process.args, stdout=log, stderr=subprocess.STDOUT)
    again = Proxy(process, proxy.port, proxy.secure_port, proxy.log_path)
    started = time.monotonic()
    again.wait_ready(cluster)
    return again, time.monotonic() - started


def create_configmap(cluster, namespace, name):
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name}, "data": {"k": name}})
    r = cluster.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", body=body,
                        headers={"Content-Type": "application/json"})
    assert r.status == 201, r.body
    return ("ADDED", name)


def label_configmap(cluster, namespace, name):
    r = cluster.request("PATCH", f"/api/v1/namespaces/{namespace}/configmaps/{name}",
                        body=json.dumps({"metadata": {"labels": {"round": "2"}}}),
                        headers={"Content-Type": "application/merge-patch+json"})
    assert r.status == 200, r.body
    return ("MODIFIED", name)


def delete_configmap(cluster, namespace, name):
    r = cluster.request("DELETE", f"/api/v1/namespaces/{namespace}/configmaps/{name}")
    assert r.status == 200, r.body
    return ("DELETED", name)


async def restart_scenario(cluster, namespace, proxy, watchers, stop_on_gone):
    """Watchers follow `proxy`; 10 creates; SIGKILL; 7 writes while it is down; restart.
    Returns (proxy, writes, LISTs at the apiserver during the restart, seconds to ready,
    seconds until every watcher resumed or was refused)."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    listed = cluster.request("GET", f"{path}?resourceVersion=0", port=proxy.port, tls=False)
    assert listed.status == 200, listed.body
    rv0 = json.loads(listed.body)["metadata"]["resourceVersion"]
    pool = [Watcher(proxy.port, path, cluster.token("admin"), rv0) for _ in range(watchers)]
    gate = asyncio.Semaphore(200)
    tasks = [asyncio.create_task(w.run(gate, stop_on_gone)) for w in pool]
    try:
        await wait_for(lambda: sum(w.connects for w in pool) == len(pool), 120,
                       "watchers connected")
        await asyncio.sleep(0.5)
        writes = [await asyncio.to_thread(create_configmap, cluster, namespace, f"cm-{i}")
                  for i in range(10)]
        await wait_for(lambda: all(len(w.events) >= 10 for w in pool), 120,
                       "the first 10 events at every watcher")
        assert all(w.events == writes for w in pool)  # Setup: every watcher saw the creates.
        await asyncio.sleep(2.5)  # A snapshot interval (1 s) after the last event, when used.

        before = await asyncio.to_thread(apiserver_lists, cluster)
        log_mark = len(proxy.log_lines())
        for w in pool:
            w.passed_before = w.passed_through
        kill_hard(proxy)
        for i in range(10, 15):
            writes.append(await asyncio.to_thread(create_configmap, cluster, namespace,
                                                  f"cm-{i}"))
        writes.append(await asyncio.to_thread(label_configmap, cluster, namespace, "cm-0"))
        writes.append(await asyncio.to_thread(delete_configmap, cluster, namespace, "cm-1"))
        assert len(writes) == 17
        for w in pool:
            w.target = len(writes)
        started = time.monotonic()
        proxy, ready_seconds = await asyncio.to_thread(restart, proxy, cluster)
        await wait_for(lambda: all(w.done.is_set() for w in pool), 180,
                       "every watcher resumed (or refused)")
        resumed_seconds = time.monotonic() - started
        await asyncio.sleep(2)  # Anything the restart would still list has started by now.
        after = await asyncio.to_thread(apiserver_lists, cluster)
    finally:
        await stop_all(pool, tasks)
    lists = lists_delta(before, after)
    lists["kube-fanout"] = sum(1 for l in proxy.log_lines()[log_mark:] if "cache synced" in l)
    return proxy, writes, pool, lists, ready_seconds, resumed_seconds, rv0


def test_warm_restart_resumes_every_watcher_without_410_or_apiserver_list(
        cluster, namespace, tmp_path):
    snapshots = tmp_path / "snapshots"
    proxy = Proxy.start(cluster, tmp_path, extra_args=[
        f"--cache-snapshot-dir={snapshots}", "--cache-snapshot-interval=1s"])
    try:
        proxy, writes, pool, lists, ready, resumed, rv0 = asyncio.run(
            restart_scenario(cluster, namespace, proxy, WATCHERS, stop_on_gone=True))
        # A new watch from before the first create replays the restored window, then the
        # writes made while kube-fanout was down (a cold cache would answer 410).
        late = Watcher(proxy.port, f"/api/v1/namespaces/{namespace}/configmaps",
                       cluster.token("admin"), rv0)
        late.target = len(writes)

        async def follow():
            task = asyncio.create_task(late.run(asyncio.Semaphore(1), stop_on_gone=True))
            await wait_for(late.done.is_set, 30, "the late watcher")
            task.cancel()
        asyncio.run(follow())
        assert late.gone == 0 and late.events == writes and late.connects == 1, late.events
        # The snapshots were written and loaded: one per cached resource.
        assert len(list(snapshots.glob("*.snap"))) == DEFAULT_CACHES
        loads = proxy_metric(cluster, proxy, "kube_fanout_cache_snapshot_loads_total")
        assert loads['{result="loaded"}'] == DEFAULT_CACHES, loads
        resumed_lines = [l for l in proxy.log_lines()
                         if "resuming the upstream watch from the snapshot" in l]
        assert len(resumed_lines) >= DEFAULT_CACHES
        # Every watcher: no 410, every event once, in the order written, across the restart.
        assert sum(w.gone for w in pool) == 0
        bad = [w.events for w in pool if w.events != writes]
        assert not bad, f"{len(bad)} watchers saw {bad[0]}, want {writes}"
        assert all(w.rvs == sorted(set(w.rvs)) for w in pool)
        assert all(w.connects >= 2 for w in pool)  # Each was cut and resumed.
        # Watches kube-fanout passed through to the apiserver (not 410s, not LISTs): a watch
        # whose client's token it had not reviewed yet, past its TokenReview budget
        # (--authentication-token-review-qps); its review cache starts empty, as at any start.
        passed_before = sum(w.passed_before for w in pool)
        passed_after = sum(w.passed_through for w in pool) - passed_before
        throttled = proxy_metric(cluster, proxy,
                                 "kube_fanout_token_reviews_throttled_total").get("", 0)
        # kube-fanout did not relist (no 410 from the apiserver), and the apiserver listed
        # nothing kube-fanout caches.
        relists = proxy_metric(cluster, proxy, "kube_fanout_upstream_relists_total")
        assert sum(relists.values()) == 0, (relists, [l for l in proxy.log_lines()
                                                      if "relisting" in l or "refused" in l])
        # kube-fanout logs "cache synced" after each LIST: none after the restart.
        assert lists.pop("kube-fanout") == 0, proxy.log_tail(40)
        # The apiserver's own NodePort/ClusterIP repair loop lists Services every 3 minutes
        # (through its loopback client, counted alike; seen on the rig with no client at all): one
        # such LIST may fall in the window.
        if lists.get("services") == 1:
            del lists["services"]
        assert lists == {}, (lists, proxy.log_tail(40))
        print(f"\nwarm restart: {len(pool)} watchers, ready {ready:.2f}s after start, all "
              f"resumed {resumed:.2f}s after start; apiserver LISTs {lists}; 410s 0; passed "
              f"through (unreviewed tokens) before {passed_before}, after {passed_after} "
              f"(TokenReviews throttled after the restart: {throttled:.0f})")
    finally:
        proxy.stop()


def corrupt_first_byte_after_header(path):
    data = bytearray(path.read_bytes())
    data[40] ^= 0x01
    path.write_bytes(bytes(data))


def test_corrupt_stale_or_wrong_version_snapshots_are_ignored_with_a_log_line(
        cluster, tmp_path):
    snapshots = tmp_path / "snapshots"
    args = [f"--cache-snapshot-dir={snapshots}", "--cache-snapshot-interval=1s",
            "--cache-resources=configmaps,namespaces,services", "--protobuf-cache-resources="]
    proxy = Proxy.start(cluster, tmp_path, extra_args=args)
    deadline = time.monotonic() + scaled(10)
    while len(list(snapshots.glob("*.snap"))) < 3:
        assert time.monotonic() < deadline, "snapshots not written"
        time.sleep(0.1)
    proxy.stop()
    assert (snapshots.stat().st_mode & 0o777) == 0o700
    assert all((f.stat().st_mode & 0o777) == 0o600 for f in snapshots.glob("*.snap"))
    corrupt_first_byte_after_header(snapshots / "configmaps_v1.snap")
    version = bytearray((snapshots / "namespaces_v1.snap").read_bytes())
    version[8] = 99
    (snapshots / "namespaces_v1.snap").write_bytes(bytes(version))
    before = apiserver_lists(cluster)
    again = Proxy.start(cluster, tmp_path, extra_args=args + ["--cache-snapshot-max-age=1h"])
    try:
        loads = proxy_metric(cluster, again, "kube_fanout_cache_snapshot_loads_total")
        assert loads['{result="corrupt"}'] == 1 and loads['{result="version"}'] == 1, loads
        assert loads['{result="loaded"}'] == 1, loads  # services
        ignored = [json.loads(l) for l in again.log_lines() if "cache snapshot ignored" in l]
        assert sorted(e["why"] for e in ignored) == ["corrupt", "version"], ignored
        time.sleep(1)
        # This kube-fanout's three resources only: the rig's other kube-fanouts (the session's
        # fixtures cache the default resources) may relist theirs in the window, which lasted
        # 45 s under tsan (an idle events watch resumed, expired and relisted: events +2).
        lists = {r: n for r, n in lists_delta(before, apiserver_lists(cluster)).items()
                 if r in ("configmaps", "namespaces", "services")}
        # The apiserver's own Services repair loop may list once in the window (as above);
        # kube-fanout's services came from its snapshot (loaded == 1 above).
        if lists.get("services") == 1:
            del lists["services"]
        assert set(lists) == {"configmaps", "namespaces"}, lists  # Listed; services not.
        listed = cluster.request("GET", "/api/v1/configmaps?resourceVersion=0", port=again.port,
                                 tls=False)
        assert listed.status == 200 and json.loads(listed.body)["items"]
    finally:
        again.stop()
    # Stale: older than --cache-snapshot-max-age.
    time.sleep(2.2)
    stale = Proxy.start(cluster, tmp_path, extra_args=args + ["--cache-snapshot-max-age=1s"])
    try:
        loads = proxy_metric(cluster, stale, "kube_fanout_cache_snapshot_loads_total")
        assert loads['{result="stale"}'] == 3, loads
    finally:
        stale.stop()


def test_a_snapshot_directory_others_may_read_is_refused(cluster, tmp_path):
    snapshots = tmp_path / "open"
    snapshots.mkdir(mode=0o755)
    snapshots.chmod(0o755)
    proxy = Proxy.start(cluster, tmp_path, extra_args=[
        f"--cache-snapshot-dir={snapshots}", "--cache-snapshot-interval=1s",
        "--cache-resources=configmaps"])
    try:
        time.sleep(1.5)
        assert proxy_metric(cluster, proxy, "kube_fanout_cache_snapshot_disabled")[""] == 1
        assert any("accessible to group or others" in l for l in proxy.log_lines())
        assert not list(snapshots.iterdir())
        r = cluster.request("GET", "/api/v1/configmaps?resourceVersion=0", port=proxy.port,
                            tls=False)
        assert r.status == 200  # Serving as without snapshots.
    finally:
        proxy.stop()


def test_a_snapshot_older_than_the_apiserver_window_relists_and_turns_the_difference_into_events(
        cluster, namespace, tmp_path):
    """The snapshot's RV is compacted away (and the apiserver's watch cache restarted) while
    kube-fanout is down: its resumed upstream watch gets 410, it relists once, and its cache
    holds exactly the apiserver's objects."""
    snapshots = tmp_path / "snapshots"
    args = [f"--cache-snapshot-dir={snapshots}", "--cache-snapshot-interval=1s",
            "--cache-resources=configmaps", "--protobuf-cache-resources="]  # JSON's alone.
    for name in ("keep", "change", "gone"):
        create_configmap(cluster, namespace, name)
    proxy = Proxy.start(cluster, tmp_path, extra_args=args)
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    listed = json.loads(cluster.request("GET", f"{path}?resourceVersion=0", port=proxy.port,
                                        tls=False).body)
    assert sorted(i["metadata"]["name"] for i in listed["items"]) == ["change", "gone", "keep"]
    assert proxy.stop() == 0  # A graceful stop writes the snapshot.
    assert (snapshots / "configmaps_v1.snap").exists()
    label_configmap(cluster, namespace, "change")
    delete_configmap(cluster, namespace, "gone")
    create_configmap(cluster, namespace, "new")
    compact_etcd(cluster)
    cluster.restart_apiserver()
    before = apiserver_lists(cluster)
    again = Proxy.start(cluster, tmp_path, extra_args=args)
    try:
        loads = proxy_metric(cluster, again, "kube_fanout_cache_snapshot_loads_total")
        assert loads['{result="loaded"}'] == 1, loads
        deadline = time.monotonic() + scaled(30)
        while proxy_metric(cluster, again, "kube_fanout_upstream_relists_total").get(
                '{resource="configmaps"}', 0) < 1:
            assert time.monotonic() < deadline, again.log_tail()
            time.sleep(0.1)
        assert any("upstream watch expired, relisting" in l for l in again.log_lines())
        assert lists_delta(before, apiserver_lists(cluster)).get("configmaps", 0) >= 1
        direct = json.loads(cluster.request("GET", path).body)
        names = [(i["metadata"]["name"], i["metadata"]["resourceVersion"])
                 for i in direct["items"]]
        assert [n for n, _ in names] == ["change", "keep", "new"]
        while True:  # The relist counts before its result is installed.
            cached = json.loads(cluster.request("GET", f"{path}?resourceVersion=0",
                                                port=again.port, tls=False).body)
            got = [(i["metadata"]["name"], i["metadata"]["resourceVersion"])
                   for i in cached["items"]]
            if got == names or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert got == names
    finally:
        again.stop()


def test_a_protobuf_cache_restarts_warm_and_its_watchers_resume_without_410(
        cluster, namespace, tmp_path):
    """The protobuf cache (started by a protobuf client before the restart) is snapshotted
    too: after SIGKILL and restart, a protobuf watch from an RV before the kill is served from
    the cache with the apiserver's frames byte for byte, no 410, and the apiserver lists no
    ConfigMaps for it."""
    from test_cache import routed
    from test_protobuf import PROTO, frame_event, get, list_items, marked, open_watch, \
        read_frames, wait_cached

    snapshots = tmp_path / "snapshots"
    args = [f"--cache-snapshot-dir={snapshots}", "--cache-snapshot-interval=1s",
            "--cache-resources=configmaps"]
    proxy = Proxy.start(cluster, tmp_path, extra_args=args)
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    try:
        wait_cached(cluster, proxy, f"{path}?resourceVersion=0")  # Starts the protobuf cache.
        res = get(cluster, path, port=proxy.secure_port)
        assert res.status == 200, res.body[:300]
        _, rv0, _ = list_items(res.body)
        writes = [create_configmap(cluster, namespace, f"pb-{i}") for i in range(3)]
        deadline = time.monotonic() + scaled(15)
        while not (snapshots / "configmaps_v1.protobuf.snap").exists():
            assert time.monotonic() < deadline, proxy.log_tail()
            time.sleep(0.2)
        # Both caches' snapshots hold the last write (names are stored as they are).
        files = [snapshots / f for f in ("configmaps_v1.snap", "configmaps_v1.protobuf.snap")]
        wait_until(lambda: all(f.exists() and b"pb-2" in f.read_bytes() for f in files), 15,
                   "the writes snapshotted")
        kill_hard(proxy)
        writes += [create_configmap(cluster, namespace, "pb-3"),
                   label_configmap(cluster, namespace, "pb-0"),
                   delete_configmap(cluster, namespace, "pb-1")]
        before = apiserver_lists(cluster)
        proxy, _ = restart(proxy, cluster)
        loads = proxy_metric(cluster, proxy, "kube_fanout_cache_snapshot_loads_total")
        assert loads['{result="loaded"}'] == 2, loads  # JSON and protobuf.
        watch = f"{path}?watch=1&resourceVersion={rv0}&timeoutSeconds=30"
        p, m = marked(watch)
        streams = [open_watch(cluster, None, p), open_watch(cluster, proxy.secure_port, p)]
        direct, cached = (read_frames(r, len(writes), scaled(20)) for _, r in streams)
        for conn, _ in streams:
            conn.close()
        # Setup: the apiserver's own stream has every write, in order.
        assert [frame_event(f)[0] for f in direct] == [w[0] for w in writes], direct
        assert routed(proxy, m) == "cache"
        assert cached == direct  # No 410 frame; every event once, in order, same bytes.
        assert lists_delta(before, apiserver_lists(cluster)).get("configmaps", 0) == 0
        relists = proxy_metric(cluster, proxy, "kube_fanout_upstream_relists_total")
        assert sum(relists.values()) == 0, relists
    finally:
        proxy.stop()
