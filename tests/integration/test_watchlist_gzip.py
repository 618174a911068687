"""Gzip of WatchList answers (Kubernetes 1.37's WatchListCompression, proxy/serve/watch_gzip.h)
against the rig's apiserver, which is 1.36 (the gate is unknown to it: `unrecognized feature
gate: WatchListCompression`) and never compresses a watch.

What can be compared with the real apiserver: with --watchlist-gzip=auto kube-fanout asks its
upstream, learns that it does not compress, and answers as it does (no Content-Encoding, the
same events). With --watchlist-gzip=always the compressed stream decodes (member after member,
as Go's gzip.Reader does) to the very bytes of kube-fanout's plain stream, whose events are the
apiserver's. A 1.37 apiserver's own compressed answer cannot be compared here; a kube-fanout
tier that compresses stands in for it as the upstream of an `auto` one.
"""
import json
import time
import zlib

import pytest

from kfrig import Proxy, routed, same_snapshot, wait_until
from test_http2 import big_ns, h2_to  # noqa: F401 (big_ns: a fixture, 30 configmaps of 8 KiB)

UA = "kube-fanout-tests-watchlist-gzip"
N = 30  # big_ns's configmaps.


def watchlist_path(ns, marker, extra=""):
    return (f"/api/v1/namespaces/{ns}/configmaps?watch=1&sendInitialEvents=true"
            f"&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&{marker}{extra}")


class Stream:
    """One watch over HTTP/1.1; its body decoded as it arrives: gzip members one after another
    when the answer says Content-Encoding: gzip."""

    def __init__(self, cluster, port, path, accept_encoding=None, tls=True):
        self.conn = cluster.connection(port, tls=tls, timeout=15)
        headers = {"Authorization": f"Bearer {cluster.token('admin')}",
                   "Accept": "application/json", "User-Agent": UA}
        if accept_encoding is not None:
            headers["Accept-Encoding"] = accept_encoding
        self.conn.request("GET", path, headers=headers)
        self.resp = self.conn.getresponse()
        self.headers = {k.lower(): v for k, v in self.resp.getheaders()}
        self.gzip = self.headers.get("content-encoding") == "gzip"
        self.raw = b""       # The body as received (compressed or not).
        self.plain = b""     # The body decoded.
        self.members = 0
        self._member = None  # The member being decoded.

    def _feed(self, data):
        self.raw += data
        if not self.gzip:
            self.plain += data
            return
        while data:
            if self._member is None:
                self._member = zlib.decompressobj(wbits=31)
            self.plain += self._member.decompress(data)
            if not self._member.eof:
                return
            self.members += 1
            data = self._member.unused_data
            self._member = None

    def events(self, n, timeout=15):
        """The first `n` events (parsed), read as they come."""
        deadline = time.monotonic() + timeout
        while self.plain.count(b"\n") < n and time.monotonic() < deadline:
            chunk = self.resp.read1(65536)
            if not chunk:
                break
            self._feed(chunk)
        lines = self.plain.split(b"\n")[:n]
        return [json.loads(line) for line in lines if line]

    def initial(self, timeout=15):
        """The initial events up to the initial-events-end bookmark (included)."""
        deadline = time.monotonic() + timeout
        n = 1
        while time.monotonic() < deadline:
            events = self.events(n, max(0.1, deadline - time.monotonic()))
            if len(events) < n:
                return events
            if events[-1]["type"] == "BOOKMARK":
                return events
            n += 1
        return self.events(n)

    def close(self):
        self.conn.close()


def bookmark_rv(events):
    return events[-1]["object"]["metadata"]["resourceVersion"] if events else None


def same_start(open_pair, tries=5):
    """Two streams opened by `open_pair()` whose initial events end at the same RV (the cache
    moved on between their starts: both opened again), with their initial events."""
    for _ in range(tries):
        a, b = open_pair()
        ea, eb = a.initial(), b.initial()
        if ea and bookmark_rv(ea) == bookmark_rv(eb):
            return a, b, ea, eb
        a.close()
        b.close()
    raise AssertionError("no two streams started at the same resourceVersion")


