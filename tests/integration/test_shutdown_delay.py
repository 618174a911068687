"""--shutdown-delay-duration on the real control plane, as the apiserver's flag of that name:
after SIGTERM /readyz fails at once (a Service's endpoint goes unready, kube-proxy stops sending
new connections), while /healthz and /livez pass and everything else is served as before, new
connections included, for the delay; then the graceful stop.

Each test checks its setup (the watch open, the write made, the event seen) before it compares.
"""
import json
import signal
import threading
import time

from kfrig import Proxy, open_watch, read_events, scaled

DELAY_S = round(scaled(6))


def health(cluster, proxy, path):
    resp = cluster.request("GET", path, port=proxy.port, tls=False)
    return resp.status, resp.body


def test_readyz_fails_while_requests_are_still_served_during_the_delay(cluster, namespace,
                                                                       tmp_path):
    p = Proxy.start(cluster, tmp_path, extra_args=[
        f"--shutdown-delay-duration={DELAY_S}s", "--shutdown-grace-period=5s",
        "--cache-resources=configmaps"])
    try:
        assert health(cluster, p, "/readyz")[0] == 200
        rv = json.loads(cluster.request(
            "GET", f"/api/v1/namespaces/{namespace}/configmaps").body)["metadata"]["resourceVersion"]
        conn, watch = open_watch(
            cluster, p.secure_port,
            f"/api/v1/namespaces/{namespace}/configmaps?watch=1&resourceVersion={rv}")
        assert watch.status == 200
        signalled = time.monotonic()
        p.process.send_signal(signal.SIGTERM)
        # /readyz fails at once, in the apiserver's words; liveness does not.
        deadline = time.monotonic() + scaled(2)
        while health(cluster, p, "/readyz")[0] == 200 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert health(cluster, p, "/readyz?verbose") == (
            500, b"[+]ping ok\n[-]shutdown failed: reason withheld\n[+]cache-sync ok\n"
                 b"readyz check failed\n")
        assert health(cluster, p, "/healthz") == (200, b"ok")
        assert health(cluster, p, "/livez") == (200, b"ok")
        # A new TLS connection is accepted and served, from the cache and through passthrough.
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "during-delay"},
              "data": {"k": "v"}}
        created = cluster.request("POST", f"/api/v1/namespaces/{namespace}/configmaps",
                                  port=p.secure_port, body=json.dumps(cm).encode(),
                                  headers={"Content-Type": "application/json"})
        assert created.status == 201
        listed = cluster.request("GET", f"/api/v1/namespaces/{namespace}/configmaps",
                                 port=p.secure_port)
        assert listed.status == 200
        assert "during-delay" in [i["metadata"]["name"] for i in json.loads(listed.body)["items"]]
        # The open watch still gets events.
        events = [json.loads(l) for l in read_events(watch, 1, timeout=scaled(3))]
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
            ("ADDED", "during-delay")]
        assert time.monotonic() - signalled < DELAY_S, "the checks outlasted the delay"
        assert p.process.poll() is None
        # Then the graceful stop: the watch ends cleanly and the process exits.
        rest = watch.read()
        assert rest == b""
        assert p.process.wait(timeout=scaled(15)) == 0
        assert time.monotonic() - signalled >= DELAY_S
        conn.close()
    finally:
        p.stop()


def test_without_a_delay_the_listeners_close_at_once(cluster, tmp_path):
    p = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources="])
    signalled = time.monotonic()
    p.process.send_signal(signal.SIGTERM)
    assert p.process.wait(timeout=scaled(15)) == 0
    assert time.monotonic() - signalled < 3


def create_configmap_named(cluster, namespace, name):
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}
    created = cluster.request("POST", f"/api/v1/namespaces/{namespace}/configmaps",
                              body=json.dumps(cm).encode(),
                              headers={"Content-Type": "application/json"})
    assert created.status == 201, created.body


def test_watches_end_spread_over_the_watch_termination_grace_period(cluster, namespace,
                                                                    tmp_path):
    """--shutdown-watch-termination-grace-period: after SIGTERM the listeners close and the
    open connections end a share at a time over the period, not all at once; the cache keeps
    serving those not ended yet (a write made during the spread reaches them)."""
    period, watches = 4.0, 20
    p = Proxy.start(cluster, tmp_path, extra_args=[
        f"--shutdown-watch-termination-grace-period={period:g}s", "--shutdown-grace-period=5s",
        "--cache-resources=configmaps"])
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    try:
        rv = json.loads(cluster.request("GET", path).body)["metadata"]["resourceVersion"]
        opened = [open_watch(cluster, p.port, f"{path}?watch=1&resourceVersion={rv}", tls=False)
                  for _ in range(watches)]
        assert all(w.status == 200 for _, w in opened)
        create_configmap_named(cluster, namespace, "before-stop")
        for _, w in opened:  # Setup: every watch is live and served from the cache.
            assert json.loads(read_events(w, 1)[0])["object"]["metadata"]["name"] == "before-stop"
        ends, names = [None] * watches, [None] * watches

        def follow(i, resp):
            rest = resp.read()  # Until the watch ends.
            ends[i] = time.monotonic()
            names[i] = [json.loads(l)["object"]["metadata"]["name"] for l in rest.splitlines()]

        threads = [threading.Thread(target=follow, args=(i, w)) for i, (_, w) in
                   enumerate(opened)]
        for t in threads:
            t.start()
        signalled = time.monotonic()
        p.process.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        written = time.monotonic()
        create_configmap_named(cluster, namespace, "during-spread")
        for t in threads:
            t.join(timeout=scaled(20))
        assert p.process.wait(timeout=scaled(15)) == 0
        after = sorted(e - signalled for e in ends)
        # Spread: some end early, the rest over the period, none past it by much.
        assert after[0] < 1.5, after
        assert after[-1] >= period - 1.0, after
        assert after[-1] < period + scaled(2), after
        assert 3 <= sum(a < period / 2 for a in after) <= watches - 3, after
        # Those still open half a second after the write got its event from the running cache.
        late = [names[i] for i in range(watches) if ends[i] > written + 0.5]
        assert len(late) >= watches // 4, after  # Setup: enough of them to tell.
        assert all(n == ["during-spread"] for n in late), late
        for conn, _ in opened:
            conn.close()
    finally:
        p.stop()
