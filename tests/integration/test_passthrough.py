"""kube-fanout as a transparent proxy in front of a real kube-apiserver.

Every comparison here is against the real apiserver's answer to the same request.
"""
import gzip
import http.client
import json
import signal
import socket
import subprocess
import threading
import time

import pytest

from kfrig import Proxy, free_port, kubectl_watch_listed


def same_answer(direct, proxied):
    assert proxied.status == direct.status
    assert proxied.body == direct.body
    assert proxied.comparable_headers() == direct.comparable_headers()


@pytest.mark.parametrize("path", ["/version", "/api", "/apis", "/api/v1",
                                  "/apis/discovery.k8s.io/v1", "/openapi/v2?timeout=32s"])
def test_discovery_and_version_are_identical(cluster, proxy, path):
    direct = cluster.request("GET", path)
    same_answer(direct, cluster.request("GET", path, port=proxy.secure_port))
    same_answer(direct, cluster.request("GET", path, port=proxy.port, tls=False))


def test_kubectl_version_and_api_resources_match(cluster, proxy):
    for args in (["get", "--raw", "/version"], ["api-resources", "--no-headers"],
                 ["api-versions"]):
        direct = cluster.kubectl(*args)
        proxied = cluster.kubectl(*args, server=proxy.server)
        assert proxied.stdout == direct.stdout
        assert proxied.returncode == 0


def test_kubectl_create_get_list_patch_delete(cluster, proxy, namespace):
    k = lambda *a, **kw: cluster.kubectl(*a, "-n", namespace, server=proxy.server, **kw)
    assert "created" in k("create", "configmap", "c1", "--from-literal=a=1").stdout
    got = json.loads(k("get", "configmap", "c1", "-o", "json").stdout)
    assert got["data"] == {"a": "1"}
    k("patch", "configmap", "c1", "-p", '{"data":{"a":"2"}}')
    listed = json.loads(k("get", "configmaps", "-o", "json").stdout)
    assert [i["data"] for i in listed["items"] if i["metadata"]["name"] == "c1"] == [{"a": "2"}]
    # The proxy's answer matches the apiserver's, object for object.
    direct = cluster.kubectl("get", "configmap", "c1", "-n", namespace, "-o", "json").stdout
    assert json.loads(k("get", "configmap", "c1", "-o", "json").stdout) == json.loads(direct)
    k("delete", "configmap", "c1")
    missing = k("get", "configmap", "c1", check=False)
    assert missing.returncode != 0
    assert 'configmaps "c1" not found' in missing.stderr


