"""kube-fanout in front of kube-fanout (issue: "Beyond one replica", tiers): three tiers on the
real control plane. Watchers at the bottom see every event once and in order, and the apiserver
holds one watch of the resource for all three tiers (the top's).

Each test first checks its setup (writes made, events seen) before it compares.
"""
import http.client
import json
import time

from kfrig import Proxy, apiserver_watches, metric_values


def test_three_tiers_deliver_every_event_once_in_order_from_one_apiserver_watch(
        cluster, namespace, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(cluster.token("admin"))
    ca = cluster.env["KF_CA_FILE"]
    tiers = []
    try:
        time.sleep(1)  # An earlier test's kube-fanout's watches are closed by now.
        before = min(apiserver_watches(cluster, "configmaps") for _ in range(3))
        for name in ("top", "mid", "bottom"):
            (tmp_path / name).mkdir()
            upstream = None if not tiers else [
                f"--upstream=https://127.0.0.1:{tiers[-1].secure_port}",
                f"--upstream-ca-file={ca}", f"--upstream-token-file={token_file}"]
            tiers.append(Proxy.start(cluster, tmp_path / name,
                                     extra_args=["--cache-resources=configmaps"],
                                     upstream_args=upstream))
        bottom = tiers[-1]
        path = f"/api/v1/namespaces/{namespace}/configmaps"
        listed = cluster.request("GET", f"{path}?resourceVersion=0", port=bottom.secure_port)
        assert listed.status == 200, listed.body
        rv = json.loads(listed.body)["metadata"]["resourceVersion"]

        watchers = []
        for _ in range(4):
            conn = cluster.connection(bottom.secure_port, timeout=30)
            conn.request("GET", f"{path}?watch=1&resourceVersion={rv}&timeoutSeconds=60",
                         headers={"Authorization": f"Bearer {cluster.token('admin')}",
                                  "Accept": "application/json"})
            resp = conn.getresponse()
            assert resp.status == 200
            watchers.append((conn, resp))

        writes = []
        for i in range(15):
            cluster.kubectl("create", "configmap", f"tier-{i}", "-n", namespace,
                            f"--from-literal=i={i}")
            writes.append(("ADDED", f"tier-{i}"))
        for i in range(0, 15, 3):
            cluster.kubectl("label", "configmap", f"tier-{i}", "-n", namespace, "round=2")
            writes.append(("MODIFIED", f"tier-{i}"))
        cluster.kubectl("delete", "configmap", "tier-1", "-n", namespace)
        writes.append(("DELETED", "tier-1"))
        assert len(writes) == 21

        for conn, resp in watchers:
            seen, rvs = [], []
            deadline = time.monotonic() + 30
            while len(seen) < len(writes) and time.monotonic() < deadline:
                event = json.loads(resp.readline())
                if event["type"] == "BOOKMARK":
                    continue
                seen.append((event["type"], event["object"]["metadata"]["name"]))
                rvs.append(int(event["object"]["metadata"]["resourceVersion"]))
            conn.close()
            assert seen == writes, seen  # Every event, once, in the order written.
            assert rvs == sorted(set(rvs)), rvs

        # The apiserver holds one configmaps watch for the three tiers: the top's (the lower
        # tiers watch the tier above them; were they watching the apiserver, this would be 3).
        during = min(apiserver_watches(cluster, "configmaps") for _ in range(3))
        assert during - before == 1, (before, during)
        for t in tiers[1:]:
            text = cluster.request("GET", "/metrics", port=t.port, tls=False).body.decode()
            assert metric_values(text, "kube_fanout_cache_requests_total")['{verb="watch"}'] >= 1
    finally:
        for t in reversed(tiers):
            assert t.stop() == 0, t.log_tail()


def first_bookmark_rv(cluster, port, path, rv, headers, wait):
    """The RV of the first BOOKMARK on a watch from `rv`, or None if none comes within `wait`."""
    conn = cluster.connection(port, tls=False, timeout=wait)
    try:
        conn.request("GET", f"{path}?watch=1&allowWatchBookmarks=true&resourceVersion={rv}"
                            "&timeoutSeconds=120",
                     headers={"Authorization": f"Bearer {cluster.token('admin')}",
                              "Accept": "application/json", **headers})
        resp = conn.getresponse()
        assert resp.status == 200, resp.read()[:300]
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                line = resp.readline()
            except TimeoutError:
                return None
            if not line:
                return None
            event = json.loads(line)
            if event["type"] == "BOOKMARK":
                return int(event["object"]["metadata"]["resourceVersion"])
        return None
    except TimeoutError:
        return None
    finally:
        conn.close()


def test_a_progress_request_gets_a_bookmark_as_soon_as_the_cache_is_proven_current(
        cluster, namespace, tmp_path):
    """What a lower tier's progress watch asks of the tier above: with the request field, a
    bookmark at an RV at least the apiserver's current one, at once; without it, the watch's
    schedule (a minute, or 2 s before its deadline) gives none for a long while."""
    (tmp_path / "kf").mkdir()
    proxy = Proxy.start(cluster, tmp_path / "kf", extra_args=["--cache-resources=configmaps"])
    try:
        path = f"/api/v1/namespaces/{namespace}/configmaps"
        cluster.kubectl("create", "configmap", "before", "-n", namespace)
        listed = cluster.request("GET", f"{path}?resourceVersion=0", port=proxy.port, tls=False)
        assert listed.status == 200, listed.body
        start_rv = json.loads(listed.body)["metadata"]["resourceVersion"]
        # Writes elsewhere move the apiserver's RV past anything this resource's cache saw.
        for i in range(3):
            cluster.kubectl("create", "secret", "generic", f"elsewhere-{i}", "-n", namespace)
        current = int(json.loads(cluster.request("GET", "/api/v1/namespaces?limit=1").body)
                      ["metadata"]["resourceVersion"])
        asked = first_bookmark_rv(cluster, proxy.port, path, start_rv,
                                  {"X-Kube-Fanout-Progress-Request": "1"}, wait=10)
        assert asked is not None, "no bookmark within 10 s of a progress request"
        assert asked >= current, (asked, current)
        plain = first_bookmark_rv(cluster, proxy.port, path, start_rv, {}, wait=5)
        assert plain is None, plain
    finally:
        assert proxy.stop() == 0, proxy.log_tail()
