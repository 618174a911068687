"""kube-fanout's own upstream over HTTP/2: passthrough watches share a few multiplexed connections
to the real apiserver (as client-go's transport does) instead of one TLS connection each, and
carry the same events as watches made straight to the apiserver.

Secrets are not cached here (--cache-resources=configmaps): their watches pass through.
"""
import json
import time

import pytest

from kfrig import Proxy, metric_values, scaled, tcp_connections, wait_until
from test_http2 import H2Client

WATCHES_PER_CONNECTION = 100
CLIENT_CONNECTIONS = 3


def metrics(cluster, proxy):
    return cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()


def lines_of(data):
    return [json.loads(l) for l in bytes(data).split(b"\n")[:-1] if l]


def summary(events):
    return [(e["type"], e["object"]["metadata"]["name"],
             e["object"]["metadata"]["resourceVersion"]) for e in events]


@pytest.fixture
def secrets_ns(cluster):
    name = f"kf-uh2-{int(time.time() * 1000) % 10**8}"
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false")


def settled_connections(cluster, proxy):
    """kube-fanout's upstream connections once its own are all open: the configmaps reflector's
    watch made (readiness only waits for its list), and the count unchanged for a second."""
    wait_until(lambda: metric_values(metrics(cluster, proxy), "kube_fanout_upstream_watches_total")
               .get('{resource="configmaps"}', 0) >= 1, 10, "the reflector's upstream watch")
    seen = []

    def steady():
        seen.append(tcp_connections(proxy.process.pid, cluster.port))
        return len(seen) > 4 and len(set(seen[-5:])) == 1

    wait_until(steady, 15, "a steady count of upstream connections", interval=0.25)
    return seen[-1]


def test_300_passthrough_watches_share_a_few_upstream_connections(cluster, tmp_path, secrets_ns):
    proxy = Proxy.start(cluster, tmp_path, extra_args=[
        "--cache-resources=configmaps", "--max-passthrough-watches-per-user=0"])
    clients = []
    direct = None
    try:
        before = settled_connections(cluster, proxy)
        token = cluster.token("admin")
        path = f"/api/v1/namespaces/{secrets_ns}/secrets?watch=1"
        direct = H2Client(cluster.port, cluster.ssl_context())
        direct_sid = direct.request(path, token)
        watches = []
        for _ in range(CLIENT_CONNECTIONS):
            c = H2Client(proxy.secure_port, cluster.ssl_context())
            clients.append(c)
            for _ in range(WATCHES_PER_CONNECTION):
                watches.append((c, c.request(path, token)))
        total = len(watches)
        for c in clients:
            assert c.run_until(lambda c=c: all(
                s["headers"] is not None for s in c.streams.values()), scaled(30))
        assert direct.run_until(lambda: direct.streams[direct_sid]["headers"] is not None)
        statuses = {c.streams[sid]["headers"][":status"] for c, sid in watches}
        assert statuses == {"200"}, statuses
        text = metrics(cluster, proxy)
        assert metric_values(text, "kube_fanout_upstream_http2_streams")[""] == total
        h2_connections = metric_values(text, "kube_fanout_upstream_http2_connections")[""]
        # The apiserver takes 100 streams per connection; each worker thread has its pool.
        assert 3 <= h2_connections <= 3 + 2, h2_connections
        open_now = tcp_connections(proxy.process.pid, cluster.port)
        print(f"upstream connections: {before} before the watches, {open_now} with {total} "
              f"watches open ({h2_connections} HTTP/2)")
        # The HTTP/2 ones, and kube-fanout's own (HTTP/1.1) for its reviews of the token: one
        # per worker thread (2 here). Before, each passthrough watch had a connection: 300.
        assert open_now - before <= h2_connections + 2
        # The same events as a direct watch, in the same order, on every one of them.
        names = [f"s{i}" for i in range(5)]
        for n in names:
            cluster.kubectl("create", "secret", "generic", n, "-n", secrets_ns,
                            f"--from-literal=k={n}")
        cluster.kubectl("delete", "secret", names[0], "-n", secrets_ns)
        want = len(names) + 1
        assert direct.run_until(
            lambda: len(lines_of(direct.streams[direct_sid]["data"])) >= want, scaled(20))
        expected = summary(lines_of(direct.streams[direct_sid]["data"]))
        assert [e[0] for e in expected] == ["ADDED"] * len(names) + ["DELETED"]
        for c in clients:
            assert c.run_until(lambda c=c: all(
                len(lines_of(s["data"])) >= want for s in c.streams.values()), scaled(30))
        for c, sid in watches:
            assert summary(lines_of(c.streams[sid]["data"])) == expected
            assert c.streams[sid]["reset"] is None and not c.streams[sid]["ended"]
    finally:
        for c in clients:
            c.close()
        if direct is not None:
            direct.close()
        assert proxy.stop() == 0


def test_a_stalled_watch_does_not_stall_its_connections_other_streams(cluster, tmp_path,
                                                                       secrets_ns):
    """Two watches of one client connection share one upstream connection (one worker's pool);
    the client stops reading one. The other still gets every event; the stalled one is held
    back by its windows (kube-fanout's to its client, the upstream's stream window)."""
    proxy = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources=configmaps",
                                                       "--threads=1"])
    c = None
    try:
        token = cluster.token("admin")
        path = f"/api/v1/namespaces/{secrets_ns}/secrets?watch=1"
        c = H2Client(proxy.secure_port, cluster.ssl_context())
        stalled = c.request(path, token, stall=True)
        live = c.request(path, token)
        assert c.run_until(lambda: all(s["headers"] for s in c.streams.values()), scaled(10))
        text = metrics(cluster, proxy)
        assert metric_values(text, "kube_fanout_upstream_http2_connections")[""] == 1
        assert metric_values(text, "kube_fanout_upstream_http2_streams")[""] == 2
        count = 12
        for i in range(count):  # 12 × ~400 KB: past every window on the way.
            secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"big{i}"},
                      "stringData": {"k": "x" * 300_000}}
            created = cluster.request("POST", f"/api/v1/namespaces/{secrets_ns}/secrets",
                                      body=json.dumps(secret),
                                      headers={"Content-Type": "application/json"})
            assert created.status == 201, created.body[:300]
        assert c.run_until(lambda: len(lines_of(c.streams[live]["data"])) >= count, scaled(60))
        got_stalled = len(c.streams[stalled]["data"])
        got_live = len(c.streams[live]["data"])
        print(f"live watch: {got_live} bytes, stalled watch: {got_stalled} bytes")
        assert got_stalled < got_live
        assert c.streams[stalled]["reset"] is None
    finally:
        if c is not None:
            c.close()
        assert proxy.stop() == 0


def test_without_upstream_http2_each_passthrough_watch_has_its_own_connection(cluster, tmp_path,
                                                                              secrets_ns):
    proxy = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources=configmaps",
                                                       "--upstream-http2=false"])
    c = None
    try:
        before = settled_connections(cluster, proxy)
        c = H2Client(proxy.secure_port, cluster.ssl_context())
        for _ in range(10):
            c.request(f"/api/v1/namespaces/{secrets_ns}/secrets?watch=1", cluster.token("admin"))
        assert c.run_until(lambda: all(s["headers"] for s in c.streams.values()), scaled(10))
        # One each (and kube-fanout's own for its reviews of the token).
        assert tcp_connections(proxy.process.pid, cluster.port) - before >= 10
        assert metric_values(metrics(cluster, proxy),
                             "kube_fanout_upstream_http2_connections")[""] == 0
    finally:
        if c is not None:
            c.close()
        assert proxy.stop() == 0
