"""HTTP/2 to kube-fanout (TLS with ALPN h2, and h2c with prior knowledge on the plain listener),
compared with the real apiserver over HTTP/2; and gzip as the apiserver compresses.

The HTTP/2 client is the `h2` library (PyPI) over a socket, driven by hand so a test controls
flow control per stream: a stream whose data is never acknowledged is a client that stopped
reading that watch.
"""
import gzip
import json
import socket
import ssl
import subprocess
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import pytest

from kfrig import Proxy, Response, metric_values, same_snapshot
from test_cache import ALLOWED_HEADER_DIFFERENCES, routed

UA = "kube-fanout-tests-h2"


class H2Client:
    """One HTTP/2 connection; streams' headers, data and ends collected as events arrive."""

    def __init__(self, port, tls_context=None):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        if tls_context is not None:
            tls_context.set_alpn_protocols(["h2", "http/1.1"])
            sock = tls_context.wrap_socket(sock, server_hostname="127.0.0.1")
            assert sock.selected_alpn_protocol() == "h2"
        self.sock = sock
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.remote_settings = {}
        self.connection_window_updates = []
        self.streams = {}
        self.stalled = set()  # Streams whose data is not acknowledged (the client stops reading).
        self.goaway = None  # (last stream id, error code) of a GOAWAY received.
        self._pending = bytearray()
        self.closed = False
        self._flush()

    def _flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def request(self, path, token=None, method="GET", headers=(), body=None, stall=False):
        sid = self.conn.get_next_available_stream_id()
        hdrs = [(":method", method), (":path", path), (":scheme", "https"),
                (":authority", "127.0.0.1"), ("user-agent", UA), ("accept", "application/json")]
        if token:
            hdrs.append(("authorization", f"Bearer {token}"))
        hdrs += list(headers)
        self.streams[sid] = {"headers": None, "data": bytearray(), "ended": False, "reset": None}
        if stall:
            self.stalled.add(sid)
        self.conn.send_headers(sid, hdrs, end_stream=body is None)
        if body is not None:
            self.conn.send_data(sid, body, end_stream=True)
        self._flush()
        return sid

    def pump(self, timeout=0.2):
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except (socket.timeout, ssl.SSLWantReadError):
            return
        except OSError:  # Reset, or TLS ended without close_notify.
            data = b""
        if not data:
            self.closed = True
            return
        # Frame by frame: the h2 library takes GOAWAY as the connection's end and refuses the
        # frames of the streams GOAWAY lets finish, so those are not followed past it.
        self._pending += data
        while len(self._pending) >= 9:
            size = 9 + int.from_bytes(self._pending[:3], "big")
            if len(self._pending) < size:
                break
            frame, self._pending = self._pending[:size], self._pending[size:]
            if frame[3] == 0x7:  # GOAWAY: last stream id, error code.
                self.goaway = (int.from_bytes(frame[9:13], "big") & 0x7FFFFFFF,
                               int.from_bytes(frame[13:17], "big"))
            try:
                events = self.conn.receive_data(bytes(frame))
            except h2.exceptions.ProtocolError:
                if self.goaway is None:
                    raise
                self.closed = True
                return
            for ev in events:
                self._on(ev)
        try:
            self._flush()
        except OSError:
            self.closed = True

    def _on(self, ev):
        if isinstance(ev, h2.events.RemoteSettingsChanged):
            for code, change in ev.changed_settings.items():
                self.remote_settings[int(code)] = change.new_value
        elif isinstance(ev, h2.events.WindowUpdated) and ev.stream_id == 0:
            self.connection_window_updates.append(ev.delta)
        elif isinstance(ev, h2.events.ResponseReceived):
            self.streams[ev.stream_id]["headers"] = dict(ev.headers)
        elif isinstance(ev, h2.events.DataReceived):
            self.streams[ev.stream_id]["data"] += ev.data
            if ev.stream_id in self.stalled:
                # Only the connection's window comes back (as Go's transport returns it when
                # bytes reach the stream's buffer); the stream's stays closed.
                if ev.flow_controlled_length:
                    self.conn.increment_flow_control_window(ev.flow_controlled_length)
            else:
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded):
            self.streams[ev.stream_id]["ended"] = True
        elif isinstance(ev, h2.events.StreamReset):
            if ev.stream_id in self.streams:
                self.streams[ev.stream_id]["reset"] = ev.error_code

    def run_until(self, predicate, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.closed:
            if predicate():
                return True
            self.pump()
        return predicate()

    def get(self, path, token=None, headers=(), timeout=10):
        sid = self.request(path, token, headers=headers)
        s = self.streams[sid]
        assert self.run_until(lambda: s["ended"] or s["reset"] is not None, timeout), path
        return s

    def list_rv(self, path, token):
        """The resourceVersion of a LIST of `path` (from the cache: resourceVersion=0)."""
        return json.loads(self.get(f"{path}?resourceVersion=0", token)["data"])[
            "metadata"]["resourceVersion"]

    def events(self, sid):
        """The complete lines (events) received so far."""
        lines = bytes(self.streams[sid]["data"]).split(b"\n")[:-1]
        return [json.loads(l) for l in lines if l]

    def close(self):
        try:
            self.conn.close_connection()
            self._flush()
        except OSError:
            pass
        self.sock.close()


def strip(headers):
    return {k: v for k, v in headers.items() if k not in ALLOWED_HEADER_DIFFERENCES}


@pytest.fixture(scope="module")
def ns(cluster):
    name = f"kf-h2-{int(time.time() * 1000) % 10**8}"
    cluster.kubectl("create", "namespace", name)
    for i in range(3):
        cluster.kubectl("create", "configmap", f"cm{i}", "-n", name, f"--from-literal=i={i}")
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false")


def h2_to(cluster, port, tls=True):
    return H2Client(port, cluster.ssl_context() if tls else None)


def test_settings_are_the_apiservers(cluster, cached_proxy):
    """SETTINGS and the connection window as kube-apiserver's Go server announces them, but
    extended CONNECT (RFC 8441), which kube-fanout cannot tunnel."""
    def settings(port):
        c = h2_to(cluster, port)
        try:
            c.run_until(lambda: c.remote_settings and c.connection_window_updates, 5)
            return dict(c.remote_settings), list(c.connection_window_updates)
        finally:
            c.close()

    direct, direct_window = settings(cluster.port)
    ours, our_window = settings(cached_proxy.secure_port)
    assert direct, "no SETTINGS from the apiserver"
    enable_connect = int(h2.settings.SettingCodes.ENABLE_CONNECT_PROTOCOL)
    direct.pop(enable_connect, None)
    assert ours == direct
    assert ours[int(h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS)] == 100
    assert ours[int(h2.settings.SettingCodes.INITIAL_WINDOW_SIZE)] == 256 * 1024
    assert our_window == direct_window == [100 * 256 * 1024 - 65535]


@pytest.mark.parametrize("tls", [True, False], ids=["alpn-h2", "h2c"])
def test_cached_list_and_get_over_h2_match_the_apiserver(cluster, cached_proxy, ns, tls):
    token = cluster.token("admin")
    direct = h2_to(cluster, cluster.port)
    ours = h2_to(cluster, cached_proxy.secure_port if tls else cached_proxy.port, tls)
    try:
        for i, path in enumerate([f"/api/v1/namespaces/{ns}/configmaps?resourceVersion=0",
                                  f"/api/v1/namespaces/{ns}/configmaps/cm1?resourceVersion=0",
                                  f"/api/v1/namespaces/{ns}/configmaps/nope",
                                  "/api/v1/namespaces?resourceVersion=0&limit=1"]):
            marked = f"{path}{'&' if '?' in path else '?'}kfh2={tls}-{i}"

            def get(port, marked=marked):
                got = (direct if port is None else ours).get(marked, token)
                return Response(int(got["headers"][":status"]), got["headers"], bytes(got["data"]),
                                got)

            a, b = (r.raw for r in same_snapshot(cluster, cached_proxy, get, path))
            assert b["headers"][":status"] == a["headers"][":status"], path
            assert bytes(b["data"]) == bytes(a["data"]), path
            assert strip(b["headers"]) == strip(a["headers"]), path
            assert routed(cached_proxy, f"kfh2={tls}-{i}") == "cache", path
    finally:
        direct.close()
        ours.close()


def test_concurrent_watches_share_one_connection(cluster, cached_proxy, ns):
    token = cluster.token("admin")
    c = h2_to(cluster, cached_proxy.secure_port)
    try:
        rv = c.list_rv(f"/api/v1/namespaces/{ns}/configmaps", token)
        watches = [c.request(f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={rv}"
                             f"&labelSelector=w%3D{i}", token) for i in range(5)]
        assert c.run_until(lambda: all(c.streams[s]["headers"] for s in watches), 10)
        assert all(c.streams[s]["headers"][":status"] == "200" for s in watches)
        direct = lambda: metric_values(bytes(c.get("/metrics", token)["data"]).decode(),
                                       "kube_fanout_watch_writes_total")['{path="direct"}']
        direct_before = direct()
        for i in range(5):
            cluster.kubectl("create", "configmap", f"w{i}", "-n", ns, f"--from-literal=w={i}")
            cluster.kubectl("label", "configmap", f"w{i}", "-n", ns, f"w={i}")
        assert c.run_until(lambda: all(len(c.events(s)) >= 1 for s in watches), 15)
        for i, s in enumerate(watches):
            ev = c.events(s)
            assert [e["object"]["metadata"]["name"] for e in ev] == [f"w{i}"], ev
            assert ev[0]["type"] == "ADDED"
        # Every watch is a stream of the same connection, counted as served from the cache.
        metrics = c.get("/metrics", token)
        text = bytes(metrics["data"]).decode()
        assert metric_values(text, "kube_fanout_http2_streams")[""] >= 5
        assert metric_values(text, "kube_fanout_connections")['{protocol="h2"}'] >= 1
        # (The LIST; a watch is counted when it ends.)
        assert metric_values(text, "kube_fanout_http2_requests_total")['{route="cache"}'] >= 1
        # Each event went out from its watch's wake-up, framed at once (Http2Response::
        # TryWriteBody), not through the watch's loop.
        assert direct() - direct_before >= 5
    finally:
        c.close()


def test_passthrough_over_h2_streams_both_ways(cluster, cached_proxy, ns):
    token = cluster.token("admin")
    c = h2_to(cluster, cached_proxy.port, tls=False)
    direct = h2_to(cluster, cluster.port)
    try:
        # A passthrough watch (deployments are not cached): headers at once, events as they come.
        w = c.request(f"/apis/apps/v1/namespaces/{ns}/deployments?watch=1", token)
        assert c.run_until(lambda: c.streams[w]["headers"] is not None, 10)
        # A request body through the relay: create over h2.
        body = json.dumps({"apiVersion": "apps/v1", "kind": "Deployment",
                           "metadata": {"name": "d", "labels": {"app": "d"}},
                           "spec": {"selector": {"matchLabels": {"app": "d"}},
                                    "template": {"metadata": {"labels": {"app": "d"}},
                                                 "spec": {"containers": [
                                                     {"name": "c", "image": "busybox"}]}}}})
        sid = c.request(f"/apis/apps/v1/namespaces/{ns}/deployments", token, method="POST",
                        headers=[("content-type", "application/json")], body=body.encode())
        assert c.run_until(lambda: c.streams[sid]["ended"], 10)
        assert c.streams[sid]["headers"][":status"] == "201"
        assert c.run_until(lambda: len(c.events(w)) >= 1, 10)
        assert c.events(w)[0]["type"] == "ADDED"
        path = f"/apis/apps/v1/namespaces/{ns}/deployments/d"
        a, b = direct.get(path, token), c.get(path, token)
        assert b["headers"][":status"] == a["headers"][":status"] == "200"
        assert json.loads(b["data"])["metadata"]["uid"] == json.loads(a["data"])["metadata"]["uid"]
        for h in ("transfer-encoding", "connection", "keep-alive"):
            assert h not in b["headers"]
        assert c.get("/readyz", token)["headers"][":status"] == "200"
    finally:
        c.close()
        direct.close()


def test_a_stream_reset_by_the_client_ends_its_watch_and_only_it(cluster, cached_proxy, ns):
    """RST_STREAM from the client: a cached watch leaves the cache, a passthrough watch's
    upstream watch is cancelled at once (no event needed), the connection goes on."""
    token = cluster.token("admin")
    c = h2_to(cluster, cached_proxy.secure_port)
    try:
        cached = c.request(f"/api/v1/namespaces/{ns}/configmaps?watch=1&kfrst=cached", token)
        relayed = c.request(f"/apis/apps/v1/namespaces/{ns}/deployments?watch=1&kfrst=relayed",
                            token)
        kept = c.request(f"/api/v1/namespaces/{ns}/configmaps?watch=1&kfrst=kept", token)
        assert c.run_until(lambda: all(c.streams[s]["headers"] for s in (cached, relayed, kept)))
        for sid in (cached, relayed):
            c.conn.reset_stream(sid)
        c._flush()

        def ended(marker):
            return [json.loads(l) for l in cached_proxy.log_lines()
                    if marker in l and '"msg":"request"' in l]
        deadline = time.monotonic() + 5
        while not (ended("kfrst=cached") and ended("kfrst=relayed")):
            assert time.monotonic() < deadline, "a reset watch did not end"
            c.pump(0.05)
        assert ended("kfrst=cached")[0]["route"] == "cache"
        assert ended("kfrst=relayed")[0]["route"] == "passthrough"
        assert all(e[0]["error"] == "client closed"
                   for e in (ended("kfrst=cached"), ended("kfrst=relayed")))
        assert not ended("kfrst=kept")
        cluster.kubectl("create", "configmap", "after-reset", "-n", ns)
        assert c.run_until(lambda: any(e["object"]["metadata"]["name"] == "after-reset"
                                       for e in c.events(kept)), 10)
    finally:
        c.close()


@pytest.fixture(scope="module")
def small_budget_proxy(cluster, tmp_path_factory):
    """kube-fanout whose watchers may fall 128 KiB behind before they are cut, and whose HTTP/2
    connections may have 7 streams."""
    p = Proxy.start(cluster, tmp_path_factory.mktemp("h2-budget"),
                    extra_args=["--watcher-max-queue-bytes=131072",
                                "--http2-max-streams-per-connection=7"])
    yield p
    assert p.stop() == 0, p.log_tail()


def test_max_streams_per_connection_flag(cluster, small_budget_proxy):
    """--http2-max-streams-per-connection sets SETTINGS_MAX_CONCURRENT_STREAMS, and the
    connection window follows it (256 KiB a stream), as the apiserver's flag does."""
    c = h2_to(cluster, small_budget_proxy.secure_port)
    try:
        c.run_until(lambda: c.remote_settings and c.connection_window_updates, 5)
        assert c.remote_settings[int(h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS)] == 7
        assert c.connection_window_updates == [7 * 256 * 1024 - 65535]
    finally:
        c.close()


def test_a_stalled_stream_is_cut_without_stalling_the_others(cluster, small_budget_proxy, ns):
    token = cluster.token("admin")
    c = h2_to(cluster, small_budget_proxy.secure_port)
    try:
        rv = c.list_rv(f"/api/v1/namespaces/{ns}/configmaps", token)
        watch = f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={rv}" \
                "&labelSelector=big%3Dyes"
        stalled = c.request(watch, token, stall=True)
        reading = c.request(watch, token)
        assert c.run_until(lambda: c.streams[stalled]["headers"] and c.streams[reading]["headers"])
        # 40 objects of ~20 KiB, one at a time (a reader keeps up): far past the stalled
        # stream's 64 KiB window and its 128 KiB budget.
        for i in range(40):
            obj = {"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": f"big{i}", "namespace": ns, "labels": {"big": "yes"}},
                   "data": {"d": "x" * 20000}}
            created = cluster.request("POST", f"/api/v1/namespaces/{ns}/configmaps",
                                      body=json.dumps(obj),
                                      headers={"Content-Type": "application/json"})
            assert created.status == 201, created.body
            assert c.run_until(lambda: len(c.events(reading)) > i, 10), i
        assert c.run_until(lambda: len(c.events(reading)) >= 40, 30), len(c.events(reading))
        assert c.run_until(lambda: c.streams[stalled]["reset"] is not None, 15)
        assert len(c.streams[stalled]["data"]) < 256 * 1024
        assert [e["object"]["metadata"]["name"] for e in c.events(reading)] == \
            [f"big{i}" for i in range(40)]
        # The connection goes on.
        assert c.get("/healthz", token)["headers"][":status"] == "200"
        assert not c.closed and c.goaway is None
    finally:
        c.close()


