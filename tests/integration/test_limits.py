"""Limits of docs/limits.md that kube-fanout enforces itself, against the real apiserver.

- More than 10,000 query parameters: the query reads as empty, as Go's url.ParseQuery makes the
  apiserver read it (a cached LIST then ignores its selector as the apiserver does).
- File descriptors: near the process's limit new connections are refused at once (and counted)
  while the connections already open keep being served, passthrough included.
- A request body trickled in: the whole body has the apiserver's request timeout
  (--request-timeout, 60 s by default as the apiserver's, 10 s here); past it
  an Event body kube-fanout reads itself and a ConfigMap body it relays get the apiserver's 504
  Timeout Status.
- Stalled watchers past --watchers-max-total-queue-bytes are cut (by that reason) while a
  reader goes on.
- Cached watches past --max-watchers or --max-watchers-per-user: 429 TooManyRequests with
  Retry-After, counted; exempt clients are not counted.
- Requests refused before routing (400, 431, a TLS handshake that fails, a head that never
  ends) are counted by reason.
- Passthrough watches and tunnels past --max-passthrough-watches or its per-identity bound:
  429 TooManyRequests with Retry-After, counted; exempt clients are not counted.
- A request head has one deadline, 30 s, however it is trickled in: from the end of the TLS
  handshake for a connection's first request, from its first byte on a kept-alive connection.
- resourceVersion is read as Go's strconv.ParseUint: what the apiserver refuses (a sign, a
  space) gets its own answer (400 to a LIST, 500 to a GET or WATCH), not served from the cache.
"""
import json
import resource
import socket
import ssl
import threading
import time
import urllib.parse

import pytest

from kfrig import Proxy, metric_values, scaled
from test_cache import big_events_reach_a_reader, compare, stalled_watch


def test_more_than_ten_thousand_query_parameters_read_as_empty(cluster, cached_proxy, namespace):
    cluster.kubectl("create", "configmap", "kept", "-n", namespace, "--from-literal=a=b")
    base = f"/api/v1/namespaces/{namespace}/configmaps?labelSelector=app%3Dnone"
    # compare() adds one parameter (its marker): 10,000 in all, then 10,001.
    under = json.loads(compare(cluster, cached_proxy, base + "&p=1" * 9998).body)
    assert under["items"] == []  # The selector applies.
    over = json.loads(compare(cluster, cached_proxy, base + "&p=1" * 9999).body)
    assert [i["metadata"]["name"] for i in over["items"]] == ["kept"]  # The query is ignored.


def _limit_fds(n):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))


def _get(conn, path, token):
    conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
    resp = conn.getresponse()
    resp.read()
    return resp.status