@pytest.fixture(scope="module")
def gz_ns(big_ns):
    """Configmaps enough that the initial events are past one batch's shared-member bound."""
    return big_ns


@pytest.fixture(scope="module")
def always_proxy(cluster, tmp_path_factory):
    p = Proxy.start(cluster, tmp_path_factory.mktemp("wlgz-always"),
                    extra_args=["--cache-resources=configmaps", "--watchlist-gzip=always",
                                "--cache-check-interval=0"])
    yield p
    assert p.stop() == 0, p.log_tail()


def comparable(events):
    """Events with the bookmark's resourceVersion left out (each server's own current RV)."""
    out = []
    for e in events:
        e = json.loads(json.dumps(e))
        if e["type"] == "BOOKMARK":
            e["object"]["metadata"].pop("resourceVersion", None)
        out.append(e)
    return out


def test_auto_answers_as_a_136_upstream_does_uncompressed(cluster, cached_proxy, gz_ns):
    """--watchlist-gzip=auto (the default): the first WatchList accepting gzip asks the upstream,
    which does not compress; every answer is then as the apiserver's: no Content-Encoding."""
    direct = Stream(cluster, cluster.port, watchlist_path(gz_ns, "kfwl=direct"), "gzip")
    direct_events = direct.events(N + 1)
    direct.close()
    assert "content-encoding" not in direct.headers and len(direct_events) == N + 1
    assert direct_events[-1]["object"]["metadata"]["annotations"] == {
        "k8s.io/initial-events-end": "true"}

    def answered():
        return any("does not compress WatchList answers" in line and '"configmaps"' in line
                   for line in cached_proxy.log_lines())

    for i in range(2):  # The first asks the upstream; the next comes after its answer.
        ours = Stream(cluster, cached_proxy.secure_port,
                      watchlist_path(gz_ns, f"kfwl=auto{i}"), "gzip")
        events = ours.events(N + 1)
        ours.close()
        assert routed(cached_proxy, f"kfwl=auto{i}") == "cache"
        assert "content-encoding" not in ours.headers
        assert comparable(events) == comparable(direct_events)
        if i == 0:
            wait_until(answered, 10, "the upstream's answer to the WatchList gzip probe")


def test_always_compresses_a_watchlist_and_it_decodes_to_the_plain_stream(cluster, always_proxy,
                                                                        gz_ns):
    """--watchlist-gzip=always: Content-Encoding gzip and Vary as 1.37 sends them; the body gzip
    members that decode, as they arrive, to the bytes of the same watch asked without gzip: the
    initial events, the initial-events-end bookmark, and events after it."""
    plain, gz, initial_plain, initial_gz = same_start(lambda: (
        Stream(cluster, always_proxy.secure_port, watchlist_path(gz_ns, "kfwl=plain")),
        Stream(cluster, always_proxy.secure_port, watchlist_path(gz_ns, "kfwl=gz"),
               "deflate, gzip")))
    try:
        assert "content-encoding" not in plain.headers
        assert gz.headers["content-encoding"] == "gzip"
        assert gz.headers["vary"] == "Accept-Encoding"
        assert gz.headers["content-type"] == "application/json"
        assert [e["type"] for e in initial_gz] == ["ADDED"] * N + ["BOOKMARK"]
        assert initial_gz == initial_plain  # Same cache, same RV: same events.
        assert gz.raw[:2] == b"\x1f\x8b" and gz.members >= 1
        assert len(gz.raw) < len(plain.raw) / 3  # 20 configmaps of repeated text.
        # The apiserver's events, the same objects in the same order.
        direct = Stream(cluster, cluster.port, watchlist_path(gz_ns, "kfwl=d2"))
        direct_events = direct.events(N + 1)
        direct.close()
        assert comparable(initial_gz) == comparable(direct_events)
        # After the bookmark the stream stays compressed: each live event its own member.
        members_before = gz.members
        cluster.kubectl("create", "configmap", "live", "-n", gz_ns, "--from-literal=k=v")
        live_gz, live_plain = gz.events(N + 2)[-1], plain.events(N + 2)[-1]
        assert (live_gz["type"], live_gz["object"]["metadata"]["name"]) == ("ADDED", "live")
        assert live_gz == live_plain
        assert gz.members > members_before
        assert gz.plain == plain.plain  # Byte for byte, what was read of both.
    finally:
        plain.close()
        gz.close()
        cluster.kubectl("delete", "configmap", "live", "-n", gz_ns, check=False)
    assert routed(always_proxy, "kfwl=gz") == "cache"  # (A watch is logged when it ends.)