def test_graceful_stop_sends_goaway_and_ends_watches(cluster, tmp_path, ns):
    p = Proxy.start(cluster, tmp_path)
    c = h2_to(cluster, p.secure_port)
    token = cluster.token("admin")
    path = f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion=0" \
           "&fieldSelector=metadata.name%3Dcm1"
    # curl (nghttp2) follows a stream past GOAWAY: its exit code says how the watch ended.
    out = tmp_path / "curl.out"
    curl = subprocess.Popen(["curl", "-sS", "-N", "--http2-prior-knowledge", "-A", UA,
                             "-H", f"Authorization: Bearer {token}", "-o", str(out),
                             f"http://127.0.0.1:{p.port}{path}"], stderr=subprocess.PIPE)
    try:
        w = c.request(path, token)
        assert c.run_until(lambda: len(c.events(w)) == 1, 10)
        deadline = time.monotonic() + 10
        while b"ADDED" not in (out.read_bytes() if out.exists() else b""):
            assert time.monotonic() < deadline, "curl's watch saw nothing"
            time.sleep(0.05)
        assert p.stop() == 0
        assert c.run_until(lambda: c.goaway is not None, 10)
        last_stream_id, error_code = c.goaway
        assert error_code == 0 and last_stream_id >= w
        # The watch ended cleanly (END_STREAM), not reset: curl exits 0 (92 on a stream error).
        assert curl.wait(timeout=10) == 0, curl.stderr.read()
        assert [json.loads(l)["type"] for l in out.read_bytes().splitlines()] == ["ADDED"]
    finally:
        c.close()
        p.stop()
        if curl.poll() is None:
            curl.kill()