def test_near_the_descriptor_limit_new_connections_are_refused_and_old_ones_served(
        cluster, tmp_path):
    # 256 descriptors: new connections are refused from descriptor 192 (256 less 64 of headroom).
    proxy = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources="],
                        preexec_fn=_limit_fds(256))
    token = cluster.token("admin")
    conns = []
    try:
        refused = 0
        for _ in range(260):
            conn = cluster.connection(proxy.port, tls=False, timeout=scaled(10))
            try:
                assert _get(conn, "/healthz", token) == 200
                conns.append(conn)
            except (ConnectionError, OSError, AssertionError):
                conn.close()
                refused += 1
                if refused >= 5:
                    break
        print(f"accepted {len(conns)} connections, then {refused} refused")
        assert refused == 5 and 100 <= len(conns) < 192
        # Every connection already open is still served, passthrough (an upstream connection
        # each) included.
        for conn in conns[:: max(1, len(conns) // 20)]:
            assert _get(conn, "/api/v1/namespaces/default", token) == 200
        text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
        # (That scrape's connection came past the headroom too: it may be refused; retry below.)
    except ConnectionError:
        text = None
    finally:
        for conn in conns[: len(conns) // 2]:
            conn.close()
        conns = conns[len(conns) // 2:]
    try:
        # With half of them closed, new connections are served again.
        deadline = time.monotonic() + scaled(10)
        while True:
            try:
                text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
                break
            except (ConnectionError, OSError):
                assert time.monotonic() < deadline, "no new connection served after closing"
                time.sleep(0.2)
        refused_total = metric_values(text, "kube_fanout_connections_refused_total")
        assert refused_total['{reason="fd_headroom"}'] >= 5
        assert refused_total['{reason="accept_error"}'] == 0
        assert metric_values(text, "process_max_fds")[""] == 256
        assert any("refusing new connections" in line for line in proxy.log_lines())
    finally:
        for conn in conns:
            conn.close()
        assert proxy.stop() == 0


# An Event's body kube-fanout reads itself (the spam filter); a ConfigMap's it relays as it comes.
@pytest.mark.parametrize("collection", ["events", "configmaps"])
def test_a_body_trickled_in_gets_the_apiservers_timeout(cluster, namespace, collection, tmp_path):
    # --request-timeout as short as the apiserver's may be set (its default, 60 s, is
    # kube-fanout's too): the deadline and the answer are the same at any length.
    proxy = Proxy.start(cluster, tmp_path, extra_args=[f"--request-timeout={BODY_TIMEOUT}s"])
    try:
        _trickle_a_body(cluster, proxy, namespace, collection)
    finally:
        assert proxy.stop() == 0


BODY_TIMEOUT = 10


def _trickle_a_body(cluster, cached_proxy, namespace, collection):
    if collection == "events":
        event = json.dumps({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "slow", "namespace": namespace},
            "involvedObject": {"kind": "Pod", "namespace": namespace, "name": "p0"},
            "reason": "Slow", "message": "a body sent a byte at a time",
            "source": {"component": "slowpoke"}, "type": "Normal"}).encode()
    else:
        event = json.dumps({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "slow", "namespace": namespace},
            "data": {"why": "a body sent a byte at a time"}}).encode()
    head = (f"POST /api/v1/namespaces/{namespace}/{collection} HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {cluster.token('admin')}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(event)}\r\n\r\n").encode()
    def body_timeouts():
        text = cluster.request("GET", "/metrics", port=cached_proxy.port, tls=False).body.decode()
        return metric_values(text, "kube_fanout_request_body_timeouts_total")[
            '{protocol="http/1.1"}']

    before = body_timeouts()
    sock = socket.create_connection(("127.0.0.1", cached_proxy.port), timeout=5)
    start = time.monotonic()
    sock.sendall(head + event[:10])
    sent, answer = 10, b""
    sock.settimeout(1)
    # One byte a second: each read is well within the 120 s idle timeout; the whole is not
    # within --request-timeout.
    while sent < len(event) - 1 and time.monotonic() - start < 3 * BODY_TIMEOUT:
        try:
            answer = sock.recv(65536)
            break
        except socket.timeout:
            pass
        sock.sendall(event[sent:sent + 1])
        sent += 1
    took = time.monotonic() - start
    sock.settimeout(scaled(10))
    while True:  # The answer closes the connection: read to its end.
        more = sock.recv(65536)
        if not more:
            break
        answer += more
    sock.close()
    print(f"answered after {took:.1f}s, {sent} of {len(event)} bytes sent")
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line == b"HTTP/1.1 504 Gateway Timeout", answer[:300]
    body = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "Timeout: request did not complete within the allotted timeout",
                    "reason": "Timeout", "details": {}, "code": 504}
    assert BODY_TIMEOUT - 1 <= took <= BODY_TIMEOUT + 6
    assert body_timeouts() == before + 1
    assert cluster.request("GET", f"/api/v1/namespaces/{namespace}/{collection}/slow").status == 404


def _watch(cluster, port, path, identity):
    conn = cluster.connection(port, timeout=scaled(15))
    conn.request("GET", path, headers={"Authorization": f"Bearer {cluster.token(identity)}",
                                       "Accept": "application/json"})
    return conn, conn.getresponse()


# kube-fanout's answer past a bound on open watches (as admission's 429).
TOO_MANY_REQUESTS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                     "message": "Too many requests, please try again later.",
                     "reason": "TooManyRequests", "details": {"retryAfterSeconds": 1},
                     "code": 429}


def _metrics(cluster, proxy):
    return cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()


def _refused_429(conn, resp):
    """The body of a 429 with Retry-After: 1; closes the connection."""
    body = json.loads(resp.read())
    conn.close()
    assert resp.status == 429, body
    assert resp.getheader("Retry-After") == "1"
    return body


def _close_and_watch_again(cluster, proxy, path, held, metrics, gauge):
    """Closes alice's first watch of `held`; once `gauge` shows two open, her new one is served."""
    held.pop(0).close()
    deadline = time.monotonic() + scaled(10)
    while metric_values(metrics(), gauge)[""] != 2:
        assert time.monotonic() < deadline, "the closed watch still holds its slot"
        time.sleep(0.1)
    conn, resp = _watch(cluster, proxy.secure_port, path, "alice")
    assert resp.status == 200
    held.append(conn)


