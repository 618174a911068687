"""Watch streams for tests with many watchers: asyncio, plain HTTP/1.1 to kube-fanout's
--listen, each resuming from its last resourceVersion when its connection is cut."""
import asyncio
import json
import random
import time

from kfrig import scaled


class Watcher:
    """One watch stream over plain HTTP/1.1 that resumes from its last RV when cut."""

    def __init__(self, port, path, token, rv):
        self.port, self.path, self.token, self.rv = port, path, token, rv
        self.events = []     # (type, name)
        self.rvs = []
        self.gone = 0        # 410s (ERROR events with code 410)
        self.connects = 0
        self.passed_through = 0  # Streams the apiserver served (its APF header), not the cache.
        self.passed_before = 0  # For the caller: passed_through at some earlier point.
        self.target = None   # Stop after this many events.
        self.done = asyncio.Event()
        self.progress = None  # Set by the pool: called on every event.

    async def run(self, connect_gate, stop_on_gone):
        while not self.done.is_set():
            try:
                async with connect_gate:
                    reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
                self.connects += 1
                try:
                    ended = await self._stream(reader, writer)
                finally:
                    writer.close()
                if ended == "gone" and stop_on_gone:
                    self.done.set()
                    return
            except (OSError, asyncio.IncompleteReadError, ValueError):
                pass
            if not self.done.is_set():
                await asyncio.sleep(random.uniform(0.05, 0.3))  # Reconnect, from self.rv.

    async def _stream(self, reader, writer):
        writer.write((f"GET {self.path}?watch=1&resourceVersion={self.rv}&timeoutSeconds=600 "
                      f"HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {self.token}\r\n"
                      "Accept: application/json\r\nUser-Agent: warm-restart-test\r\n\r\n")
                     .encode())
        await writer.drain()
        status = (await reader.readline()).split(b" ")
        if len(status) < 2 or status[1] != b"200":
            raise ValueError(f"watch answered {status}")
        while (header := await reader.readline()) not in (b"\r\n", b""):
            if header.lower().startswith(b"x-kubernetes-pf-flowschema-uid:"):
                self.passed_through += 1
        buf = b""
        while not self.done.is_set():
            size = int((await reader.readline()).strip() or b"0", 16)
            if size == 0:
                return "ended"
            buf += await reader.readexactly(size + 2)
            buf = buf[:-2]
            *lines, buf = buf.split(b"\n")
            for line in lines:
                event = json.loads(line)
                if event["type"] == "ERROR":
                    if event["object"].get("code") == 410:
                        self.gone += 1
                        return "gone"
                    raise ValueError(f"watch error {event}")
                meta = event["object"]["metadata"]
                self.rv = meta["resourceVersion"]
                if event["type"] == "BOOKMARK":
                    continue
                self.events.append((event["type"], meta["name"]))
                self.rvs.append(int(self.rv))
                if self.target is not None and len(self.events) >= self.target:
                    self.done.set()
        return "done"


async def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + scaled(timeout)
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)