def test_curl_speaks_h2_and_h2c(cluster, cached_proxy, ns):
    token = cluster.token("admin")
    base = ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_version} %{http_code}", "-A", UA,
            "-H", f"Authorization: Bearer {token}"]
    path = f"/api/v1/namespaces/{ns}/configmaps?resourceVersion=0"
    tls = subprocess.run(base + ["--http2", "--cacert", cluster.env["KF_CA_FILE"],
                                 f"https://127.0.0.1:{cached_proxy.secure_port}{path}"],
                         capture_output=True, text=True, timeout=30)
    plain = subprocess.run(base + ["--http2-prior-knowledge",
                                   f"http://127.0.0.1:{cached_proxy.port}{path}"],
                           capture_output=True, text=True, timeout=30)
    http1 = subprocess.run(base + ["--http1.1", f"http://127.0.0.1:{cached_proxy.port}{path}"],
                           capture_output=True, text=True, timeout=30)
    assert (tls.stdout, plain.stdout, http1.stdout) == ("2 200", "2 200", "1.1 200")


@pytest.fixture(scope="module")
def big_ns(cluster):
    """Configmaps whose list is past the apiserver's 128 KiB compression threshold."""
    name = f"kf-gz-{int(time.time() * 1000) % 10**8}"
    cluster.kubectl("create", "namespace", name)
    manifests = [{"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": f"cm{i}", "namespace": name},
                  "data": {"d": f"{i}-" + "payload " * 1000}} for i in range(30)]
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                          "items": manifests}))
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false")