@pytest.mark.parametrize("query,accept", [
    ("watch=1&resourceVersion={rv}&allowWatchBookmarks=true", "gzip"),  # not a WatchList
    ("watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
     "&allowWatchBookmarks=true", "deflate"),                             # gzip not accepted
    ("watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
     "&allowWatchBookmarks=true", None),
])
def test_always_leaves_other_watches_plain(cluster, always_proxy, gz_ns, query, accept):
    listed = json.loads(cluster.request("GET", f"/api/v1/namespaces/{gz_ns}/configmaps").body)
    rv = listed["metadata"]["resourceVersion"]
    path = f"/api/v1/namespaces/{gz_ns}/configmaps?{query.format(rv=rv)}&kfwl=other"
    s = Stream(cluster, always_proxy.secure_port, path, accept)
    s.close()
    assert s.resp.status == 200
    assert "content-encoding" not in s.headers


def test_legacy_watch_from_rv_0_with_bookmarks_is_a_watchlist(cluster, always_proxy, gz_ns):
    """The apiserver defaults sendInitialEvents to true for a watch from "" or "0" without
    resourceVersionMatch (SetListOptionsDefaults): with bookmarks allowed, it is a WatchList, and
    1.37 compresses it."""
    s = Stream(cluster, always_proxy.secure_port,
               f"/api/v1/namespaces/{gz_ns}/configmaps?watch=1&resourceVersion=0"
               "&allowWatchBookmarks=true&kfwl=legacy", "gzip")
    try:
        assert s.headers.get("content-encoding") == "gzip"
        events = s.events(N)
        assert [e["object"]["metadata"]["name"] for e in events] == sorted(
            f"cm{i}" for i in range(N))
    finally:
        s.close()


def test_a_tier_below_a_compressing_upstream_compresses_too(cluster, always_proxy, gz_ns,
                                                            tmp_path):
    """An `auto` kube-fanout whose upstream compresses WatchLists (here a kube-fanout with
    --watchlist-gzip=always, standing in for a 1.37 apiserver) learns it from its probe and
    compresses its own; its stream decodes to the upstream tier's."""
    token_file = tmp_path / "upstream-token"
    token_file.write_text(cluster.token("admin"))
    lower = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources=configmaps",
                                                       "--cache-check-interval=0"],
                        upstream_args=[f"--upstream=https://127.0.0.1:{always_proxy.secure_port}",
                                       f"--upstream-ca-file={cluster.env['KF_CA_FILE']}",
                                       f"--upstream-token-file={token_file}"])
    try:
        first = Stream(cluster, lower.secure_port, watchlist_path(gz_ns, "kfwl=t0"), "gzip")
        first.close()
        wait_until(lambda: any("the upstream compresses WatchList answers" in line
                               for line in lower.log_lines()), 10, "the probe's answer")
        s = Stream(cluster, lower.secure_port, watchlist_path(gz_ns, "kfwl=t1"), "gzip")
        above = Stream(cluster, always_proxy.secure_port, watchlist_path(gz_ns, "kfwl=t2"))
        try:
            assert s.headers.get("content-encoding") == "gzip"
            ours, theirs = s.initial(), above.initial()
            assert len(ours) == N + 1
            assert comparable(ours) == comparable(theirs)
        finally:
            s.close()
            above.close()
        assert routed(lower, "kfwl=t1") == "cache"
    finally:
        assert lower.stop() == 0, lower.log_tail()


DROP = "application/json;drop=metadata.managedFields"


@pytest.mark.parametrize("accept", [DROP, "application/vnd.kubernetes.protobuf;"
                                    "drop=metadata.managedFields, application/json",
                                    "application/json;drop=spec.someFutureField"])
