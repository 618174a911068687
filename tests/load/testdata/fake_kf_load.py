#!/usr/bin/env python3
"""A stand-in for kf_load that speaks its command line (CONTRACT.md) to smoke-test run-load
without the C++ binary:

    KF_LOAD_BINARY=tests/load/testdata/fake_kf_load.py tests/load/run-load --no-build \\
        --kubelets 20 --duration 10

--setup-only does nothing. A run opens one real watch on pods at --target per kubelet (at most
50), holds them for the ramp and --duration (so the apiserver or kube-fanout really serves them),
prints a progress line a second with --progress, then writes the synthetic result of
kf_load_<label>.json beside this file (label, target, config and timing filled in). Its latencies
and completeness numbers are made up; the harness's own numbers around it are real."""
import argparse
import http.client
import json
import os
import pathlib
import ssl
import sys
import threading
import time
import urllib.parse

HERE = pathlib.Path(__file__).resolve().parent


def main():
    p = argparse.ArgumentParser()
    for flag in ("target", "apiserver", "ca-file", "token-env", "label", "out"):
        p.add_argument(f"--{flag}")
    for flag in ("kubelets", "kube-proxies", "pollers", "configmaps-per-kubelet", "threads"):
        p.add_argument(f"--{flag}", type=int, default=0)
    for flag in ("poll-interval", "ramp-rate", "duration", "drain", "pod-rate", "node-rate",
                 "slice-rate", "event-rate"):
        p.add_argument(f"--{flag}", type=float, default=0)
    p.add_argument("--setup-only", action="store_true")
    p.add_argument("--progress", action="store_true")
    a = p.parse_args()
    if a.setup_only:
        return 0
    token = os.environ.get(a.token_env or "KF_ADMIN_TOKEN", "")
    url = urllib.parse.urlsplit(a.target)
    ctx = ssl.create_default_context(cafile=a.ca_file) if url.scheme == "https" else None
    n = min(a.kubelets, 50)
    stop = threading.Event()
    opened = []

    def watch(i):
        cls = http.client.HTTPSConnection if ctx else http.client.HTTPConnection
        kw = {"context": ctx} if ctx else {}
        conn = cls(url.hostname, url.port, timeout=5, **kw)
        try:
            conn.request("GET", f"/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3Dnode-{i}",
                         headers={"Authorization": f"Bearer {token}"})
            resp = conn.getresponse()
            opened.append(resp.status)
            while not stop.wait(0.2):
                pass
        except OSError as e:
            print(f"watch {i}: {e}", file=sys.stderr)
        finally:
            conn.close()

    started = time.time()
    threads = [threading.Thread(target=watch, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    ramp = n / max(a.ramp_rate, 1)
    end = time.monotonic() + ramp + a.duration
    timeline = []
    while time.monotonic() < end:
        t = round(time.time() - started, 1)
        timeline.append({"t": t, "open_watches": len(opened), "events": 0, "requests": len(opened)})
        if a.progress:
            print(f"t={t:.0f}s watches={len(opened)}", file=sys.stderr, flush=True)
        time.sleep(1)
    stop.set()
    for t in threads:
        t.join(5)
    result = json.loads((HERE / f"kf_load_{a.label}.json").read_text())
    result.update(label=a.label, target=a.target, started_unix=started,
                  phases={"setup_s": 0.0, "ramp_s": round(ramp, 2), "churn_s": a.duration,
                          "drain_s": 0.0},
                  timeline=timeline)
    result["config"].update(kubelets=a.kubelets, kube_proxies=a.kube_proxies, pollers=a.pollers,
                            duration_s=a.duration)
    result["completeness"]["watch_streams"] = len(opened)
    result["connections"].update(peak_open=len(opened), open_at_end=0,
                                 failed=n - len(opened))
    pathlib.Path(a.out).write_text(json.dumps(result, indent=1))
    return 0 if opened else 1


if __name__ == "__main__":
    sys.exit(main())