@pytest.mark.parametrize("accept", ["gzip", "gzip, deflate", "deflate", None])
def test_large_cached_answers_are_gzipped_as_the_apiserver_does(cluster, cached_proxy, big_ns,
                                                                accept):
    token_headers = {"User-Agent": UA}
    if accept:
        token_headers["Accept-Encoding"] = accept
    paths = [f"/api/v1/namespaces/{big_ns}/configmaps?resourceVersion=0",  # > 128 KiB
             # (A limit with resourceVersion=0 is ignored: the whole list, compressed.)
             f"/api/v1/namespaces/{big_ns}/configmaps?resourceVersion=0"
             "&fieldSelector=metadata.name%3Dcm1",  # small
             f"/api/v1/namespaces/{big_ns}/configmaps/cm3?resourceVersion=0"]  # small
    for i, path in enumerate(paths):
        marker = f"kfgz={accept}-{i}".replace(" ", "").replace(",", "")
        direct, ours = same_snapshot(
            cluster, cached_proxy, lambda port: cluster.request(
                "GET", f"{path}&{marker}", headers=token_headers, port=port), path)
        assert ours.status == direct.status == 200
        assert routed(cached_proxy, marker) == "cache", path
        assert strip(ours.headers) == strip(direct.headers), path
        compressed = direct.headers.get("content-encoding") == "gzip"
        assert compressed == (i == 0 and accept is not None and "gzip" in accept), path
        if compressed:
            assert ours.headers["vary"] == "Accept-Encoding"
            assert gzip.decompress(ours.body) == gzip.decompress(direct.body)
            assert len(gzip.decompress(ours.body)) > 128 * 1024
        else:
            assert ours.body == direct.body