def test_a_watch_passed_through_on_a_kept_denial_comes_back_to_the_cache(cluster, tmp_path,
                                                                          namespace):
    """alice's watch of ConfigMaps is denied: her review says no, and kube-fanout keeps that
    answer for --authorization-webhook-cache-unauthorized-ttl. She is then granted them, and
    her next watch, while the denial is still kept, passes through to the apiserver, which
    allows it (as a node's watch of its new pod's ConfigMap passes while the Node authorizer
    catches up). It is sent with timeoutSeconds at most twice that TTL instead of the client's
    10 minutes, so the apiserver ends it by then, and her watch after that is the cache's."""
    ttl = 4
    cluster.kubectl("create", "role", "cm-reader", "--verb=get,list,watch",
                    "--resource=configmaps", "-n", namespace)
    proxy = Proxy.start(cluster, tmp_path, extra_args=[
        "--cache-resources=configmaps", f"--authorization-webhook-cache-unauthorized-ttl={ttl}s"])
    path = f"/api/v1/namespaces/{namespace}/configmaps?watch=1&timeoutSeconds=600"

    def route(marker):
        # Logged as the request ends, which may be just after its client saw the end.
        deadline = time.monotonic() + scaled(5)
        while True:
            lines = [json.loads(line) for line in proxy.log_lines()
                     if marker in line and '"msg":"request"' in line]
            if lines:
                return lines[0]["route"]
            assert time.monotonic() < deadline, f"no log line for {marker}"
            time.sleep(0.05)

    try:
        # One connection for both watches: one I/O thread, whose review cache keeps the denial.
        conn = cluster.connection(proxy.secure_port, timeout=scaled(60))
        alice = {"Authorization": f"Bearer {cluster.token('alice')}", "Accept": "application/json"}
        conn.request("GET", path + "&kfback=denied", headers=alice)
        resp = conn.getresponse()
        assert resp.status == 403, resp.read()[:300]  # The apiserver's: not granted yet.
        resp.read()
        denied_at = time.monotonic()
        cluster.kubectl("create", "rolebinding", "cm-readers", "--role=cm-reader",
                        "--user=kf-alice", "-n", namespace)
        deadline = time.monotonic() + scaled(10)
        while cluster.request("GET", path.replace("watch=1", "watch=0"),
                              identity="alice").status != 200:
            assert time.monotonic() < deadline, "the grant did not take effect"
            time.sleep(0.05)
        sent_back = metric_values(_metrics(cluster, proxy),
                                  "kube_fanout_cache_watches_sent_back_total")[""]
        conn.request("GET", path + "&kfback=kept", headers=alice)
        resp = conn.getresponse()
        opened = time.monotonic()
        assert opened - denied_at < ttl, "the denial had expired: nothing tested"
        assert resp.status == 200
        resp.read()  # Until the apiserver ends it.
        lasted = time.monotonic() - opened
        conn.close()
        assert route("kfback=kept") == "passthrough"
        # Ended by the apiserver at the cap (2 × TTL = 8 s), not at once nor after 10 minutes.
        assert 2 * ttl - 1 <= lasted <= scaled(2 * ttl + 10), lasted
        assert metric_values(_metrics(cluster, proxy),
                             "kube_fanout_cache_watches_sent_back_total")[""] == sent_back + 1
        # The client resumes: the denial has expired, the review says yes, the cache answers.
        conn, resp = _watch(cluster, proxy.secure_port, path + "&kfback=back", "alice")
        assert resp.status == 200
        conn.close()
        assert route("kfback=back") == "cache"
    finally:
        proxy.stop()