def test_kubectl_watch_sees_each_change(cluster, proxy, namespace):
    k = lambda *a: cluster.kubectl(*a, "-n", namespace)
    k("create", "configmap", "w0")
    watch = subprocess.Popen(
        [cluster.env["KF_KUBECTL"], f"--server={proxy.server}",
         f"--certificate-authority={cluster.env['KF_CA_FILE']}", "--kubeconfig=/dev/null",
         f"--token={cluster.token('admin')}", "-n", namespace, "get", "configmaps", "-w",
         "--output-watch-events", "-o", "custom-columns=EVENT:.type,NAME:.object.metadata.name,"
         "A:.object.data.a", "--no-headers"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        kubectl_watch_listed(watch, "w0")  # Before the changes.
        k("create", "configmap", "w1", "--from-literal=a=1")
        k("patch", "configmap", "w1", "-p", '{"data":{"a":"2"}}')
        k("delete", "configmap", "w1")
        lines = []
        deadline = time.monotonic() + 15
        while len(lines) < 3 and time.monotonic() < deadline:
            line = watch.stdout.readline()
            if line.strip():
                lines.append(line.split())
    finally:
        watch.terminate()
        watch.wait(timeout=10)
    assert lines == [["ADDED", "w1", "1"], ["MODIFIED", "w1", "2"], ["DELETED", "w1", "2"]]


def open_watch(cluster, port, path, identity="admin", timeout=10):
    conn = cluster.connection(port, timeout=timeout)
    conn.request("GET", path, headers={"Authorization": f"Bearer {cluster.token(identity)}",
                                       "Accept": "application/json"})
    return conn, conn.getresponse()


def test_watch_streams_the_same_bytes_as_the_apiserver_event_by_event(cluster, proxy, namespace):
    cluster.kubectl("create", "configmap", "seed", "-n", namespace)
    rv = json.loads(cluster.request("GET", f"/api/v1/namespaces/{namespace}/configmaps").body)[
        "metadata"]["resourceVersion"]
    path = f"/api/v1/namespaces/{namespace}/configmaps?watch=1&resourceVersion={rv}"
    # getresponse() returns only once headers arrive: on an idle watch that proves the proxy
    # flushes them before any event.
    dconn, direct = open_watch(cluster, cluster.port, path)
    pconn, proxied = open_watch(cluster, proxy.secure_port, path)
    assert proxied.status == direct.status == 200
    assert proxied.getheader("Transfer-Encoding") == "chunked"
    assert proxied.getheader("Content-Type") == direct.getheader("Content-Type")
    for i in range(5):
        cluster.kubectl("create", "configmap", f"e{i}", "-n", namespace,
                        f"--from-literal=i={i}")
        # Each event arrives on its own, while the stream stays open.
        d, p = direct.readline(), proxied.readline()
        assert p == d
        assert json.loads(p)["object"]["metadata"]["name"] == f"e{i}"
    dconn.close()
    pconn.close()


def test_forbidden_and_not_found_are_identical_to_the_apiserver(cluster, proxy, namespace):
    cases = [("GET", "/api/v1/namespaces/default/pods", "alice"),
             ("GET", "/api/v1/nodes", "bob"),
             ("POST", f"/api/v1/namespaces/{namespace}/configmaps", "alice"),
             ("GET", f"/api/v1/namespaces/{namespace}/pods/missing", "admin"),
             ("GET", "/apis/apps/v1/namespaces/default/deployments/nope", "admin"),
             ("GET", "/api/v1/namespaces/default/nonsense", "admin"),
             ("GET", "/no/such/path", "admin")]
    for method, path, who in cases:
        body = b"{}" if method == "POST" else None
        direct = cluster.request(method, path, identity=who, body=body)
        proxied = cluster.request(method, path, identity=who, body=body, port=proxy.secure_port)
        assert direct.status in (403, 404), (path, direct.status)
        same_answer(direct, proxied)
    denied = cluster.kubectl("get", "pods", "-n", "default", identity="alice", check=False)
    denied_via = cluster.kubectl("get", "pods", "-n", "default", identity="alice",
                                 server=proxy.server, check=False)
    assert denied_via.returncode == denied.returncode != 0
    assert denied_via.stderr == denied.stderr


def test_proxy_never_lends_its_own_identity(cluster, proxy):
    # kube-fanout holds an admin kubeconfig; a request without credentials must still be
    # anonymous upstream, and a user's request must stay that user's.
    for path in ("/api/v1/namespaces", "/api/v1/namespaces/default/secrets"):
        direct = cluster.request("GET", path, identity="anonymous")
        proxied = cluster.request("GET", path, identity="anonymous", port=proxy.secure_port)
        assert direct.status == 403
        same_answer(direct, proxied)
        assert b"system:anonymous" in proxied.body
    whoami = cluster.kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}",
                             identity="bob", server=proxy.server)
    assert whoami.stdout == "kf-bob"


