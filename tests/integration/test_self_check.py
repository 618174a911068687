"""The cache checking itself (issue 36, item 7; --cache-check-interval), on the real control
plane.

- A healthy cache: with a short interval the checks run (their counter moves, ConfigMaps
  created and changed meanwhile are in the cache) and none finds a difference.
- A cache made wrong for real: kube-fanout's upstream goes through kffault.FaultRelay, which
  loses the watch event of one ConfigMap's update (a lossy middlebox), so the cache keeps that
  ConfigMap's old version while later events move it on. The next check lists the apiserver at
  the cache's exact resourceVersion, finds the difference, counts and logs it (naming the
  ConfigMap) and relists; the cache then serves the apiserver's version, and later checks agree.
- A check older than the upstream's history: an Events cache (read from etcd by the apiserver,
  which keeps no watch cache of them) after etcd was compacted past its RV gets 410 Expired;
  the round is skipped and counted, nothing relisted. (A resource the apiserver caches answers
  exact lists from its watch cache's snapshots, even past etcd's compaction.)
"""
import json
import time

from kffault import FaultRelay
from kfrig import Proxy, metric_values, wait_until
from test_compaction import compact_etcd

RESOURCE = "configmaps"


def metric(cluster, proxy, name):
    text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
    return metric_values(text, name).get(f'{{resource="{RESOURCE}"}}', 0)


def put_configmap(cluster, namespace, name, value):
    """Creates or replaces a ConfigMap straight at the apiserver; its resourceVersion."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"v": value}}
    r = cluster.request("GET", f"{path}/{name}")
    if r.status == 200:
        body["metadata"]["resourceVersion"] = json.loads(r.body)["metadata"]["resourceVersion"]
        r = cluster.request("PUT", f"{path}/{name}", body=json.dumps(body).encode(),
                            headers={"Content-Type": "application/json"})
        assert r.status == 200, r.body
    else:
        r = cluster.request("POST", path, body=json.dumps(body).encode(),
                            headers={"Content-Type": "application/json"})
        assert r.status == 201, r.body
    return int(json.loads(r.body)["metadata"]["resourceVersion"])


def cached_configmap(cluster, proxy, namespace, name):
    """The ConfigMap as kube-fanout's cache serves it (resourceVersion=0: the cache as is)."""
    r = cluster.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/{name}"
                        "?resourceVersion=0", port=proxy.port, tls=False)
    assert r.status == 200, r.body
    return json.loads(r.body)


def test_checks_find_a_healthy_cache_consistent(cluster, namespace, tmp_path):
    for i in range(5):
        put_configmap(cluster, namespace, f"cm-{i}", "a")
    proxy = Proxy.start(cluster, tmp_path, extra_args=[f"--cache-resources={RESOURCE}",
                                                       "--cache-check-interval=500ms"])
    try:
        assert metric(cluster, proxy, "kube_fanout_cache_objects") >= 5
        wait_until(lambda: metric(cluster, proxy,
                                  "kube_fanout_cache_consistency_checks_total") >= 2,
                   20, "two self-checks")
        # Writes between checks: the cache's RV moves, each check lists at its new RV.
        for i in range(5):
            put_configmap(cluster, namespace, f"cm-{i}", "b")
            put_configmap(cluster, namespace, f"new-{i}", "a")
        seen = metric(cluster, proxy, "kube_fanout_cache_consistency_checks_total")
        wait_until(lambda: metric(cluster, proxy,
                                  "kube_fanout_cache_consistency_checks_total") >= seen + 2,
                   20, "two more self-checks after the writes")
        assert cached_configmap(cluster, proxy, namespace, "new-4")["data"] == {"v": "a"}
        checks = metric(cluster, proxy, "kube_fanout_cache_consistency_checks_total")
        inconsistencies = metric(cluster, proxy, "kube_fanout_cache_inconsistencies_total")
        relists = metric(cluster, proxy, "kube_fanout_upstream_relists_total")
        print(f"healthy cache: {int(checks)} checks, {int(inconsistencies)} inconsistent, "
              f"{int(relists)} relists")
        assert inconsistencies == 0 and relists == 0, proxy.log_tail()
    finally:
        assert proxy.stop() == 0, proxy.log_tail()


