"""etcd compaction past kube-fanout's resourceVersion while it cannot reach the apiserver.

kube-fanout's upstream goes through a TCP relay the test can cut. While it is cut, objects
change directly at the apiserver, etcd is compacted past kube-fanout's RV and the apiserver is
restarted (its watch cache starts afresh), so kube-fanout's resumed upstream watch gets 410 and
it must relist. Its open downstream watches must continue, seeing the difference as events;
only a new watch from before the relist gets 410, and a client recovers by listing again.
"""
import json
import queue
import socket
import threading
import time
import urllib.request

import pytest

from kfrig import Proxy, Relay, metric_values

RESUME_TIMEOUT = 45  # The reflector backs off up to 30 s while the upstream is away.


class WatchStream:
    """A raw watch request; a thread reads its lines so every wait has its own deadline."""

    def __init__(self, cluster, port, path):
        self.conn = cluster.connection(port, timeout=120)
        self.conn.request("GET", path, headers={
            "Authorization": f"Bearer {cluster.token('admin')}", "Accept": "application/json",
            "User-Agent": "kube-fanout-tests"})
        self.response = self.conn.getresponse()
        self.status = self.response.status
        self._lines = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        try:
            while True:
                line = self.response.readline()
                if not line:
                    break
                self._lines.put(json.loads(line))
        except (OSError, ValueError, AttributeError) as e:
            self._lines.put(e)
        self._lines.put(None)  # End of stream.

    def events(self, n, timeout):
        """Up to `n` events within `timeout` s; fewer if the stream ends (then None last)."""
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < n:
            try:
                item = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if isinstance(item, Exception):
                raise item
            got.append(item)
            if item is None:
                break
        return got

    def close(self):
        try:
            self.conn.sock and self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()
        self._reader.join(timeout=5)


def proxy_metric(cluster, proxy, name, resource="configmaps"):
    text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
    return metric_values(text, name).get(f'{{resource="{resource}"}}')