def test_large_bodies_stream_both_ways(cluster, proxy, namespace):
    value = "x" * (900 * 1024)
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
          "data": {"v": value}}
    created = cluster.request("POST", f"/api/v1/namespaces/{namespace}/configmaps",
                              body=json.dumps(cm).encode(), port=proxy.secure_port,
                              headers={"Content-Type": "application/json"})
    assert created.status == 201, created.body[:300]
    path = f"/api/v1/namespaces/{namespace}/configmaps/big"
    direct = cluster.request("GET", path)
    proxied = cluster.request("GET", path, port=proxy.secure_port)
    same_answer(direct, proxied)
    assert json.loads(proxied.body)["data"]["v"] == value
    # Compressed answers (the apiserver gzips large responses) pass through as they are.
    gz = {"Accept-Encoding": "gzip"}
    direct = cluster.request("GET", path, headers=gz)
    proxied = cluster.request("GET", path, headers=gz, port=proxy.secure_port)
    assert proxied.headers.get("content-encoding") == direct.headers.get("content-encoding") == "gzip"
    assert gzip.decompress(proxied.body) == gzip.decompress(direct.body)


def test_chunked_request_body_passes_through(cluster, proxy, namespace):
    cm = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "chunky"},
                     "data": {"k": "v" * 50000}}).encode()
    conn = cluster.connection(proxy.secure_port)
    conn.putrequest("POST", f"/api/v1/namespaces/{namespace}/configmaps")
    conn.putheader("Authorization", f"Bearer {cluster.token('admin')}")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    for i in range(0, len(cm), 7000):
        piece = cm[i:i + 7000]
        conn.send(b"%x\r\n%s\r\n" % (len(piece), piece))
    conn.send(b"0\r\n\r\n")
    resp = conn.getresponse()
    assert resp.status == 201, resp.read()[:300]
    assert json.loads(resp.read())["data"]["k"] == "v" * 50000


def test_exec_upgrade_errors_match_the_apiserver(cluster, proxy, namespace):
    # The rig has no kubelet: exec into an unscheduled pod fails the same way either way,
    # after kube-fanout forwarded the upgrade request.
    cluster.kubectl("run", "p", "-n", namespace, "--image=busybox", "--restart=Never")
    direct = cluster.kubectl("exec", "p", "-n", namespace, "--", "true", check=False)
    proxied = cluster.kubectl("exec", "p", "-n", namespace, "--", "true", server=proxy.server,
                              check=False)
    assert direct.returncode != 0
    assert (proxied.returncode, proxied.stderr) == (direct.returncode, direct.stderr)
    routes = [json.loads(l) for l in proxy.log_lines() if '"/exec' in l or "exec?" in l]
    assert any(r.get("route") == "tunnel" for r in routes)


def test_own_health_endpoints(cluster, proxy):
    for path in ("/healthz", "/livez", "/readyz", "/readyz/ping"):
        resp = cluster.request("GET", path, port=proxy.port, tls=False, identity="anonymous")
        assert (resp.status, resp.body) == (200, b"ok"), path
    verbose = cluster.request("GET", "/readyz?verbose", port=proxy.port, tls=False)
    assert verbose.body == b"[+]ping ok\n[+]shutdown ok\nreadyz check passed\n"


def test_each_request_is_logged_as_one_json_line(cluster, proxy):
    cluster.request("GET", "/api/v1/namespaces/default?kf-log-probe=1", port=proxy.secure_port)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        hits = [json.loads(l) for l in proxy.log_lines() if "kf-log-probe" in l]
        if hits:
            break
        time.sleep(0.05)
    assert len(hits) == 1
    line = hits[0]
    assert (line["msg"], line["method"], line["verb"], line["resource"], line["status"],
            line["route"]) == ("request", "GET", "get", "namespaces", 200, "passthrough")
    assert line["upstream"] == cluster.url and line["latency_ms"] >= 0


def test_malformed_request_gets_400(cluster, proxy):
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as s:
        s.sendall(b"GARBAGE\r\n\r\n")
        reply = s.recv(4096)
    assert reply.startswith(b"HTTP/1.1 400 Bad Request\r\n")


