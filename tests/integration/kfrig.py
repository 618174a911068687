"""Helpers to drive the real control plane and kube-fanout from tests.

Requests go out with Python's http.client so status, headers and body bytes can be compared
exactly between the apiserver and kube-fanout.
"""
import contextlib
import dataclasses
import gzip
import http.client
import json
import os
import pathlib
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import warnings

ROOT = pathlib.Path(__file__).resolve().parents[2]
BINARY = pathlib.Path(os.environ.get("KF_BINARY", ROOT / "build/kube-fanout"))
# Set by tests/sanitize: which sanitizer the binary under test was built with ("asan", "tsan"),
# and how much longer its waits may take (a sanitized build runs several times slower).
SANITIZER = os.environ.get("KF_SANITIZER", "")
TIMEOUT_SCALE = float(os.environ.get("KF_TIMEOUT_SCALE", "1"))


def scaled(seconds):
    """A wait for kube-fanout, stretched for a sanitized build."""
    return seconds * TIMEOUT_SCALE

# Headers that legitimately differ between two answers to the same request.
VOLATILE_HEADERS = {"date", "audit-id", "x-kubernetes-pf-flowschema-uid",
                    "x-kubernetes-pf-prioritylevel-uid"}


def wait_until(predicate, timeout, what, interval=0.1):
    """`predicate()`'s first true value, polled every `interval` s for at most scaled(`timeout`)
    s: a wait for something observable, instead of a fixed sleep."""
    deadline = time.monotonic() + scaled(timeout)
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {scaled(timeout)}s waiting for {what}"
        time.sleep(interval)


def kubectl_watch_listed(watch, name):
    """Reads a `kubectl get -w --output-watch-events` process's lines until the initial list's
    ADDED line of `name` (an object made before the watch started): kubectl has listed, and its
    watch follows from the list's resourceVersion, so every later change reaches it."""
    line = watch.stdout.readline().split()
    assert line[:2] == ["ADDED", name], line


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tcp_connections(pid, port):
    """Established TCP connections of process `pid` to 127.0.0.1:`port` (from /proc)."""
    inodes = set()
    for fd in pathlib.Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in pathlib.Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "01" and int(f[2].rsplit(":", 1)[1], 16) == port and f[9] in inodes:
                count += 1
    return count


def metric_values(text, name):
    """{labels: value} for one metric family in Prometheus text."""
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            key, _, value = line.rpartition(" ")
            out[key[len(name):]] = float(value)
    return out


def apiserver_watches(cluster, resource):
    """Watches of `resource` the apiserver is serving now (apiserver_longrunning_requests)."""
    text = cluster.request("GET", "/metrics").body.decode()
    return sum(v for labels, v in metric_values(text, "apiserver_longrunning_requests").items()
               if f'resource="{resource}"' in labels and 'verb="WATCH"' in labels)


def answer_rv(resp):
    """The resourceVersion a 200 answer reflects (a list's, or an object's); None otherwise."""
    if resp.status != 200:
        return None
    body = resp.body
    if resp.headers.get("content-encoding") == "gzip":
        body = gzip.decompress(body)
    if body.startswith(b"k8s\0"):
        return _protobuf_rv(body)
    if body.startswith(b"\xd9\xd9\xf7"):  # CBOR (self-described); strings are byte strings.
        import cbor2
        try:
            rv = cbor2.loads(body)[b"metadata"].get(b"resourceVersion")
        except (ValueError, KeyError, TypeError, AttributeError, cbor2.CBORDecodeError):
            return None
        return rv.decode() if isinstance(rv, bytes) else rv
    try:
        return json.loads(body)["metadata"].get("resourceVersion")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _protobuf_fields(message):
    """{number: first bytes value} of a protobuf message's length-delimited fields."""
    out, i = {}, 0
    try:
        while i < len(message):
            key, i = varint(message, i)
            wire = key & 7
            if wire == 0:
                _, i = varint(message, i)
                continue
            if wire != 2:
                return out
            n, i = varint(message, i)
            out.setdefault(key >> 3, message[i:i + n])
            i += n
    except IndexError:
        pass
    return out


def varint(data, i):
    """A protobuf varint at data[i]: (value, index after it)."""
    shift = value = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7f) << shift
        shift += 7
        if b < 0x80:
            return value, i


def _protobuf_rv(body):
    """The resourceVersion of a protobuf answer: a list's (ListMeta field 2) or an object's
    (ObjectMeta field 6); None for a Status."""
    envelope = _protobuf_fields(body[4:])
    kind = _protobuf_fields(envelope.get(1, b"")).get(2, b"").decode(errors="replace")
    meta = _protobuf_fields(_protobuf_fields(envelope.get(2, b"")).get(1, b""))
    if kind == "Status":
        return None
    rv = meta.get(2 if kind.endswith("List") else 6)
    return rv.decode() if rv else None


