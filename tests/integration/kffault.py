"""A TLS-terminating HTTP/1.1 relay between kube-fanout and the apiserver that a test controls.

kube-fanout's upstream is pointed at the relay (`upstream_args`); the relay serves a certificate
signed by the cluster CA and opens its own TLS connection to the apiserver for each connection
kube-fanout makes. It reads each request, so a test can:

- cut(): close every relayed connection and refuse new ones until restore();
- fail(pattern, status, retry_after): answer requests whose target contains `pattern` itself
  (429 with Retry-After, 503, ...) until clear();
- stall(pattern): responses whose request target contains `pattern` stop forwarding bytes, the
  connection staying open (a dead peer behind a live socket): streams open when it is called,
  and new ones after their response head, until unstall(); a stalled stream never resumes;
- drop(pattern, content): chunks of chunked responses whose request target contains `pattern`
  and whose data contains `content` (bytes) are not forwarded, the stream going on (a lossy
  middlebox: a watch loses the events in those chunks), in streams open when it is called and
  new ones, until keep().

Every request is recorded (time, method, target, what the relay did). The relay runs an asyncio
loop on its own thread; the controls are called from the test's thread and return when done.
Every read is bounded (a request head of at most 64 KiB, a chunk line of at most 1 KiB).
"""
import asyncio
import dataclasses
import json
import ssl
import threading
import time

from kfrig import free_port

HEAD_LIMIT = 64 * 1024


@dataclasses.dataclass
class Recorded:
    t: float         # time.monotonic()
    method: str
    target: str
    outcome: str     # "forwarded", "fault <status>", "stalled"


@dataclasses.dataclass
class Fault:
    pattern: str
    status: int
    retry_after: int = None


def _headers(head):
    """(first line, {lower-case name: value}) of an HTTP head."""
    lines = head.decode("latin-1").split("\r\n")
    out = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            out[name.strip().lower()] = value.strip()
    return lines[0], out