def test_watches_past_max_watchers_get_429_and_are_counted(cluster, tmp_path, namespace):
    cluster.kubectl("create", "role", "cm-reader", "--verb=get,list,watch",
                    "--resource=configmaps", "-n", namespace)
    cluster.kubectl("create", "rolebinding", "cm-readers", "--role=cm-reader",
                    "--user=kf-alice", "--user=kf-bob", "-n", namespace)
    proxy = Proxy.start(cluster, tmp_path, extra_args=[
        "--cache-resources=configmaps", "--max-watchers=3", "--max-watchers-per-user=2"])
    path = f"/api/v1/namespaces/{namespace}/configmaps?watch=1&resourceVersion=0"
    held = []
    metrics = lambda: _metrics(cluster, proxy)  # noqa: E731
    refused = _refused_429

    try:
        # Two of alice's watches, then her third is past her own bound.
        for _ in range(2):
            conn, resp = _watch(cluster, proxy.secure_port, path, "alice")
            assert resp.status == 200
            held.append(conn)
        per_user = refused(*_watch(cluster, proxy.secure_port, path, "alice"))
        # bob's first fits (three open), his second is past the total.
        conn, resp = _watch(cluster, proxy.secure_port, path, "bob")
        assert resp.status == 200
        held.append(conn)
        total = refused(*_watch(cluster, proxy.secure_port, path, "bob"))
        assert per_user == TOO_MANY_REQUESTS and total == TOO_MANY_REQUESTS
        # The exempt level (system:masters) is not counted, nor refused.
        conn, resp = _watch(cluster, proxy.secure_port, path, "admin")
        assert resp.status == 200
        held.append(conn)
        text = metrics()
        assert metric_values(text, "kube_fanout_watches_refused_total") == {
            '{reason="max_watchers"}': 1, '{reason="max_watchers_per_user"}': 1,
            '{reason="max_passthrough_watches"}': 0,
            '{reason="max_passthrough_watches_per_user"}': 0}
        assert metric_values(text, "kube_fanout_cached_watches_open")[""] == 3
        assert metric_values(text, "kube_fanout_watchers")['{resource="configmaps"}'] == 4
        # One of alice's ends: she may watch again once kube-fanout has seen it go.
        _close_and_watch_again(cluster, proxy, path, held, metrics,
                               "kube_fanout_cached_watches_open")
    finally:
        for conn in held:
            conn.close()
        assert proxy.stop() == 0


def test_requests_refused_before_routing_are_counted_by_reason(cluster, tmp_path):
    proxy = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources="])

    def refused_total():
        text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
        return metric_values(text, "kube_fanout_requests_refused_total")

    def exchange(data):
        sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=scaled(10))
        sock.sendall(data)
        answer = b""
        while True:
            more = sock.recv(65536)
            if not more:
                break
            answer += more
        sock.close()
        return answer

    try:
        before = refused_total()
        assert set(before) == {f'{{reason="{r}"}}' for r in (
            "header_too_large", "bad_request", "header_timeout", "tls_handshake",
            "handshake_queue", "token_review_unavailable", "access_review_unavailable",
            "token_review_throttled")}
        assert all(v == 0 for v in before.values())
        # A head that stops half-way: closed after 30 s (waited for at the end).
        stalled = socket.create_connection(("127.0.0.1", proxy.port), timeout=scaled(45))
        stalled.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        started = time.monotonic()
        assert exchange(b"GET /a HTTP/1.1\r\nBad Field\r\n\r\n").startswith(
            b"HTTP/1.1 400 Bad Request")
        # A field past Beast's 64 KiB (the apiserver's limit is for the whole head).
        assert exchange(b"GET /a HTTP/1.1\r\nX-Big: " + b"b" * (70 * 1024) + b"\r\n\r\n"
                        ).startswith(b"HTTP/1.1 431")
        # Not TLS on the TLS port: the handshake fails.
        with socket.create_connection(("127.0.0.1", proxy.secure_port), timeout=10) as plain:
            plain.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            while plain.recv(65536):
                pass
        # A served request is not a refusal.
        assert cluster.request("GET", "/healthz", port=proxy.port, tls=False).status == 200
        mid = refused_total()
        assert mid['{reason="bad_request"}'] == 1
        assert mid['{reason="header_too_large"}'] == 1
        assert mid['{reason="tls_handshake"}'] == 1
        assert mid['{reason="header_timeout"}'] == 0
        assert stalled.recv(65536) == b""  # Closed by kube-fanout, not answered.
        took = time.monotonic() - started
        stalled.close()
        print(f"the unfinished head was closed after {took:.1f}s")
        assert 25 <= took <= scaled(40)
        # The stream's timer closes the socket before the read's handler counts the refusal:
        # the count may follow the close by a moment (seen under asan).
        deadline = time.monotonic() + scaled(5)
        after = refused_total()
        while after['{reason="header_timeout"}'] == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
            after = refused_total()
        assert after['{reason="header_timeout"}'] == 1
        assert after['{reason="tls_handshake"}'] == 1
    finally:
        assert proxy.stop() == 0