def same_snapshot(cluster, proxy, get, path, headers=None):
    """(direct, ours): `get(port)` asked of the apiserver and of kube-fanout at the same
    resourceVersion.

    An answer reflecting "what the cache has" (resourceVersion=0, NotOlderThan) is taken at
    whatever RV each cache reached, and kube-fanout's may be behind the apiserver's (or ahead)
    for a moment after writes, longer under a sanitizer. While the two RVs differ, a consistent
    LIST (limit=1) of the collection through each brings both caches up to the upstream's current
    RV (the way a client would), and both are asked again, for at most scaled(15) s. Answers at
    the same RV, or without one (errors), are returned at once for the caller to compare: only
    freshness is waited for, never a different answer at the same RV."""
    collection = path.split("?", 1)[0]
    deadline = time.monotonic() + scaled(15)
    while True:
        direct, ours = get(None), get(proxy.secure_port)
        rv_direct, rv_ours = answer_rv(direct), answer_rv(ours)
        if rv_direct == rv_ours or None in (rv_direct, rv_ours) or time.monotonic() > deadline:
            return direct, ours
        for port in (None, proxy.secure_port):
            # `headers`: the Accept of the answers compared, so the consistent LIST goes to the
            # same cache (kube-fanout keeps a protobuf cache beside the JSON one).
            cluster.request("GET", f"{collection}?limit=1", port=port, headers=headers)
        time.sleep(0.2)


@dataclasses.dataclass
class Response:
    status: int
    headers: dict
    body: bytes
    raw: object = None  # What the client gave, when it is not http.client (HTTP/2 tests).

    def comparable_headers(self):
        return {k: v for k, v in self.headers.items() if k not in VOLATILE_HEADERS}


@dataclasses.dataclass
class Cluster:
    directory: pathlib.Path
    env: dict

    @classmethod
    def load(cls, directory):
        env = {}
        for line in (directory / "env").read_text().splitlines():
            if line.startswith("export "):
                key, _, value = line[len("export "):].partition("=")
                env[key] = shlex.split(value)[0] if value else ""
        return cls(directory, env)

    @property
    def url(self):
        return self.env["KF_APISERVER_URL"]

    @property
    def port(self):
        return int(self.url.rsplit(":", 1)[1])

    def token(self, identity):
        return {"admin": self.env["KF_ADMIN_TOKEN"], "alice": self.env["KF_ALICE_TOKEN"],
                "bob": self.env["KF_BOB_TOKEN"], "anonymous": None}[identity]

    def ssl_context(self):
        return ssl.create_default_context(cafile=self.env["KF_CA_FILE"])

    def kubectl(self, *args, server=None, identity="admin", check=True, timeout=60, input=None):
        """Runs kubectl against the apiserver (or `server`) as `identity`."""
        cmd = [self.env["KF_KUBECTL"], f"--server={server or self.url}",
               f"--certificate-authority={self.env['KF_CA_FILE']}",
               "--kubeconfig=/dev/null"]
        if identity != "anonymous":
            cmd.append(f"--token={self.token(identity)}")
        cmd += list(args)
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input)
        if check and done.returncode != 0:
            # kubectl's own message (AlreadyExists, connection refused, ...) in the failure.
            raise AssertionError(f"kubectl {shlex.join(args)} exited with {done.returncode}:\n"
                                 f"{done.stderr}{done.stdout}")
        return done

    def request(self, method, path, identity="admin", port=None, tls=True, body=None,
                headers=None, timeout=30):
        """One request to the apiserver (or to `port` on loopback), read whole."""
        conn = self.connection(port or self.port, tls, timeout)
        hdrs = {"Accept": "application/json"}
        if self.token(identity):
            hdrs["Authorization"] = f"Bearer {self.token(identity)}"
        hdrs.update(headers or {})
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)

    def connection(self, port, tls=True, timeout=30):
        if tls:
            return http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout,
                                               context=self.ssl_context())
        return http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def restart_apiserver(self, down_seconds=2.0, timeout=60):
        """Kills kube-apiserver (SIGKILL, as a crash would), keeps it down a moment, starts it
        again with the same command line (same port, same flags), and waits until it is
        ready."""
        pid = int((self.directory / "run" / "kube-apiserver.pid").read_text())
        argv = (pathlib.Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")[:-1]
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                state = (pathlib.Path("/proc") / str(pid) / "stat").read_text().split()[2]
            except FileNotFoundError:
                break
            if state == "Z":  # Exited; nothing reaps it here.
                break
            time.sleep(0.05)
        time.sleep(down_seconds)
        log = open(self.directory / "logs" / "kube-apiserver.log", "ab")
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True, close_fds=True)
        (self.directory / "run" / "kube-apiserver.pid").write_text(f"{proc.pid}\n")
        while time.monotonic() < deadline:
            try:
                if self.request("GET", "/readyz", timeout=2).status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("kube-apiserver did not come back")

    def issue_serving_cert(self, directory):
        """A serving certificate for 127.0.0.1 signed by the cluster CA (for kube-fanout)."""
        key, csr, crt = (directory / n for n in ("tls.key", "tls.csr", "tls.crt"))
        ext = directory / "ext.cnf"
        ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        # ECDSA P-256, as docs/operating.md advises: a handshake's signature costs a fraction of
        # RSA-2048's.
        subprocess.run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes", "-keyout", key,
                        "-subj", "/CN=kube-fanout", "-out", csr], check=True, capture_output=True)
        subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", self.env["KF_CA_FILE"],
                        "-CAkey", self.env["KF_CA_KEY_FILE"], "-CAcreateserial", "-days", "2",
                        "-out", crt, "-extfile", ext], check=True, capture_output=True)
        return crt, key


