"""Watch streams for tests with many watchers: asyncio, plain HTTP/1.1 to kube-fanout's
--listen, each resuming from its last resourceVersion when its connection is cut, and (with
relist=True) listing again after a 410, as an informer does."""
import asyncio
import http.client
import json
import random
import time

from kfrig import scaled


class Watcher:
    """One watch stream over plain HTTP/1.1 that resumes from its last RV when cut."""

    def __init__(self, port, path, token, rv, relist=False):
        self.port, self.path, self.token, self.rv = port, path, token, rv
        self.relist = relist  # After a 410: list (a consistent read), watch from its RV.
        self.relists = 0
        # With relist: what it saw, in order: ("event", type, name, rv, content) and
        # ("list", rv, {name: (rv, content)}); content is content_of(object).
        self.log = []
        self.until_rv = None  # Stop once its RV reaches this.
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
                if ended == "gone" and self.relist:
                    await asyncio.to_thread(self._list)
                    continue
            except (OSError, asyncio.IncompleteReadError, ValueError, http.client.HTTPException):
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
                if self.relist:
                    self.log.append(("event", event["type"], meta["name"], int(self.rv),
                                     content_of(event["object"])))
                if self.target is not None and len(self.events) >= self.target:
                    self.done.set()
                self.check_until()
        return "done"

    def check_until(self):
        if self.until_rv is not None and int(self.rv) >= self.until_rv:
            self.done.set()

    def _list(self):
        """A consistent LIST through kube-fanout (on a thread); the watch goes on from its RV."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request("GET", self.path, headers={"Authorization": f"Bearer {self.token}",
                                                    "Accept": "application/json"})
            resp = conn.getresponse()
            body = resp.read()
        finally:
            conn.close()
        if resp.status != 200:
            raise ValueError(f"relist answered {resp.status}")
        listed = json.loads(body)
        self.rv = listed["metadata"]["resourceVersion"]
        self.relists += 1
        self.log.append(("list", int(self.rv), {
            o["metadata"]["name"]: (int(o["metadata"]["resourceVersion"]), content_of(o))
            for o in listed["items"]}))
        self.check_until()


def content_of(obj):
    """What a test compares of an object beyond its name and RV: labels and data."""
    return json.dumps([obj["metadata"].get("labels"), obj.get("data")], sort_keys=True)


async def stop_all(pool, tasks):
    """Ends every watcher of `pool` and waits for their `tasks`."""
    for w in pool:
        w.done.set()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + scaled(timeout)
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)
