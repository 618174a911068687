#!/usr/bin/env python3
"""A client connection flood against kube-fanout's plain HTTP listener, bounded and
self-stopping.

Opens --connections connections to 127.0.0.1:--port (at most --concurrent connects at a time).
Every other one sends a watch request (--path, --token) and reads what comes; the rest send
nothing (idle connections, as a client that connected and stalled). They are all held until
--seconds after the first connect (or SIGTERM, whichever comes first), then closed, and one
JSON line of counts is printed:
connected, refused (the connect failed), watch answers by status, closed by the server before
the end, bytes read, and the descriptor limit this process had. The soft RLIMIT_NOFILE is raised
to the hard limit first (the hard limit cannot be raised without privilege): run several
processes for more connections than one may hold.
"""
import argparse
import asyncio
import collections
import json
import resource
import signal
import time


async def one(args, i, gate, stats, stop):
    try:
        async with gate:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", args.port), timeout=30)
    except (OSError, asyncio.TimeoutError) as e:
        stats["refused"] += 1
        stats[f"connect error {type(e).__name__}"] += 1
        return
    stats["connected"] += 1
    try:
        if i % 2 == 0:
            writer.write((f"GET {args.path}?watch=1&resourceVersion=0&timeoutSeconds=600 "
                          f"HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {args.token}\r\n"
                          "Accept: application/json\r\nUser-Agent: kfflood\r\n\r\n").encode())
            await writer.drain()
        first = True
        while not stop.is_set():
            read = asyncio.ensure_future(reader.read(65536))
            stopped = asyncio.ensure_future(stop.wait())
            done, _ = await asyncio.wait({read, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if read not in done:
                read.cancel()
                break
            stopped.cancel()
            data = read.result()
            if not data:
                stats["closed by server"] += 1
                break
            if first:
                status = data.split(b" ", 2)[1].decode(errors="replace") if b" " in data else "?"
                stats[f"answered {status}"] += 1
                first = False
            stats["bytes"] += len(data)
    except OSError:
        stats["closed by server"] += 1
    finally:
        writer.transport.abort()


async def main(args):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    stats = collections.Counter()
    stats["fd limit"] = hard
    gate = asyncio.Semaphore(args.concurrent)
    stop = asyncio.Event()
    started = time.monotonic()
    tasks = [asyncio.create_task(one(args, i, gate, stats, stop))
             for i in range(args.connections)]
    # Held until --seconds after the start, or until told to stop (SIGTERM) before that.
    told = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, told.set)
    try:
        await asyncio.wait_for(told.wait(), max(0.0, args.seconds - (time.monotonic() - started)))
    except asyncio.TimeoutError:
        pass
    stats["held at the end"] = stats["connected"] - stats["closed by server"]
    stop.set()
    await asyncio.wait(tasks, timeout=30)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    stats["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(stats), flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--connections", type=int, default=10000)
    p.add_argument("--concurrent", type=int, default=500)
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--path", default="/api/v1/namespaces/default/configmaps")
    p.add_argument("--token", default="")
    asyncio.run(main(p.parse_args()))