# Set (conftest.py) once a test of this process has failed: the control planes' directories
# (etcd's data, the components' logs) are then kept for a post-mortem; after a clean run they
# are removed, about 90 MB each. KF_KEEP_CLUSTER_DIRS=1 keeps them always.
TEST_FAILED = False


UP_ATTEMPTS = 2  # A start that failed (a random port taken meanwhile, a stall) is tried again.


def _start_control_plane(prefix, env):
    """tests/cluster/up in a new directory; its output goes to stderr (pytest keeps it with the
    test). A failed start is tried once more in another directory, with a warning that carries
    its last lines; the failed one's directory is kept. The last failure raises with them."""
    for attempt in range(1, UP_ATTEMPTS + 1):
        directory = pathlib.Path(tempfile.mkdtemp(prefix=prefix))
        up = subprocess.run([str(ROOT / "tests/cluster/up"), str(directory)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        sys.stderr.write(up.stdout)
        if up.returncode == 0:
            return directory
        tail = "\n".join(up.stdout.splitlines()[-40:])
        message = (f"tests/cluster/up {directory} failed (exit {up.returncode}, attempt "
                   f"{attempt} of {UP_ATTEMPTS}); its last lines:\n{tail}")
        if attempt == UP_ATTEMPTS:
            raise RuntimeError(message)
        warnings.warn(message)


@contextlib.contextmanager
def control_plane(reuse_variable, prefix, apiserver_args=None):
    """A control plane of its own (tests/cluster/up, `apiserver_args` as
    KF_APISERVER_EXTRA_ARGS), stopped afterwards and its directory removed unless a test
    failed; or, when the environment names one in `reuse_variable`, that one, left running."""
    reuse = os.environ.get(reuse_variable)
    if reuse:
        yield Cluster.load(pathlib.Path(reuse))
        return
    env = dict(os.environ)
    if apiserver_args is not None:
        env["KF_APISERVER_EXTRA_ARGS"] = apiserver_args
    directory = _start_control_plane(prefix, env)
    try:
        yield Cluster.load(directory)
    finally:
        subprocess.run([str(ROOT / "tests/cluster/down"), str(directory)], check=True)
        if not TEST_FAILED and os.environ.get("KF_KEEP_CLUSTER_DIRS") != "1":
            shutil.rmtree(directory, ignore_errors=True)


@dataclasses.dataclass
class Proxy:
    process: subprocess.Popen
    port: int          # plain HTTP
    secure_port: int   # HTTPS
    log_path: pathlib.Path

    @classmethod
    def start(cls, cluster, directory, extra_args=(), upstream_args=None, preexec_fn=None,
              wait_ready=True):
        crt, key = cluster.issue_serving_cert(directory)
        port, secure_port = free_port(), free_port()
        log_path = directory / "kube-fanout.log"
        args = [str(BINARY), f"--listen=127.0.0.1:{port}",
                f"--secure-listen=127.0.0.1:{secure_port}", f"--tls-cert-file={crt}",
                f"--tls-private-key-file={key}"]
        args += upstream_args if upstream_args is not None else [
            f"--kubeconfig={cluster.env['KF_KUBECONFIG']}"]
        # The fidelity tests compare the cache's answers: no consistent read of theirs goes to
        # the apiserver for speed (test_cache.py tests those budgets with the default); a test
        # that sets the interval runs kube-fanout as deployed.
        if not any(a.startswith(("--consistent-read-passthrough-interval",
                                 "--consistent-get-passthrough-qps")) for a in extra_args):
            args += ["--consistent-read-passthrough-interval=0",
                     "--consistent-get-passthrough-qps=0"]
        # Nor a self-check unless the test asks for one (test_self_check.py): its LISTs at times
        # no test controls fall into the windows where tests count the apiserver's LISTs.
        if not any(a.startswith("--cache-check-interval") for a in extra_args):
            args.append("--cache-check-interval=0")
        args += list(extra_args)
        log = open(log_path, "wb")
        process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                   preexec_fn=preexec_fn)
        proxy = cls(process, port, secure_port, log_path)
        if wait_ready:
            proxy.wait_ready(cluster)
        return proxy

    @property
    def server(self):
        return f"https://127.0.0.1:{self.secure_port}"

    def wait_ready(self, cluster, timeout=30):
        # A bound, not a wait: a cold start lists eleven resources (pods, nodes, configmaps,
        # ...) before it is ready, which on a loaded 2-core machine with a cluster full of
        # other tests' objects took more than 10 s.
        timeout = scaled(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"kube-fanout exited early:\n{self.log_tail()}")
            try:
                if cluster.request("GET", "/readyz", port=self.port, tls=False).status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        self.process.kill()  # Not left running by the test that gives up on it.
        self.process.wait()
        raise RuntimeError(f"kube-fanout not ready in {timeout}s:\n{self.log_tail()}")

    def stop(self, timeout=20):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=scaled(timeout))
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def log_lines(self):
        """The complete lines of kube-fanout's log (not one it is still writing)."""
        text = self.log_path.read_text(errors="replace")
        return text[:text.rfind("\n") + 1].splitlines()

    def log_tail(self, n=30):
        return "\n".join(self.log_lines()[-n:])