def test_a_large_list_asked_again_at_the_same_rv_shares_its_gzip_bytes(cluster, cached_proxy,
                                                                            big_ns):
    """A large LIST is compressed once per list and resourceVersion (proxy/serve/gzip_cache.h): asked
    again while the resource has not changed, it gets the very bytes of the first answer."""
    def counts():
        text = cluster.request("GET", "/metrics", port=cached_proxy.port, tls=False).body.decode()
        return metric_values(text, "kube_fanout_list_gzip_answers_total")

    path = f"/api/v1/namespaces/{big_ns}/configmaps?resourceVersion=0&kfgz=shared"
    before = counts()
    answers = [cluster.request("GET", path, port=cached_proxy.port, tls=False,
                               headers={"Accept-Encoding": "gzip", "User-Agent": UA})
               for _ in range(4)]
    after = counts()
    assert routed(cached_proxy, "kfgz=shared") == "cache"
    assert all(a.status == 200 and a.headers.get("content-encoding") == "gzip" for a in answers)
    lists = [json.loads(gzip.decompress(a.body)) for a in answers]
    assert all(len(items["items"]) == 30 for items in lists)
    rvs = [items["metadata"]["resourceVersion"] for items in lists]
    # The same RV: the same bytes, compressed once (the configmaps of the whole cluster may have
    # moved on between two of them: then that RV's answer was compressed for it).
    for answer, rv in zip(answers, rvs):
        assert answer.body == answers[rvs.index(rv)].body
    compressed = after['{result="compressed"}'] - before['{result="compressed"}']
    shared = after['{result="shared"}'] - before['{result="shared"}']
    assert (compressed, shared) == (len(set(rvs)), len(answers) - len(set(rvs)))
    assert shared >= 1, rvs