def test_failover_to_the_next_upstream(cluster, tmp_path):
    dead = free_port()
    p = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources="], upstream_args=[
        f"--upstream=https://127.0.0.1:{dead}", f"--upstream={cluster.url}",
        f"--upstream-ca-file={cluster.env['KF_CA_FILE']}"])
    try:
        resp = cluster.request("GET", "/api/v1/namespaces/default", port=p.secure_port)
        assert resp.status == 200
    finally:
        assert p.stop() == 0


def test_unreachable_upstream_answers_a_503_status(cluster, tmp_path):
    dead = free_port()
    p = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources="],
                    upstream_args=[f"--upstream=https://127.0.0.1:{dead}"])
    try:
        resp = cluster.request("GET", "/api/v1/pods", port=p.port, tls=False)
        assert resp.status == 503
        assert resp.headers["retry-after"] == "1"
        status = json.loads(resp.body)
        assert (status["kind"], status["reason"], status["code"]) == (
            "Status", "ServiceUnavailable", 503)
    finally:
        assert p.stop() == 0


def test_sigterm_ends_open_watches_cleanly_between_events_and_exits(cluster, namespace,
                                                                    tmp_path):
    # Several MB of initial events are in flight when the signal lands: the stream must still
    # end after a whole event, with a proper end of the chunked body.
    for i in range(8):
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"big{i}"},
              "data": {"v": str(i) * (400 * 1024)}}
        assert cluster.request("POST", f"/api/v1/namespaces/{namespace}/configmaps",
                               body=json.dumps(cm).encode(),
                               headers={"Content-Type": "application/json"}).status == 201
    p = Proxy.start(cluster, tmp_path,
                    extra_args=["--shutdown-grace-period=10s", "--cache-resources="])
    conn, watch = open_watch(cluster, p.secure_port,
                             f"/api/v1/namespaces/{namespace}/configmaps?watch=1")
    assert watch.status == 200
    first = watch.readline()  # Initial ADDED events of an RV-less watch.
    assert json.loads(first)["type"] == "ADDED"
    started = time.monotonic()
    p.process.send_signal(signal.SIGTERM)
    rest = watch.read()  # Raises IncompleteRead unless the chunked stream was terminated.
    assert rest == b"" or rest.endswith(b"\n")
    assert all(json.loads(l)["type"] == "ADDED" for l in rest.splitlines())
    assert p.process.wait(timeout=15) == 0
    assert time.monotonic() - started < 5
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", p.port), timeout=2)
    conn.close()


def test_upgrade_is_tunnelled_byte_for_byte(cluster, tmp_path):
    # Mechanism test for the 101 path (the rig has no kubelet to exec into): a loopback
    # upstream that switches protocols and echoes stands in for the apiserver.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    seen = {}

    def upstream():
        s, _ = listener.accept()
        with s:
            head = b""
            while b"\r\n\r\n" not in head:
                head += s.recv(4096)
            seen["request"] = head
            s.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                      b"Upgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n")
            while True:
                data = s.recv(4096)
                if not data:
                    return
                s.sendall(data.upper())

    t = threading.Thread(target=upstream, daemon=True)
    t.start()
    # The loopback peer answers one request only: no admission (its identity lookup would be a
    # request of its own).
    p = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources=",
                                                   "--enable-admission=false"], upstream_args=[
        f"--upstream=http://127.0.0.1:{listener.getsockname()[1]}"])
    try:
        with socket.create_connection(("127.0.0.1", p.port), timeout=5) as c:
            c.sendall(b"POST /api/v1/namespaces/n/pods/p/exec?command=sh HTTP/1.1\r\n"
                      b"Host: x\r\nAuthorization: Bearer client-own\r\nConnection: Upgrade\r\n"
                      b"Upgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n"
                      b"Content-Length: 0\r\n\r\n")
            head = b""
            while b"\r\n\r\n" not in head:
                head += c.recv(4096)
            assert head.startswith(b"HTTP/1.1 101 ")
            assert b"Upgrade: SPDY/3.1" in head
            for chunk in (b"hello", b"\x00\x01binary\xff", b"x" * 100000):
                c.sendall(chunk)
                got = b""
                while len(got) < len(chunk):
                    got += c.recv(65536)
                assert got == chunk.upper()
        assert b"Authorization: Bearer client-own" in seen["request"]
        assert b"Upgrade: SPDY/3.1" in seen["request"]
    finally:
        assert p.stop() == 0
        listener.close()