def test_stalled_watchers_past_the_total_queue_bound_are_cut_and_readers_go_on(
        cluster, tmp_path, namespace):
    total = 3 << 20  # Less than one watcher's own 8 MiB: the total is what cuts.
    proxy = Proxy.start(cluster, tmp_path, extra_args=[
        "--cache-resources=configmaps", "--watcher-max-queue-bytes=8388608",
        f"--watchers-max-total-queue-bytes={total}"])
    path = f"/api/v1/namespaces/{namespace}/configmaps?watch=1&resourceVersion=0"
    stalled = []
    try:
        # Two clients that never read, with tiny receive buffers; a reader that does.
        stalled = [stalled_watch(cluster, proxy.port, path) for _ in range(2)]
        conn = big_events_reach_a_reader(cluster, proxy.secure_port, namespace, path)
        text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
        cuts = metric_values(text, "kube_fanout_watchers_cut_total")
        print(cuts, metric_values(text, "kube_fanout_watch_queue_process_bytes"))
        assert cuts['{resource="configmaps",reason="total_queue_bytes"}'] >= 1
        assert cuts['{resource="configmaps",reason="queue_bytes"}'] == 0
        assert metric_values(text, "kube_fanout_watch_queue_process_limit_bytes")[""] == total
        # What is left queued is under the bound (a caught-up watcher's one event aside).
        assert metric_values(text, "kube_fanout_watch_queue_process_bytes")[""] <= total + (
            500 << 10)
        conn.close()
    finally:
        for s in stalled:
            s.close()
        assert proxy.stop() == 0


def test_passthrough_watches_and_tunnels_past_their_bounds_get_429(cluster, tmp_path, namespace):
    """Secrets are not cached: their watches pass through, each on an upstream connection of its
    own. Before, none was counted and no bound applied."""
    cluster.kubectl("create", "role", "secret-reader", "--verb=get,list,watch",
                    "--resource=secrets", "-n", namespace)
    cluster.kubectl("create", "rolebinding", "secret-readers", "--role=secret-reader",
                    "--user=kf-alice", "--user=kf-bob", "-n", namespace)
    proxy = Proxy.start(cluster, tmp_path, extra_args=[
        "--cache-resources=configmaps", "--max-passthrough-watches=3",
        "--max-passthrough-watches-per-user=2"])
    path = f"/api/v1/namespaces/{namespace}/secrets?watch=1"
    held = []
    metrics = lambda: _metrics(cluster, proxy)  # noqa: E731

    def refused(conn, resp):
        assert _refused_429(conn, resp) == TOO_MANY_REQUESTS

    def exec_as(identity):
        """An exec upgrade (a tunnel's route), refused or passed on to the apiserver."""
        conn = cluster.connection(proxy.secure_port, timeout=scaled(15))
        conn.request("POST", f"/api/v1/namespaces/{namespace}/pods/none/exec?command=true",
                     headers={"Authorization": f"Bearer {cluster.token(identity)}",
                              "Connection": "Upgrade", "Upgrade": "SPDY/3.1",
                              "X-Stream-Protocol-Version": "v4.channel.k8s.io"})
        return conn, conn.getresponse()

    try:
        for _ in range(2):
            conn, resp = _watch(cluster, proxy.secure_port, path, "alice")
            assert resp.status == 200
            held.append(conn)
        assert metric_values(metrics(), "kube_fanout_passthrough_watches_open")[""] == 2
        refused(*_watch(cluster, proxy.secure_port, path, "alice"))
        refused(*exec_as("alice"))  # A tunnel counts as a watch does.
        conn, resp = _watch(cluster, proxy.secure_port, path, "bob")
        assert resp.status == 200
        held.append(conn)
        refused(*_watch(cluster, proxy.secure_port, path, "bob"))  # Past the total.
        # The exempt level (system:masters) is neither counted nor refused.
        conn, resp = _watch(cluster, proxy.secure_port, path, "admin")
        assert resp.status == 200
        held.append(conn)
        text = metrics()
        assert metric_values(text, "kube_fanout_passthrough_watches_open")[""] == 3
        refusals = metric_values(text, "kube_fanout_watches_refused_total")
        assert refusals['{reason="max_passthrough_watches"}'] == 1
        assert refusals['{reason="max_passthrough_watches_per_user"}'] == 2
        # One of alice's ends: her next watch is served once kube-fanout has seen it go.
        _close_and_watch_again(cluster, proxy, path, held, metrics,
                               "kube_fanout_passthrough_watches_open")
    finally:
        for conn in held:
            conn.close()
        assert proxy.stop() == 0