def test_the_managed_fields_opt_out_is_answered_as_the_upstream_answers_it(cluster, cached_proxy,
                                                                          gz_ns, accept):
    """`drop=` (the ManagedFieldsOptOut gate, alpha in the 1.38 line, not in 1.37) is a
    parameter the rig's 1.36 apiserver does not know, and ignores: the full objects,
    managedFields included, whatever the target. What an upstream does with it is its own:
    kube-fanout passes such a read to it until its answers to a probe (two LISTs selecting
    nothing) say; an upstream that ignores drop= is then answered from the cache as without it,
    byte for byte the apiserver's answer. (One that reads it: docs/fidelity.md.)"""
    def read(path, marker, status=200):
        path = f"{path}{'&' if '?' in path else '?'}{marker}"
        # (The Accept for same_snapshot's catch-up LIST too: it must bring the cache that
        # answers up to date, the protobuf one for a protobuf clause.)
        direct, ours = same_snapshot(cluster, cached_proxy, lambda port: cluster.request(
            "GET", path, port=port, headers={"Accept": accept, "User-Agent": UA}), path,
            headers={"Accept": accept})
        assert direct.status == ours.status == status
        if status == 200:
            assert b"kubectl-client-side-apply" in direct.body  # Setup: managedFields kept.
        assert ours.headers["content-type"] == direct.headers["content-type"]
        assert ours.body == direct.body, path
        return routed(cached_proxy, marker)

    paths = (f"/api/v1/namespaces/{gz_ns}/configmaps?resourceVersion=0",
             f"/api/v1/namespaces/{gz_ns}/configmaps/cm3?resourceVersion=0")
    for i, path in enumerate(paths):
        assert read(path, f"kfdrop={len(accept)}x{i}") in ("passthrough", "cache")
    wait_until(lambda: any("the upstream ignores drop=" in line
                           for line in cached_proxy.log_lines()), 10, "the drop= probe's answer")
    for i, path in enumerate(paths):
        assert read(path, f"kfdrop={len(accept)}y{i}") == "cache"
    # A NotFound from the cache: the apiserver's Status, in the encoding it negotiates.
    missing = f"/api/v1/namespaces/{gz_ns}/configmaps/no-such-configmap"
    assert read(missing, f"kfdrop={len(accept)}z", status=404) == "cache"


def gunzip_members(data):
    """A body of gzip members decoded as Go's gzip.Reader does: (bytes, members, complete)."""
    out, members = b"", 0
    while data:
        d = zlib.decompressobj(wbits=31)
        out += d.decompress(data)
        if not d.eof:
            return out, members, False
        members += 1
        data = d.unused_data
    return out, members, True


def test_always_over_h2_decodes_to_the_plain_stream(cluster, always_proxy, gz_ns):
    """The same over HTTP/2 (client-go's default over TLS): the stream's DATA is gzip members,
    every one complete as it arrives, decoding to the plain stream's events."""
    c = h2_to(cluster, always_proxy.secure_port)
    try:
        token = cluster.token("admin")
        gz = c.request(watchlist_path(gz_ns, "kfwl=h2gz"), token,
                       headers=[("accept-encoding", "gzip")])
        plain = c.request(watchlist_path(gz_ns, "kfwl=h2plain"), token)

        def decoded():
            out, _, complete = gunzip_members(bytes(c.streams[gz]["data"]))
            return complete and out.count(b"\n") >= N + 1

        assert c.run_until(decoded, 15)
        assert c.run_until(lambda: len(c.events(plain)) >= N + 1, 15)
        assert c.streams[gz]["headers"]["content-encoding"] == "gzip"
        assert "content-encoding" not in c.streams[plain]["headers"]
        out, members, _ = gunzip_members(bytes(c.streams[gz]["data"]))
        assert members >= 1
        plain_lines = bytes(c.streams[plain]["data"]).split(b"\n")[:N + 1]
        gz_lines = out.split(b"\n")[:N + 1]
        if json.loads(gz_lines[-1]) == json.loads(plain_lines[-1]):  # Started at the same RV.
            assert gz_lines == plain_lines
        else:  # The cache moved on between the two starts: the objects they share agree.
            assert set(gz_lines[:-1]) & set(plain_lines[:-1])
    finally:
        c.close()