def test_watches_are_never_gzipped(cluster, cached_proxy, big_ns):
    c = h2_to(cluster, cached_proxy.secure_port)
    try:
        w = c.request(f"/api/v1/namespaces/{big_ns}/configmaps?watch=1&resourceVersion=0",
                      cluster.token("admin"), headers=[("accept-encoding", "gzip")])
        assert c.run_until(lambda: len(c.events(w)) >= 30, 15)
        assert "content-encoding" not in c.streams[w]["headers"]
    finally:
        c.close()


def test_gzip_over_h2_matches_the_apiserver(cluster, cached_proxy, big_ns):
    token = cluster.token("admin")
    path = f"/api/v1/namespaces/{big_ns}/configmaps?resourceVersion=0&kfgz=h2"
    direct, ours = h2_to(cluster, cluster.port), h2_to(cluster, cached_proxy.secure_port)
    try:
        # A list at resourceVersion=0 carries each cache's current RV, which any configmap written
        # in the cluster moves (an earlier test's namespace being deleted): compared when both
        # answers are at the same RV, which comes within a few tries once the writes stop.
        rvs = []
        for _ in range(20):
            a = direct.get(path, token, headers=[("accept-encoding", "gzip")])
            b = ours.get(path, token, headers=[("accept-encoding", "gzip")])
            assert a["headers"].get("content-encoding") == "gzip"
            assert strip(b["headers"]) == strip(a["headers"])
            plain_a = gzip.decompress(bytes(a["data"]))
            plain_b = gzip.decompress(bytes(b["data"]))
            rv_a = json.loads(plain_a)["metadata"]["resourceVersion"]
            rv_b = json.loads(plain_b)["metadata"]["resourceVersion"]
            rvs.append((rv_a, rv_b))
            if rv_a == rv_b:
                break
            time.sleep(0.25)
        assert rvs[-1][0] == rvs[-1][1], rvs
        assert len(json.loads(plain_b)["items"]) == 30
        assert plain_b == plain_a
        assert routed(cached_proxy, "kfgz=h2") == "cache"
    finally:
        direct.close()
        ours.close()