class FaultRelay:
    def __init__(self, cluster, directory):
        crt, key = cluster.issue_serving_cert(directory)
        self._server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._server_ctx.load_cert_chain(crt, key)
        self._upstream_ctx = cluster.ssl_context()
        self._target_port = cluster.port
        self.ca_file = cluster.env["KF_CA_FILE"]
        self.port = free_port()
        self.requests = []   # Recorded, in arrival order.
        self._faults = []
        self._stall_patterns = []
        self._drops = []        # (target pattern, content) of drop().
        self._streams = set()   # _Stream objects relaying a response now.
        self._conns = set()     # Writers of every open connection (client and upstream side).
        self._server = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.restore()

    def upstream_args(self, token_file):
        """kube-fanout's flags for an upstream through this relay."""
        return [f"--upstream=https://127.0.0.1:{self.port}", f"--upstream-ca-file={self.ca_file}",
                f"--upstream-token-file={token_file}"]

    # --- Controls (from the test's thread) ------------------------------------------------------
    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    def restore(self):
        async def listen():
            self._server = await asyncio.start_server(
                self._serve, "127.0.0.1", self.port, ssl=self._server_ctx, reuse_address=True,
                backlog=256)
        self._call(listen())

    def cut(self):
        """Stops listening (new connections are refused) and closes every open connection."""
        async def cut():
            if self._server is not None:
                self._server.close()
                self._server = None
            for w in list(self._conns):
                w.transport.abort()
            self._conns.clear()
        self._call(cut())

    def fail(self, pattern, status, retry_after=None):
        self._call(self._set(lambda: self._faults.append(Fault(pattern, status, retry_after))))

    def clear(self):
        self._call(self._set(self._faults.clear))

    def stall(self, pattern):
        def on():
            self._stall_patterns.append(pattern)
            for s in self._streams:
                if pattern in s.target:
                    s.stalled = True
        self._call(self._set(on))

    def unstall(self):
        self._call(self._set(self._stall_patterns.clear))

    def drop(self, pattern, content):
        def on():
            self._drops.append((pattern, content))
            for s in self._streams:
                if pattern in s.target:
                    s.drops.append(content)
        self._call(self._set(on))

    def keep(self):
        def off():
            self._drops.clear()
            for s in self._streams:
                s.drops.clear()
        self._call(self._set(off))

    async def _set(self, change):
        change()

    def stop(self):
        self.cut()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        assert not self._thread.is_alive(), "relay: loop did not stop"

    def count(self, method=None, contains="", outcome=None, since=0.0):
        """Requests recorded matching all of the given filters."""
        return sum(1 for r in list(self.requests)
                   if (method is None or r.method == method) and contains in r.target
                   and (outcome is None or r.outcome == outcome) and r.t >= since)

    # --- Relaying (on the relay's loop) ---------------------------------------------------------
    async def _serve(self, reader, writer):
        self._conns.add(writer)
        up = None
        pending = b""  # Bytes of the next request read while watching for the client's EOF.
        try:
            while True:
                while (end := pending.find(b"\r\n\r\n")) < 0:
                    if len(pending) > HEAD_LIMIT:
                        return
                    more = await reader.read(65536)
                    if not more:
                        return
                    pending += more
                head, pending = pending[:end + 4], pending[end + 4:]
                line, hdrs = _headers(head)
                method, target = (line.split(" ") + ["", ""])[:2]
                body_len = int(hdrs.get("content-length", "0") or 0)
                if body_len > (16 << 20) or "chunked" in hdrs.get("transfer-encoding", ""):
                    return  # kube-fanout sends bodies with a Content-Length, and small ones.
                body, pending = pending[:body_len], pending[body_len:]
                if len(body) < body_len:
                    body += await reader.readexactly(body_len - len(body))
                fault = next((f for f in self._faults if f.pattern in target), None)
                if fault is not None:
                    self.requests.append(Recorded(time.monotonic(), method, target,
                                                  f"fault {fault.status}"))
                    writer.write(self._fault_response(fault))
                    await writer.drain()
                    continue
                self.requests.append(Recorded(time.monotonic(), method, target, "forwarded"))
                if up is None:
                    up = await asyncio.open_connection("127.0.0.1", self._target_port,
                                                       ssl=self._upstream_ctx,
                                                       server_hostname="127.0.0.1")
                    self._conns.add(up[1])
                up[1].write(head + body)
                await up[1].drain()
                stream = _Stream(target, any(p in target for p in self._stall_patterns))
                stream.drops = [c for p, c in self._drops if p in target]
                self._streams.add(stream)
                relay = asyncio.ensure_future(self._relay_response(method, up[0], writer, stream))
                eof = asyncio.ensure_future(reader.read(1))
                try:
                    done, _ = await asyncio.wait({relay, eof},
                                                 return_when=asyncio.FIRST_COMPLETED)
                    if eof in done and eof.result() == b"":
                        return  # The client went away mid-response.
                    keep_alive = await relay
                finally:
                    self._streams.discard(stream)
                    for t in (relay, eof):
                        if not t.done():
                            t.cancel()
                    # A cancelled read leaves the stream only once its task has run: reading
                    # the next request before then is asyncio's "already waiting" error.
                    await asyncio.gather(relay, eof, return_exceptions=True)
                if eof.done() and not eof.cancelled() and eof.exception() is None:
                    pending = eof.result() + pending
                if not keep_alive:
                    return
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError,
                ssl.SSLError):
            return
        finally:
            for w in (writer, up[1] if up else None):
                if w is not None:
                    self._conns.discard(w)
                    w.transport.abort()

    def _fault_response(self, fault):
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {},
                           "status": "Failure", "message": "injected by the test's relay",
                           "reason": "TooManyRequests" if fault.status == 429
                           else "ServiceUnavailable", "code": fault.status}).encode()
        head = (f"HTTP/1.1 {fault.status} Injected\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n")
        if fault.retry_after is not None:
            head += f"Retry-After: {fault.retry_after}\r\n"
        return head.encode() + b"\r\n" + body

    async def _relay_response(self, method, up_reader, writer, stream):
        """Copies one response; True if both sides may go on with the connection."""
        head = await up_reader.readuntil(b"\r\n\r\n")
        line, hdrs = _headers(head)
        status = int(line.split(" ")[1])
        writer.write(head)
        await writer.drain()
        if method == "HEAD" or status in (204, 304) or status < 200:
            return True
        if "chunked" in hdrs.get("transfer-encoding", "").lower():
            while True:
                size_line = await up_reader.readuntil(b"\r\n")
                if len(size_line) > 1024:
                    raise ValueError("chunk line too long")
                size = int(size_line.split(b";")[0].strip(), 16)
                if size == 0:
                    trailer = size_line
                    while (t := await up_reader.readuntil(b"\r\n")) != b"\r\n":
                        trailer += t
                    await self._forward(writer, stream, trailer + b"\r\n")
                    return hdrs.get("connection", "").lower() != "close"
                data = await up_reader.readexactly(size + 2)
                if any(c in data for c in stream.drops):
                    self.requests.append(Recorded(time.monotonic(), "-", stream.target,
                                                  "dropped"))
                    continue
                await self._forward(writer, stream, size_line + data)
        if "content-length" in hdrs:
            left = int(hdrs["content-length"])
            while left > 0:
                data = await up_reader.read(min(left, 65536))
                if not data:
                    raise asyncio.IncompleteReadError(b"", left)
                left -= len(data)
                await self._forward(writer, stream, data)
            return hdrs.get("connection", "").lower() != "close"
        while data := await up_reader.read(65536):  # Until the upstream closes.
            await self._forward(writer, stream, data)
        return False

    async def _forward(self, writer, stream, data):
        if stream.stalled:
            self.requests.append(Recorded(time.monotonic(), "-", stream.target, "stalled"))
            await asyncio.Event().wait()  # Never: the client gives up and closes.
        writer.write(data)
        await writer.drain()


class _Stream:
    def __init__(self, target, stalled):
        self.target, self.stalled = target, stalled
        self.drops = []

    def __hash__(self):
        return id(self)