def test_a_lost_watch_event_is_found_logged_and_relisted(cluster, namespace, tmp_path):
    victim = "victim-cm"
    put_configmap(cluster, namespace, victim, "old")
    for i in range(3):
        put_configmap(cluster, namespace, f"other-{i}", "a")
    relay = FaultRelay(cluster, tmp_path)
    token_file = tmp_path / "upstream-token"
    token_file.write_text(cluster.token("admin"))
    proxy = Proxy.start(cluster, tmp_path,
                        extra_args=[f"--cache-resources={RESOURCE}", "--cache-check-interval=2s"],
                        upstream_args=relay.upstream_args(token_file))
    try:
        wait_until(lambda: metric(cluster, proxy,
                                  "kube_fanout_cache_consistency_checks_total") >= 1,
                   20, "a first self-check")
        assert metric(cluster, proxy, "kube_fanout_cache_inconsistencies_total") == 0
        # The update of the victim is lost on its way to the cache; a later write is not.
        relay.drop("watch=true", f'"name":"{victim}"'.encode())
        new_rv = put_configmap(cluster, namespace, victim, "new")
        wait_until(lambda: relay.count(outcome="dropped") >= 1, 10, "the update's event dropped")
        relay.keep()
        later_rv = put_configmap(cluster, namespace, "other-0", "b")
        wait_until(lambda: cached_configmap(cluster, proxy, namespace, "other-0")["data"]
                   == {"v": "b"}, 10, "the later write in the cache")
        stale = cached_configmap(cluster, proxy, namespace, victim)
        # Only a relist may repair it now; it has not happened yet unless a check already ran.
        assert stale["data"] == {"v": "old"} or \
            metric(cluster, proxy, "kube_fanout_cache_inconsistencies_total") >= 1, stale
        assert later_rv > new_rv
        wait_until(lambda: metric(cluster, proxy,
                                  "kube_fanout_cache_inconsistencies_total") >= 1,
                   20, "the inconsistency found")
        wait_until(lambda: cached_configmap(cluster, proxy, namespace, victim)["data"]
                   == {"v": "new"}, 20, "the relist repairing the victim")
        assert metric(cluster, proxy, "kube_fanout_upstream_relists_total") >= 1
        lines = [json.loads(line) for line in proxy.log_lines() if "inconsistent" in line]
        assert lines, proxy.log_tail()
        assert f"{namespace}/{victim}" in lines[0]["keys"], lines[0]
        assert lines[0]["differences"] == 1, lines[0]
        found = metric(cluster, proxy, "kube_fanout_cache_inconsistencies_total")
        checks = metric(cluster, proxy, "kube_fanout_cache_consistency_checks_total")
        wait_until(lambda: metric(cluster, proxy,
                                  "kube_fanout_cache_consistency_checks_total") >= checks + 1,
                   20, "a check after the relist")
        assert metric(cluster, proxy, "kube_fanout_cache_inconsistencies_total") == found
        print(f"lost event: found by a check, {int(found)} inconsistency logged: "
              f"{lines[0]['keys']}")
    finally:
        code = proxy.stop()
        relay.stop()
    assert code == 0, proxy.log_tail()


def test_a_check_older_than_the_upstreams_history_is_skipped(cluster, namespace, tmp_path):
    """Events: the apiserver keeps no watch cache of them (nor sends their watches bookmarks),
    so an exact list is read from etcd, and a quiet Events cache stays at its list's RV while
    other writes move etcd on. Once etcd is compacted past that RV, the apiserver answers the
    check 410 Expired: the round is skipped (counted, logged), nothing relisted."""
    proxy = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources=events",
                                                       "--cache-check-interval=1s"])
    try:
        def events_metric(name):
            text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
            return metric_values(text, name).get('{resource="events"}', 0)

        wait_until(lambda: events_metric("kube_fanout_cache_consistency_checks_total") >= 1,
                   20, "a first self-check of the Events cache")
        cache_rv = int(events_metric("kube_fanout_cache_resource_version"))
        for i in range(3):
            put_configmap(cluster, namespace, f"move-{i}", "a")  # etcd moves on, Events do not.
        compacted = compact_etcd(cluster)
        assert compacted > cache_rv
        r = cluster.request("GET", f"/api/v1/events?limit=1&resourceVersion={cache_rv}"
                            "&resourceVersionMatch=Exact")
        print(f"exact Events list at the cache's RV {cache_rv} after compaction at {compacted}: "
              f"HTTP {r.status}: {r.body[:120]!r}")
        assert r.status == 410 and json.loads(r.body)["reason"] == "Expired", r.body
        assert int(events_metric("kube_fanout_cache_resource_version")) == cache_rv
        wait_until(lambda: events_metric("kube_fanout_cache_consistency_checks_skipped_total")
                   >= 1, 20, "a check skipped on 410")
        assert any("no longer lists this resourceVersion" in line
                   for line in proxy.log_lines()), proxy.log_tail()
        assert events_metric("kube_fanout_cache_inconsistencies_total") == 0
        assert events_metric("kube_fanout_upstream_relists_total") == 0
    finally:
        assert proxy.stop() == 0, proxy.log_tail()