def test_a_passthrough_watch_ends_upstream_when_its_client_leaves(cluster, proxy):
    # Quiet watches: nothing will fail a write, so kube-fanout must notice the client's end.
    def upstream_watches():
        text = cluster.request("GET", "/metrics").body.decode()
        return sum(float(l.rpartition(" ")[2]) for l in text.splitlines()
                   if l.startswith("apiserver_longrunning_requests{") and 'verb="WATCH"' in l
                   and 'resource="secrets"' in l)

    before = upstream_watches()
    conns = []
    for _ in range(5):
        conn, resp = open_watch(cluster, proxy.secure_port, "/api/v1/namespaces/default/secrets?watch=1&resourceVersion=0")
        assert resp.status == 200
        conns.append(conn)
    deadline = time.monotonic() + 5
    while upstream_watches() < before + 5 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert upstream_watches() == before + 5
    for conn in conns:
        conn.close()
    deadline = time.monotonic() + 5
    while upstream_watches() > before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert upstream_watches() == before


def two_requests_on_one_connection(cluster, port, first_path):
    """GETs `first_path`, then POSTs a SelfSubjectAccessReview on the same kept-alive
    connection (a new one only if the first answer said `Connection: close`, as a client's pool
    would). The first answer's status and whether it said close, and whether the second request
    went on the first one's connection. A connection closed without saying so fails the second
    request (http.client: RemoteDisconnected or a reset); a POST is not sent again on a fresh
    connection by a tier below either (its body may have been taken)."""
    conn = cluster.connection(port)
    headers = {"Authorization": f"Bearer {cluster.token('admin')}", "Accept": "application/json"}
    review = {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
              "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}}
    try:
        conn.request("GET", first_path, headers=headers)
        first = conn.getresponse()
        first.read()
        said_close = first.will_close
        sock = conn.sock  # None when http.client closed it for the answer's `Connection: close`.
        time.sleep(0.2)  # A server that closes after its answer has done so by now.
        conn.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                     body=json.dumps(review), headers=headers | {"Content-Type": "application/json"})
        second = conn.getresponse()
        second_body = second.read()
        assert second.status == 201, second_body
        assert json.loads(second_body)["status"]["allowed"] is True
        return first.status, said_close, sock is not None and conn.sock is sock
    finally:
        conn.close()


@pytest.mark.parametrize("query", [
    # The apiserver refuses it (422, Invalid: resourceVersionMatch is forbidden for a watch).
    "watch=1&resourceVersionMatch=NotOlderThan&resourceVersion=0",
    # A watch the apiserver ends itself, after its timeout.
    "watch=1&timeoutSeconds=1",
])
@pytest.mark.parametrize("fixture", ["proxy", "cached_proxy"])
def test_a_connection_that_carried_a_finished_watch_is_kept_or_closed_as_the_apiserver_does(
        cluster, request, fixture, query):
    # A tier's pool reused such a connection for a SubjectAccessReview, which met the end of
    # the stream: kube-fanout had closed the connection after an answer that did not say so.
    # (`proxy` passes every watch through; `cached_proxy` serves configmaps from its cache, and
    # with KF_FIDELITY_TIERS=N is the bottom of N tiers, whose pools carry the POST.)
    p = request.getfixturevalue(fixture)
    path = f"/api/v1/namespaces/default/configmaps?{query}"
    direct = two_requests_on_one_connection(cluster, cluster.port, path)
    assert direct[0] in (200, 422)
    assert two_requests_on_one_connection(cluster, p.secure_port, path) == direct
