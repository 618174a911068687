"""Wrong answers and crashes found with real clients and hostile input, each compared with the
real apiserver's answer to the same request (issue: "First: wrong answers and crashes").

Every test checks that its setup happened (objects exist, requests were coalesced, events were
stored) before it compares, and that kube-fanout is still alive afterwards.
"""
import base64
import concurrent.futures
import json
import socket
import ssl
import subprocess
import threading
import time

import pytest

from kfrig import Proxy, metric_values


def alive(cluster, proxy):
    """kube-fanout still answers (it was not killed by what came before)."""
    assert proxy.process.poll() is None, f"kube-fanout died:\n{proxy.log_tail()}"
    assert cluster.request("GET", "/readyz", port=proxy.port, tls=False).status == 200


def same_answer(direct, through, what):
    assert (through.status, through.body) == (direct.status, direct.body), (
        what, direct.status, direct.body[:300], through.status, through.body[:300])


def raw_exchange(cluster, port, request, tls):
    """Sends raw request bytes, returns everything the server sends before it closes."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    if tls:
        sock = cluster.ssl_context().wrap_socket(sock, server_hostname="127.0.0.1")
    with sock:
        try:
            sock.sendall(request)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass  # The server may answer and close before reading it all.
        data = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, ssl.SSLError, socket.timeout):
                break
            if not chunk:
                break
            data += chunk
    return data


# --- 1. Coalesced passthrough reads: every answer is its own --------------------------------

@pytest.fixture
def many_objects(cluster, namespace):
    """Objects of kinds kube-fanout does not cache by default, so reads pass through."""
    items = []
    for i in range(6):
        items.append({"apiVersion": "v1", "kind": "Secret",
                      "metadata": {"name": f"s{i}", "namespace": namespace},
                      "stringData": {"k": str(i)}})
        items.append({"apiVersion": "v1", "kind": "ServiceAccount",
                      "metadata": {"name": f"sa{i}", "namespace": namespace}})
        items.append({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                      "metadata": {"name": f"l{i}", "namespace": namespace},
                      "spec": {"holderIdentity": f"h{i}"}})
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                          "items": items}))
    return namespace


def test_concurrent_different_reads_under_one_token_each_get_their_own_answer(
        cluster, proxy, many_objects):
    ns = many_objects
    paths = []
    for i in range(6):
        paths += [f"/api/v1/namespaces/{ns}/secrets/s{i}",
                  f"/api/v1/namespaces/{ns}/serviceaccounts/sa{i}",
                  f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/l{i}"]
    paths += [f"/api/v1/namespaces/{ns}/secrets", f"/api/v1/namespaces/{ns}/serviceaccounts",
              f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
              "/apis/apps/v1/daemonsets", "/apis/apps/v1/deployments", "/api/v1/secrets",
              "/apis/batch/v1/cronjobs", "/api/v1/endpoints",
              f"/api/v1/namespaces/{ns}/secrets?labelSelector=none%3Dx",
              f"/api/v1/namespaces/{ns}/secrets/missing"]

    def identity(body):
        doc = json.loads(body)
        names = [item["metadata"]["name"] for item in doc.get("items", [])]
        return doc.get("kind"), doc.get("metadata", {}).get("name"), names

    expected = {}
    for path in paths:
        direct = cluster.request("GET", path)
        assert direct.status in (200, 404), (path, direct.status)
        expected[path] = (direct.status, identity(direct.body))
    # Setup: every named object exists.
    assert sum(status == 200 for status, _ in expected.values()) == len(paths) - 1

    def coalesced():
        text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
        return metric_values(text, "kube_fanout_requests_total").get('{route="coalesced"}', 0)

    before = coalesced()
    wrong = []
    # 8 rounds of every path 6 times over, all at once on one token: identical requests
    # coalesce, different ones must not.
    with concurrent.futures.ThreadPoolExecutor(max_workers=64) as pool:
        for _ in range(8):
            jobs = [(path, pool.submit(cluster.request, "GET", path, port=proxy.port, tls=False))
                    for path in paths * 6]
            for path, job in jobs:
                got = job.result()
                if (got.status, identity(got.body)) != expected[path]:
                    wrong.append((path, got.status, identity(got.body)))
    assert not wrong, wrong[:5]
    # The coalescer was exercised (else this proves nothing about it).
    assert coalesced() > before
    alive(cluster, proxy)


# --- 2. One request must not kill the process -----------------------------------------------

def test_a_header_value_over_64_kib_gets_431_and_kills_nothing(cluster, proxy):
    big = b"x" * (70 * 1024)
    request = b"GET /api/v1/namespaces HTTP/1.1\r\nHost: a\r\nX-Big: " + big + b"\r\n\r\n"
    reply = raw_exchange(cluster, proxy.port, request, tls=False)
    assert reply == (b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                     b"Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
                     b"431 Request Header Fields Too Large")
    alive(cluster, proxy)


def test_a_header_over_the_apiservers_limit_gets_the_apiservers_answer(cluster, proxy):
    # Past Go's 1 MiB (+4 KiB) header limit, in fields each small enough for Beast.
    fields = b"".join(b"X-F%d: %s\r\n" % (i, b"y" * 1000) for i in range(1100))
    request = b"GET /api/v1/namespaces HTTP/1.1\r\nHost: a\r\n" + fields + b"\r\n"
    direct = raw_exchange(cluster, cluster.port, request, tls=True)
    through = raw_exchange(cluster, proxy.secure_port, request, tls=True)
    assert direct.startswith(b"HTTP/1.1 431 "), direct[:200]
    assert through == direct
    alive(cluster, proxy)


def test_a_deeply_nested_continue_token_gets_the_apiservers_400(cluster, cached_proxy,
                                                                namespace):
    deep = "[" * 200000 + "]" * 200000
    token = base64.urlsafe_b64encode(
        ('{"v":"meta.k8s.io/v1","rv":5,"start":"a","x":' + deep + "}").encode()).rstrip(b"=")
    path = f"/api/v1/namespaces/{namespace}/configmaps?limit=1&continue={token.decode()}"
    direct = cluster.request("GET", path)
    through = cluster.request("GET", path, port=cached_proxy.secure_port)
    assert direct.status == 400, direct.body[:300]
    same_answer(direct, through, "continue")
    alive(cluster, cached_proxy)


def curl_post(cluster, port, path, body_file, identity):
    """POST with curl, which (unlike http.client) reads an answer that comes before the whole
    body went up, as Go's client does. Returns (status, body)."""
    out = body_file.with_suffix(f".{port}.out")
    out.unlink(missing_ok=True)
    # HTTP/1.1 as kube-fanout speaks upstream: over HTTP/2 the apiserver resets the stream of a
    # body it did not read, and curl then sometimes drops the answer's body (curl error 18).
    cmd = ["curl", "--http1.1", "-sS", "-o", str(out), "-w", "%{http_code}", "-X", "POST",
           "--data-binary", f"@{body_file}", "-H", "Content-Type: application/json",
           "--cacert", cluster.env["KF_CA_FILE"], f"https://127.0.0.1:{port}{path}"]
    if cluster.token(identity):
        cmd += ["-H", f"Authorization: Bearer {cluster.token(identity)}"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    body = out.read_bytes() if out.exists() else b""
    assert body, (port, identity, done.stdout, done.stderr)
    return int(done.stdout or 0), body


def test_a_deeply_nested_event_body_gets_the_apiservers_answer(cluster, cached_proxy, namespace,
                                                               tmp_path):
    path = f"/api/v1/namespaces/{namespace}/events"
    # Authenticated: the body is read (by kube-fanout's spam filter, then the apiserver), 2.8 MB,
    # under the apiserver's 3 MiB limit. Unauthenticated: 20 MB, which the apiserver refuses
    # without reading and then closes, so kube-fanout sees its answer while the body is still
    # going up (more than loopback socket buffers hold).
    def body_file(name, depth):
        f = tmp_path / f"{name}.json"
        f.write_bytes(('{"apiVersion":"v1","kind":"Event","metadata":{"name":"e"},"x":' +
                       "[" * depth + "]" * depth + "}").encode())
        return f

    # (The apiserver's own answer to the unauthenticated 20 MB body loses its body to the reset
    # that follows; it does not read the body, so its answer to a small one is the same.)
    for identity, depth, direct_depth in (("admin", 1400000, 1400000),
                                          ("anonymous", 10000000, 10)):
        direct = curl_post(cluster, cluster.port, path,
                           body_file(f"direct-{identity}", direct_depth), identity)
        through = curl_post(cluster, cached_proxy.secure_port, path,
                            body_file(f"through-{identity}", depth),
                            identity)
        assert direct[0] in (400, 401, 403, 422), (identity, direct)
        assert through == direct, (identity, direct, through)
    alive(cluster, cached_proxy)


ADMISSION_HEAD = "apiVersion: kube-fanout.io/v1alpha1\nkind: AdmissionConfiguration\n"
GOOD_ADMISSION = ADMISSION_HEAD + """priorityLevels:
- name: exempt
  type: Exempt
flowSchemas:
- name: all
  priorityLevel: exempt
  matchingPrecedence: 1
"""


def test_a_malformed_admission_config_is_refused_clearly_at_start_and_on_reload(cluster,
                                                                               tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(ADMISSION_HEAD + "? {a: b}\n: c\n")
    (tmp_path / "start").mkdir()
    with pytest.raises(RuntimeError) as start:
        Proxy.start(cluster, tmp_path / "start", extra_args=[f"--admission-config={bad}"])
    assert "field names must be strings" in str(start.value)
    assert "terminate" not in str(start.value)

    config = tmp_path / "admission.yaml"
    config.write_text(GOOD_ADMISSION)
    (tmp_path / "run").mkdir()
    p = Proxy.start(cluster, tmp_path / "run", extra_args=[f"--admission-config={config}"])
    try:
        config.write_text(ADMISSION_HEAD + "flowSchemas:\n- ? [x]\n  : y\n")
        wait_for_log(p, "admission config rejected")
        alive(cluster, p)
        config.write_text(GOOD_ADMISSION.replace("name: all", "name: everything"))
        wait_for_log(p, "admission config reloaded")  # The reload loop lives on.
        alive(cluster, p)
    finally:
        assert p.stop() == 0


def route_of(proxy, uri_part):
    """The route of the last logged request whose URI contains `uri_part`."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        lines = [json.loads(line) for line in proxy.log_lines() if '"msg":"request"' in line]
        hits = [line["route"] for line in lines if uri_part in line.get("uri", "")]
        if hits:
            return hits[-1]
        time.sleep(0.05)
    return None


def wait_for_log(proxy, text, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(text in line for line in proxy.log_lines()):
            return
        time.sleep(0.1)
    raise AssertionError(f"no {text!r} in the log:\n{proxy.log_tail()}")


# --- 4. Hand-built bodies and arithmetic on client numbers ----------------------------------

def test_a_cached_404_escapes_the_name_as_the_apiserver_does(cluster, cached_proxy, namespace):
    cluster.kubectl("create", "configmap", "present", "-n", namespace)
    assert cluster.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/present").status \
        == 200
    for name in ('x%22,%22code%22:200,%22kind%22:%22Pod', "a%3Cb%3E%26c", "caf%C3%A9",
                 "%E2%80%A8", "q%5C%22"):
        path = f"/api/v1/namespaces/{namespace}/configmaps/{name}"
        # Wait until the cache holds the namespace's state, then compare.
        direct = cluster.request("GET", path)
        through = cluster.request("GET", path, port=cached_proxy.secure_port)
        assert direct.status == 404
        same_answer(direct, through, name)
        assert json.loads(through.body)["code"] == 404  # Well-formed, nothing injected.
        assert route_of(cached_proxy, f"configmaps/{name}") == "cache", name


def test_watch_timeouts_near_the_int64_limit_behave_as_the_apiserver(cluster, cached_proxy,
                                                                     namespace):
    """The apiserver multiplies timeoutSeconds into int64 nanoseconds, which wraps: a wrapped
    negative deadline has passed (200, the stream ends at once, with or without the initial
    events, racing), the largest positive one is practically forever."""
    cluster.kubectl("create", "configmap", "w", "-n", namespace)
    for seconds, ends in (("9223372036854775807", True), ("9223372037", True),
                          ("9223372036", False)):
        path = (f"/api/v1/namespaces/{namespace}/configmaps?watch=1&resourceVersion=0"
                f"&timeoutSeconds={seconds}")
        for name, port in (("direct", cluster.port), ("through", cached_proxy.secure_port)):
            conn = cluster.connection(port, timeout=3)
            conn.request("GET", path, headers={
                "Authorization": f"Bearer {cluster.token('admin')}"})
            resp = conn.getresponse()
            assert resp.status == 200, (seconds, name)
            lines = []
            try:
                while line := resp.readline():
                    lines.append(json.loads(line))
                ended = True
            except socket.timeout:
                ended = False
            conn.close()
            assert ended == ends, (seconds, name, lines)
            assert [e["object"]["metadata"]["name"] for e in lines] in ([], ["w"]), lines
            if not ends:
                assert [e["type"] for e in lines] == ["ADDED"], (seconds, name)
    alive(cluster, cached_proxy)


# --- 5. The Event spam filter judges authenticated senders only, each on its own budget ------

def test_claims_in_an_event_body_cannot_silence_another_identity(cluster, cached_proxy,
                                                                 namespace):
    def event(i):
        return json.dumps({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"claim-{i}", "namespace": namespace},
            "involvedObject": {"kind": "Pod", "namespace": namespace, "name": "p0",
                               "apiVersion": "v1"},
            "reason": "Pulled", "message": "m",
            "source": {"component": "kubelet", "host": "node-7"}, "type": "Normal"})

    path = f"/api/v1/namespaces/{namespace}/events"
    hdrs = {"Content-Type": "application/json"}
    # Unauthenticated senders: the apiserver's own answer, every time, never counted.
    for i in range(30):
        direct = cluster.request("POST", path, identity="anonymous", body=event(i), headers=hdrs)
        through = cluster.request("POST", path, identity="anonymous", body=event(i),
                                  headers=hdrs, port=cached_proxy.secure_port)
        assert direct.status in (401, 403)
        same_answer(direct, through, f"anonymous {i}")
    # An authenticated user claiming the same source spends only its own budget.
    cluster.kubectl("create", "role", "event-writer", "--verb=create", "--resource=events",
                    "-n", namespace)
    cluster.kubectl("create", "rolebinding", "bob-events", "--role=event-writer",
                    "--user=kf-bob", "-n", namespace)
    deadline = time.monotonic() + 10
    while cluster.request("POST", path, identity="bob", body=event("probe"),
                          headers=hdrs).status != 201:
        assert time.monotonic() < deadline, "bob never got to create events"
        time.sleep(0.2)
    codes = [cluster.request("POST", path, identity="bob", body=event(f"b{i}"), headers=hdrs,
                             port=cached_proxy.secure_port).status for i in range(30)]
    assert codes == [201] * 25 + [429] * 5
    # The real sender of that source is not silenced.
    real = cluster.request("POST", path, body=event("real"), headers=hdrs,
                           port=cached_proxy.secure_port)
    assert real.status == 201, real.body[:300]
    stored = json.loads(cluster.request("GET", path).body)["items"]
    assert {"claim-real", "claim-probe"} <= {e["metadata"]["name"] for e in stored}