BODY_TIMEOUT = 10


def test_a_body_trickled_in_ends_its_stream_at_the_deadline_and_only_it(cluster, ns, tmp_path):
    """HTTP/2 request bodies have the apiserver's request timeout (--request-timeout, 60 s by
    default as the apiserver's, BODY_TIMEOUT here), as HTTP/1.1's have: an Event body kube-fanout
    reads itself gets the apiserver's 504 Timeout Status and a passed-through body's stream is
    ended, each that long after its head, while a watch and reads on the same connection go
    on."""
    proxy = Proxy.start(cluster, tmp_path, extra_args=[f"--request-timeout={BODY_TIMEOUT}s"])
    try:
        _trickle_bodies(cluster, proxy, ns)
    finally:
        assert proxy.stop() == 0


def _trickle_bodies(cluster, cached_proxy, ns):
    token = cluster.token("admin")
    c = h2_to(cluster, cached_proxy.secure_port)

    def body_timeouts():
        text = bytes(c.get("/metrics", token)["data"]).decode()
        return metric_values(text, "kube_fanout_request_body_timeouts_total")['{protocol="h2"}']

    def open_body(path, length):
        """A POST whose head says `length` bytes and whose body comes later, by hand."""
        sid = c.conn.get_next_available_stream_id()
        c.streams[sid] = {"headers": None, "data": bytearray(), "ended": False, "reset": None}
        c.conn.send_headers(sid, [(":method", "POST"), (":path", path), (":scheme", "https"),
                                  (":authority", "127.0.0.1"), ("user-agent", UA),
                                  ("accept", "application/json"),
                                  ("authorization", f"Bearer {token}"),
                                  ("content-type", "application/json"),
                                  ("content-length", str(length))])
        c._flush()
        return sid

    event = json.dumps({
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "slow-h2", "namespace": ns},
        "involvedObject": {"kind": "Pod", "namespace": ns, "name": "p0"},
        "reason": "Slow", "message": "a body sent a byte at a time",
        "source": {"component": "slowpoke"}, "type": "Normal"}).encode()
    configmap = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "slow-h2"}, "data": {"a": "b" * 100}}).encode()
    try:
        before = body_timeouts()
        rv = c.list_rv(f"/api/v1/namespaces/{ns}/configmaps", token)
        watch = c.request(f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={rv}"
                          "&labelSelector=slow%3Dh2", token)
        assert c.run_until(lambda: c.streams[watch]["headers"] is not None, 10)
        assert c.streams[watch]["headers"][":status"] == "200"
        bodies = {open_body(f"/api/v1/namespaces/{ns}/events", len(event)): event,
                  open_body(f"/api/v1/namespaces/{ns}/configmaps", len(configmap)): configmap}
        start = time.monotonic()
        sent = dict.fromkeys(bodies, 0)
        ended_at, reads = {}, 0

        def over(sid):
            s = c.streams[sid]
            return s["ended"] or s["reset"] is not None

        # One byte of each body a second (each read well within the 120 s idle bound, the
        # whole not within BODY_TIMEOUT); a read on the same connection between two bytes.
        while len(ended_at) < len(bodies) and time.monotonic() - start < 3 * BODY_TIMEOUT:
            for sid, body in bodies.items():
                if sid in ended_at:
                    continue
                if over(sid):
                    ended_at[sid] = time.monotonic() - start
                elif sent[sid] < len(body) - 1:
                    c.conn.send_data(sid, body[sent[sid]:sent[sid] + 1])
                    sent[sid] += 1
            c._flush()
            got = c.get(f"/api/v1/namespaces/{ns}/configmaps/cm0?resourceVersion=0", token)
            assert got["headers"][":status"] == "200", got
            reads += 1
            tick = time.monotonic()
            while time.monotonic() - tick < 1 and not all(map(over, bodies)):
                c.pump(0.2)
            for sid in bodies:
                if over(sid) and sid not in ended_at:
                    ended_at[sid] = time.monotonic() - start
        print(f"streams ended after {ended_at}, bytes sent {sent}, {reads} reads meanwhile")
        event_sid, cm_sid = list(bodies)
        assert set(ended_at) == set(bodies), ended_at
        assert all(sent[sid] < len(bodies[sid]) - 1 for sid in bodies), sent
        # The Event (read by kube-fanout) and the passed-through body: the apiserver's own answer
        # when its request timeout passes over a body; the passed-through stream is also reset,
        # its body unfinished.
        for sid in (event_sid, cm_sid):
            s = c.streams[sid]
            assert s["headers"] is not None and s["headers"][":status"] == "504", s
            assert json.loads(bytes(s["data"])) == {
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Timeout: request did not complete within the allotted timeout",
                "reason": "Timeout", "details": {}, "code": 504}
        assert c.streams[cm_sid]["reset"] is not None, c.streams[cm_sid]
        assert all(BODY_TIMEOUT - 1 <= t <= BODY_TIMEOUT + 6 for t in ended_at.values()), ended_at
        assert reads >= BODY_TIMEOUT - 2
        # The connection goes on: a read, a write whose whole body comes at once, the watch.
        assert c.get("/readyz", token)["headers"][":status"] == "200"
        assert body_timeouts() == before + 2
        assert cluster.request("GET", f"/api/v1/namespaces/{ns}/events/slow-h2").status == 404
        assert cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps/slow-h2").status == 404
        cluster.kubectl("create", "configmap", "after-slow", "-n", ns)
        cluster.kubectl("label", "configmap", "after-slow", "-n", ns, "slow=h2")
        assert c.run_until(lambda: any(e["object"]["metadata"]["name"] == "after-slow"
                                       for e in c.events(watch)), 10)
        assert not over(watch)
    finally:
        c.close()