def _trickle_until_closed(tls, head, interval):
    """Sends `head` a byte every `interval` s until the peer closes; the time of the close."""
    tls.settimeout(interval)
    for byte in head:
        try:
            tls.sendall(bytes([byte]))
            if tls.recv(1) == b"":
                return time.monotonic()
        except (socket.timeout, TimeoutError):
            continue
        except (ConnectionError, ssl.SSLError, OSError):
            return time.monotonic()
    return None


def test_a_trickled_head_over_tls_is_cut_30s_after_it_may_start(cluster, tmp_path):
    """One deadline for a whole head, not re-armed by the bytes that come: before, a first head
    over TLS had 90 s (the idle timeout)."""
    proxy = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources="])
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nUser-Agent: " + b"t" * 200 + b"\r\n\r\n"
    results = {}

    def connect():
        ctx = ssl.create_default_context(cafile=cluster.env["KF_CA_FILE"])
        ctx.set_alpn_protocols(["http/1.1"])
        raw = socket.create_connection(("127.0.0.1", proxy.secure_port), timeout=scaled(10))
        return ctx.wrap_socket(raw, server_hostname="127.0.0.1")

    def first_head():
        tls = connect()
        ready = time.monotonic()  # The handshake is done.
        time.sleep(10)            # Silent first: the head's time runs from the handshake.
        closed = _trickle_until_closed(tls, head, 1.0)
        results["first"] = None if closed is None else closed - ready
        tls.close()

    def kept_alive_head():
        tls = connect()
        tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert tls.recv(65536).startswith(b"HTTP/1.1 200")
        time.sleep(5)  # Idle between requests: the 90 s idle timeout, not the head's.
        began = time.monotonic()
        closed = _trickle_until_closed(tls, head, 1.0)
        results["kept_alive"] = None if closed is None else closed - began
        tls.close()

    try:
        threads = [threading.Thread(target=f) for f in (first_head, kept_alive_head)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        print(f"heads cut after: {results}")
        assert results["first"] is not None and 28 <= results["first"] <= scaled(34)
        assert results["kept_alive"] is not None and 28 <= results["kept_alive"] <= scaled(34)
        text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
        refused = metric_values(text, "kube_fanout_requests_refused_total")
        assert refused['{reason="header_timeout"}'] == 2
    finally:
        assert proxy.stop() == 0


# (Not 2^64-1: both answer 504 "Too large resource version", each naming its own cache's RV.)
RESOURCE_VERSIONS = ["+1", " 1", "1 ", "01", "00", "0x1", "1e3", "", "18446744073709551616",
                     "-1", "1_0", "\t1"]


@pytest.mark.parametrize("verb", ["get", "list", "watch"])
def test_resource_versions_are_read_as_the_apiserver_reads_them(cluster, cached_proxy, namespace,
                                                                  verb):
    """Each resourceVersion, asked of a cached kind (ConfigMaps) directly and through
    kube-fanout: the same status, and for refusals the same body. Before, "+1", " 1" and "1 "
    were served from the cache where the apiserver refuses them (400 to a LIST, 500 to a GET or
    a WATCH)."""
    cluster.kubectl("create", "configmap", "rv", "-n", namespace)
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    path = {"get": f"{base}/rv?", "list": f"{base}?", "watch": f"{base}?watch=1&timeoutSeconds=1&"}
    table = []
    for rv in RESOURCE_VERSIONS:
        target = path[verb] + "resourceVersion=" + urllib.parse.quote(rv, safe="")
        direct = cluster.request("GET", target, timeout=scaled(20))
        through = cluster.request("GET", target, port=cached_proxy.secure_port, timeout=scaled(20))
        table.append((repr(rv), direct.status, through.status))
        assert through.status == direct.status, (verb, rv, direct.body, through.body)
        if direct.status != 200:
            assert through.body == direct.body, (verb, rv)
    print("\n".join(f"{verb} resourceVersion={rv}: apiserver {d}, kube-fanout {t}"
                    for rv, d, t in table))