def etcd(cluster, method, body):
    req = urllib.request.Request(f"{cluster.env['KF_ETCD_URL']}/v3/kv/{method}",
                                 data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def compact_etcd(cluster):
    """Compacts etcd (physically) at its current revision; returns that revision."""
    rev = int(etcd(cluster, "range", {"key": "AA=="})["header"]["revision"])
    etcd(cluster, "compaction", {"revision": str(rev), "physical": True})
    return rev


def call(cluster, method, path, port=None, body=None, expect=200, content_type=None):
    resp = cluster.request(method, path, port=port,
                           body=json.dumps(body).encode() if body is not None else None,
                           headers={"Content-Type": content_type or "application/json"})
    assert resp.status == expect, (method, path, resp.status, resp.body[:300])
    return json.loads(resp.body)


def configmap(name, **data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def plain(obj):
    """An object as listed (list items carry no kind/apiVersion; watch event objects do)."""
    return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}


def summary(events):
    """Watch events, short: (type, name or Status code, resourceVersion, data); None = end."""
    return [e and (e["type"], e["object"]["metadata"].get("name") or e["object"].get("code"),
                   e["object"]["metadata"].get("resourceVersion"), e["object"].get("data"))
            for e in events]


def by_name(items):
    return {o["metadata"]["name"]: plain(o) for o in items}


def test_watch_continues_across_a_compaction_past_its_resource_version(cluster, tmp_path,
                                                                     namespace):
    ns = namespace
    coll = f"/api/v1/namespaces/{ns}/configmaps"
    relay = Relay(cluster.port)
    token_file = tmp_path / "upstream-token"
    token_file.write_text(cluster.token("admin"))
    p = None
    watches = []
    try:
        p = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources=configmaps"],
                        upstream_args=[f"--upstream=https://127.0.0.1:{relay.port}",
                                       f"--upstream-ca-file={cluster.env['KF_CA_FILE']}",
                                       f"--upstream-token-file={token_file}"])
        kf = p.secure_port

        # 1. Objects and a watch through kube-fanout, from its list's RV.
        for name in ("keep", "change", "remove"):
            call(cluster, "POST", coll, port=kf, body=configmap(name, v="1"), expect=201)
        initial = call(cluster, "GET", coll, port=kf)
        list_rv = initial["metadata"]["resourceVersion"]
        assert sorted(by_name(initial["items"])) == ["change", "keep", "remove"]
        watch = WatchStream(cluster, kf, f"{coll}?watch=1&resourceVersion={list_rv}")
        watches.append(watch)
        assert watch.status == 200
        assert watch.events(1, timeout=1) == []  # Nothing after the list's RV yet.

        # 2. Cut kube-fanout off; change things behind its back; compact past its RV; restart
        # the apiserver so its watch cache cannot serve that RV either.
        relay.cut()
        stale_rv = int(proxy_metric(cluster, p, "kube_fanout_cache_resource_version"))
        assert stale_rv >= int(list_rv)
        changed = call(cluster, "PATCH", f"{coll}/change", body={"data": {"v": "2"}},
                       content_type="application/merge-patch+json")
        call(cluster, "DELETE", f"{coll}/remove")
        added = call(cluster, "POST", coll, body=configmap("new", v="1"), expect=201)
        compacted = compact_etcd(cluster)
        assert compacted > stale_rv
        cluster.restart_apiserver()

        # The precondition: the apiserver itself now refuses a watch from kube-fanout's RV.
        direct = WatchStream(cluster, cluster.port,
                             f"{coll}?watch=1&resourceVersion={stale_rv}")
        watches.append(direct)
        first = direct.events(1, timeout=30)
        refused = direct.status == 410 or (
            direct.status == 200 and first and first[0] is not None
            and first[0]["type"] == "ERROR" and first[0]["object"].get("code") == 410)
        if not refused:
            pytest.fail(f"precondition not met: after compacting etcd at {compacted} and "
                        f"restarting the apiserver, a watch from RV {stale_rv} got HTTP "
                        f"{direct.status} and {first!r}, not 410; the test would prove nothing")
        direct.close()

        # 3. Let kube-fanout back in: it gets 410, relists, and the open watch sees the
        # difference as events, in RV order, each once.
        relay.restore()
        got = watch.events(3, timeout=RESUME_TIMEOUT)
        got += watch.events(1, timeout=1.5)  # Nothing more: no duplicates, no ERROR, no end.
        assert None not in got and all(e["type"] != "ERROR" for e in got), (
            f"the watch got an error or ended: {got}\nkube-fanout log:\n{p.log_tail()}")
        assert len(got) == 3, (f"expected 3 events within {RESUME_TIMEOUT}s, got {got}\n"
                               f"kube-fanout log:\n{p.log_tail()}")
        assert sorted((e["type"], e["object"]["metadata"]["name"]) for e in got) == [
            ("ADDED", "new"), ("DELETED", "remove"), ("MODIFIED", "change")]
        rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in got]
        assert rvs == sorted(rvs) and rvs[0] > stale_rv, rvs
        events = {e["object"]["metadata"]["name"]: e["object"] for e in got}
        assert plain(events["change"]) == plain(changed)
        assert plain(events["new"]) == plain(added)

        # The watch's view (the list plus its events) is the apiserver's state.
        state = by_name(initial["items"])
        for e in got:
            if e["type"] == "DELETED":
                del state[e["object"]["metadata"]["name"]]
            else:
                state[e["object"]["metadata"]["name"]] = plain(e["object"])
        assert state == by_name(call(cluster, "GET", coll)["items"])

        # 4. A new watch from before the relist cannot be served: 410 in band, then the end.
        old = WatchStream(cluster, kf, f"{coll}?watch=1&resourceVersion={list_rv}")
        watches.append(old)
        assert old.status == 200
        ended = old.events(5, timeout=5)
        assert ended and ended[0] is not None and ended[0]["type"] == "ERROR", (
            f"a new watch from RV {list_rv}, older than kube-fanout's relist, must get one ERROR "
            f"event (410 Expired) and end, as the apiserver's watch cache answers; it got "
            f"{summary(ended)}")
        assert ended[1:] == [None], summary(ended)  # Then the stream ends.
        status = ended[0]["object"]
        assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")

        # The client recovers: list again (from the cache or consistently), watch from there.
        truth = by_name(call(cluster, "GET", coll)["items"])
        for rv in ("0", ""):
            relisted = call(cluster, "GET", f"{coll}?resourceVersion={rv}", port=kf)
            assert by_name(relisted["items"]) == truth, rv
        resumed = WatchStream(cluster, kf, f"{coll}?watch=1&resourceVersion="
                                           f"{relisted['metadata']['resourceVersion']}")
        watches.append(resumed)
        assert resumed.status == 200
        late = call(cluster, "POST", coll, body=configmap("after", v="1"), expect=201)
        seen = resumed.events(1, timeout=15)
        assert [(e["type"], plain(e["object"])) for e in seen if e] == [("ADDED", plain(late))]
        # The first watch goes on too.
        assert [(e["type"], e["object"]["metadata"]["name"])
                for e in watch.events(1, timeout=15) if e] == [("ADDED", "after")]

        # 5. The relist shows in the metrics.
        assert proxy_metric(cluster, p, "kube_fanout_upstream_relists_total") >= 1
    finally:
        for w in watches:
            w.close()
        relay.stop()
        if p is not None:
            code = p.stop()
            assert code == 0, f"kube-fanout exited with {code}; log:\n{p.log_tail()}"