class Relay:
    """A loopback TCP forwarder to 127.0.0.1:`target_port` (TLS passes through untouched).

    cut() closes every relayed connection and stops listening, so new connections are refused,
    until restore() listens again on the same port."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.port = free_port()
        self._lock = threading.Lock()
        self._listener = None
        self._accepter = None
        self._conns = {}  # id -> [client, upstream, pumps still running]
        self._pumps = []
        self.restore()

    def restore(self):
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        with self._lock:
            self._listener = listener
        self._accepter = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._accepter.start()

    def cut(self):
        with self._lock:
            listener, self._listener = self._listener, None
            if listener is not None:
                listener.shutdown(socket.SHUT_RDWR)  # Stops listening; accept() returns.
            for client, upstream, _ in self._conns.values():
                for s in (client, upstream):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
        if self._accepter is not None:
            self._accepter.join(timeout=5)
            assert not self._accepter.is_alive(), "relay: accept thread did not stop"
        for t in self._pumps:
            t.join(timeout=5)
            assert not t.is_alive(), "relay: a pump thread did not stop"
        self._pumps = [t for t in self._pumps if t.is_alive()]
        with self._lock:
            assert not self._conns, "relay: connections left after the cut"

    stop = cut

    def _accept(self, listener):
        try:
            while True:
                try:
                    client, _ = listener.accept()
                except OSError:
                    return  # Cut.
                try:
                    upstream = socket.create_connection(("127.0.0.1", self.target_port),
                                                        timeout=5)
                    upstream.settimeout(None)
                except OSError:
                    client.close()
                    continue
                with self._lock:
                    if self._listener is not listener:  # Cut meanwhile.
                        client.close()
                        upstream.close()
                        return
                    key = object()
                    self._conns[key] = [client, upstream, 2]
                    for src, dst in ((client, upstream), (upstream, client)):
                        t = threading.Thread(target=self._pump, args=(key, src, dst),
                                             daemon=True)
                        self._pumps.append(t)
                        t.start()
        finally:
            listener.close()

    def _pump(self, key, src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        with self._lock:
            conn = self._conns[key]
            try:
                dst.shutdown(socket.SHUT_WR)  # Pass the half-close on.
            except OSError:
                pass
            conn[2] -= 1
            if conn[2] == 0:
                del self._conns[key]
                conn[0].close()
                conn[1].close()


def routed(proxy, marker):
    """The route kube-fanout's log gives for the request carrying `marker`."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for line in proxy.log_lines():
            if marker in line and '"msg":"request"' in line:
                return json.loads(line)["route"]
        time.sleep(0.02)
    return None


def read_events(resp, n, timeout=10):
    lines = []
    deadline = time.monotonic() + timeout
    while len(lines) < n and time.monotonic() < deadline:
        line = resp.readline()
        if not line:
            break
        lines.append(line)
    return lines


def open_watch(cluster, port, path, tls=True):
    conn = cluster.connection(port, tls=tls, timeout=15)
    conn.request("GET", path, headers={"Authorization": f"Bearer {cluster.token('admin')}",
                                       "Accept": "application/json",
                                       "User-Agent": "kube-fanout-tests"})
    return conn, conn.getresponse()
