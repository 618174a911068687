"""How fast the hollow kubelets start their pods (hollow.py), and what went wrong on the way.

Bound → Running per pod. Bound is when the harness's POST of the pod (created with
spec.nodeName: bound at creation) was answered. Running, two ways, both on this machine's clock:
- `kubelet_ms`: the kubelet's own stamp: its log line "Mark when the pod was running for the
  first time" (pod_startup_latency_tracker, at -v=3: hollow.py turns it on for that file
  alone), written when the status update that reports the pod Running succeeded: the pod's
  volumes mounted (its ConfigMap and token), its status GET and PATCH through the mode's
  server. Microseconds in klog's header. (The tracker's later "Observed pod startup
  duration", when its watch brings the status back, is missing for pods whose watch event
  came before the PATCH's answer: 10 of 60 on a run.)
- `watch_ms`: when the harness's own watch of the namespace (as the rig's admin, straight to
  the apiserver in every mode, so the observer is the same) first saw phase Running.
The pod's own timestamps (creationTimestamp, the Ready condition's lastTransitionTime, a
container's startedAt, and so the kubelet's podStartE2EDuration, which counts from
creationTimestamp) are whole seconds on the wire: too coarse to tell 10 % apart at the 1-3 s a
start takes here.

The kubelets' logs are counted for the errors that delay a pod's start (a volume whose
ConfigMap or Secret the kubelet could not sync, a token it could not get, a status update that
failed). Pure functions but PodWatch, which reads the apiserver.
"""
import calendar
import http.client
import json
import re
import socket
import ssl
import threading
import time
import urllib.parse

# The kubelet log lines counted, by the words that identify them (klog's message text).
# A volume whose mount failed logs "MountVolume.SetUp failed ... : <why>" (the why: a ConfigMap or
# Secret not synced, a token not fetched); a status GET the node authorizer refused (the pod not
# yet in its graph) "Failed to get status for pod".
KUBELET_ERRORS = {
    "configmap_sync": "failed to sync configmap cache",
    "secret_sync": "failed to sync secret cache",
    "mount_failed": "MountVolume.SetUp failed",
    "status_get": "Failed to get status for pod",
    "status_update": "Failed to update status for pod",
    "node_status": "Error updating node status",
    "sync_pod": "Error syncing pod",
}
# klog's header and the startup tracker's line: I1129 08:08:25.062381 885 pod_startup_... pod="NS/NAME"
MARKED = re.compile(r'^I(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d+) .*"Mark when the pod was '
                    r'running for the first time" pod="[^/"]*/([^"]+)"', re.M)
# The kubelet flag that writes it.
KUBELET_VMODULE = "--vmodule=pod_startup_latency_tracker=3"


def count_log_errors(texts):
    """{key: lines} over all the logs in `texts` for each of KUBELET_ERRORS."""
    counts = dict.fromkeys(KUBELET_ERRORS, 0)
    for text in texts:
        for line in text.splitlines():
            for key, words in KUBELET_ERRORS.items():
                counts[key] += words in line
    return counts


def kubelet_running(texts, year):
    """{pod name: unix s} of the kubelets' "Mark when the pod was running" lines (klog writes UTC
    here, and no year: `year` is the run's)."""
    out = {}
    for text in texts:
        for m in MARKED.finditer(text):
            mon, day, hh, mm, ss, frac, name = m.groups()
            t = calendar.timegm((year, int(mon), int(day), int(hh), int(mm), int(ss)))
            out.setdefault(name, t + float("0." + frac))
    return out


def quantiles(values):
    """{count, p50, p90, max} by nearest rank; the quantiles are None without values."""
    v = sorted(values)
    if not v:
        return {"count": 0, "p50": None, "p90": None, "max": None}

    def rank(q):
        return v[min(len(v) - 1, max(0, -(-len(v) * q // 100) - 1))]
    return {"count": len(v), "p50": rank(50), "p90": rank(90), "max": v[-1]}


def summarize(bound, watched, kubelet):
    """bound, watched, kubelet: {pod name: unix s} (see the top). A pod not seen Running counts
    in neither figure's values."""
    out = {}
    for key, running in (("kubelet_ms", kubelet), ("watch_ms", watched)):
        q = quantiles([(running[n] - t) * 1000 for n, t in bound.items() if n in running])
        out[key] = {k: v if v is None or k == "count" else round(v, 1) for k, v in q.items()}
    return out


class PodWatch:
    """The harness's watch of one namespace's pods at the apiserver (admin token, JSON), noting
    when it first saw each pod Running. Bounded: the watch asks for `timeout_s`, and stop() cuts
    it short."""

    def __init__(self, env, ns, timeout_s):
        self.url = urllib.parse.urlsplit(env["KF_APISERVER_URL"])
        self.token, self.ns, self.timeout_s = env["KF_ADMIN_TOKEN"], ns, int(timeout_s)
        self.ctx = ssl.create_default_context(cafile=env["KF_CA_FILE"])
        self.running = {}
        self.conn = None
        self.opened = threading.Event()
        self.thread = threading.Thread(target=self._run, name="pod-watch", daemon=True)

    def start(self):
        """Opens the watch; returns once the apiserver answered its headers (at most 10 s)."""
        self.thread.start()
        if not self.opened.wait(10):
            raise RuntimeError(f"the watch of {self.ns}'s pods did not open within 10s")

    def _run(self):
        self.conn = http.client.HTTPSConnection(self.url.hostname, self.url.port,
                                                context=self.ctx, timeout=self.timeout_s + 10)
        try:
            self.conn.request("GET", f"/api/v1/namespaces/{self.ns}/pods?watch=1"
                              f"&timeoutSeconds={self.timeout_s}",
                              headers={"Authorization": f"Bearer {self.token}"})
            resp = self.conn.getresponse()
            self.opened.set()
            for line in resp:
                obj = json.loads(line).get("object", {})
                name = obj.get("metadata", {}).get("name")
                if obj.get("status", {}).get("phase") == "Running" and name not in self.running:
                    self.running[name] = time.time()
        except (OSError, ValueError, http.client.HTTPException):
            pass  # stop() closed it, or it ended: what it saw stays
        finally:
            self.opened.set()

    def stop(self):
        try:
            if self.conn and self.conn.sock:
                self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.thread.join(5)
