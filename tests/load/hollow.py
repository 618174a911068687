"""Hollow nodes for run-load (--hollow-kubelets N): kubemark's real kubelet and kube-proxy with a
fake container runtime, beside kf_load's simulated agents, as Kubernetes' own scalability tests
run them (k8s.io/kubernetes/cmd/kubemark, built by tests/cluster/build-bins with the rig).

Per mode, N hollow nodes start against the mode's target (the apiserver, or kube-fanout's TLS
listener), every kubelet and kube-proxy with a client certificate of its own
(tests/cluster/node-cert: system:node:NAME in system:nodes; system:kube-proxy). Once they are
Ready, P pods are bound to each (spec.nodeName: no scheduler needed) in the namespace
kf-hollow-RUN, and the kubelets run them (the fake runtime reports them Running: each kubelet
then watches its pods' ConfigMaps, the namespace's `hollow-config` mounted as a volume and the
ServiceAccount token volume's `kube-root-ca.crt`, and asks for their ServiceAccount tokens).
After the mode: how many became Ready and Running and how long that took, each pod's
bound→Running time (pod_start.py), the kubelets' errors counted in their logs, their connections
to the target per process, their RSS; then they are stopped, and their Nodes, Leases and
namespace deleted.
"""
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request

import pod_start

ROOT = pathlib.Path(__file__).resolve().parents[2]
IMAGE = "registry.invalid/none:1"  # never pulled: the hollow kubelet's runtime is fake


def kubemark_binary():
    """kubemark from the rig's one `go build` of k8s.io/kubernetes (instant when cached)."""
    out = subprocess.run([str(ROOT / "tests/cluster/build-bins")], check=True,
                         capture_output=True, text=True, timeout=3600).stdout
    m = re.search(r"^export KF_BIN_KUBERNETES=(\S+)$", out, re.M)
    if not m:
        raise RuntimeError(f"tests/cluster/build-bins printed no KF_BIN_KUBERNETES:\n{out}")
    binary = pathlib.Path(m.group(1)) / "kubemark"
    if not binary.is_file():
        raise RuntimeError(f"no kubemark in {binary.parent}")
    return binary


def tcp_connections(pid, port):
    """Established TCP connections of process `pid` to local port `port`."""
    inodes = set()
    try:
        for fd in pathlib.Path(f"/proc/{pid}/fd").iterdir():
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return 0
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in pathlib.Path(table).read_text().splitlines()[1:]:
            f = row.split()
            remote_port = int(f[2].rsplit(":", 1)[1], 16)
            count += f[3] == "01" and remote_port == port and f[9] in inodes
    return count


def rss_mib(pid):
    try:
        for row in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
            if row.startswith("VmRSS:"):
                return int(row.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Api:
    """The test's own JSON requests to the apiserver, as the rig's admin."""

    def __init__(self, env):
        self.url, self.token = env["KF_APISERVER_URL"], env["KF_ADMIN_TOKEN"]
        self.ctx = ssl.create_default_context(cafile=env["KF_CA_FILE"])

    def call(self, method, path, body=None, ok=(200, 201)):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30, context=self.ctx) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            if e.code in ok:
                return None
            raise RuntimeError(f"{method} {path}: HTTP {e.code}: {e.read()[:300]!r}") from e


class Fleet:
    """N hollow nodes (a kubelet and a kube-proxy each) against one server."""

    def __init__(self, env, cluster_dir, server, port, count, pods_per_node, label, work, log):
        self.env, self.cluster_dir = env, pathlib.Path(cluster_dir)
        self.server, self.port = server, port
        self.count, self.pods_per_node = count, pods_per_node
        self.run = f"{label.replace('_', '-')}-{int(time.time()) % 100000}"
        self.ns = f"kf-hollow-{self.run}"
        self.work, self.log = pathlib.Path(work), log
        self.api = Api(env)
        self.procs = []  # (kind, node, Popen)
        self.names = [f"hollow-{self.run}-{i}" for i in range(count)]
        self.result = {"nodes": count, "pods_per_node": pods_per_node, "server": server}
        self.bound, self.watched = {}, {}  # pod name -> unix s (pod_start.py)

    def _cert(self, name, *subject):
        out = subprocess.run([str(ROOT / "tests/cluster/node-cert"), str(self.cluster_dir), name,
                              *subject], check=True, capture_output=True, text=True).stdout
        crt, key = out.split()
        return crt, key

    def _kubeconfig(self, path, cert):
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "rig", "cluster": {
                "server": self.server, "certificate-authority": self.env["KF_CA_FILE"]}}],
            "users": [{"name": "me", "user": {"client-certificate": cert[0],
                                              "client-key": cert[1]}}],
            "contexts": [{"name": "rig", "context": {"cluster": "rig", "user": "me"}}],
            "current-context": "rig"}))
        path.chmod(0o600)
        return path

    def start(self, binary):
        self.api.call("POST", "/api/v1/namespaces", {"metadata": {"name": self.ns}})
        self.api.call("POST", f"/api/v1/namespaces/{self.ns}/serviceaccounts",
                      {"metadata": {"name": "default"}})
        # The ServiceAccount token volume's CA (root-ca-certificate-publisher's job; the rig runs
        # no controller-manager).
        self.api.call("POST", f"/api/v1/namespaces/{self.ns}/configmaps", {
            "metadata": {"name": "kube-root-ca.crt"},
            "data": {"ca.crt": pathlib.Path(self.env["KF_CA_FILE"]).read_text()}})
        self.api.call("POST", f"/api/v1/namespaces/{self.ns}/configmaps", {
            "metadata": {"name": "hollow-config"}, "data": {"app.conf": "hollow=1\n"}})
        for name in self.names:
            d = self.work / name
            d.mkdir(parents=True)
            kubelet_cfg = self._kubeconfig(d / "kubelet.kubeconfig", self._cert(name))
            proxy_cfg = self._kubeconfig(d / "proxy.kubeconfig",
                                         self._cert(f"{name}-proxy", "system:kube-proxy"))
            env = dict(os.environ, TZ="UTC")  # klog's stamps, read by pod_start.kubelet_running
            for kind, args in (
                    ("kubelet", ["--morph=kubelet", f"--name={name}",
                                 f"--kubeconfig={kubelet_cfg}", f"--kubelet-port={free_port()}",
                                 "--kubelet-read-only-port=0", "--use-host-image-service=false",
                                 f"--node-labels=kf-hollow-run={self.run}", "--v=1",
                                 pod_start.KUBELET_VMODULE]),
                    ("proxy", ["--morph=proxy", f"--name={name}", f"--kubeconfig={proxy_cfg}",
                               "--v=1"])):
                with open(d / f"{kind}.log", "wb") as out:
                    p = subprocess.Popen([str(binary), *args], stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, env=env)
                self.procs.append((kind, name, p))
        self.log(f"started {self.count} hollow nodes (kubelet + kube-proxy) against {self.server}")

    def _check_alive(self):
        for kind, name, p in self.procs:
            if p.poll() is not None:
                tail = (self.work / name / f"{kind}.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"hollow {kind} {name} exited ({p.returncode}):\n{tail}")

    def _nodes(self):
        got = self.api.call("GET", f"/api/v1/nodes?labelSelector=kf-hollow-run%3D{self.run}")
        ready = 0
        for n in got["items"]:
            conds = {c["type"]: c["status"] for c in n["status"].get("conditions", [])}
            ready += conds.get("Ready") == "True"
        return ready

    def _running(self):
        got = self.api.call("GET", f"/api/v1/namespaces/{self.ns}/pods")
        return sum(p["status"].get("phase") == "Running" for p in got["items"])

    def _wait(self, what, check, want, timeout):
        start, deadline, have = time.monotonic(), time.monotonic() + timeout, 0
        while time.monotonic() < deadline:
            self._check_alive()
            have = check()
            if have >= want:
                return have, round(time.monotonic() - start, 1)
            time.sleep(1)
        self.log(f"hollow nodes: only {have} of {want} {what} after {timeout}s")
        return have, None

    def ready(self, timeout=180):
        """Waits for the nodes to be Ready, then binds the pods and waits for them to run."""
        t0 = time.monotonic()
        self.result["ready"], self.result["ready_s"] = self._wait(
            "nodes Ready", self._nodes, self.count, timeout)
        watch = pod_start.PodWatch(self.env, self.ns, timeout + 60)
        watch.start()
        bound = {}
        for name in self.names:
            for k in range(self.pods_per_node):
                self.api.call("POST", f"/api/v1/namespaces/{self.ns}/pods", pod_manifest(
                    f"{name}-{k}", name))
                bound[f"{name}-{k}"] = time.time()  # created with spec.nodeName: bound
        want = self.count * self.pods_per_node
        self.result["pods"] = want
        self.result["pods_running"], self.result["running_s"] = self._wait(
            "pods Running", self._running, want, timeout)
        watch.stop()
        self.bound, self.watched = bound, watch.running
        self.log(f"hollow nodes: {self.result['ready']}/{self.count} Ready, "
                 f"{self.result['pods_running']}/{want} pods Running "
                 f"in {time.monotonic() - t0:.0f}s")

    def measure(self):
        """Connections to the server and RSS per process, while they run."""
        for kind in ("kubelet", "proxy"):
            procs = [p for k, _, p in self.procs if k == kind]
            conns = [tcp_connections(p.pid, self.port) for p in procs]
            self.result[f"{kind}_connections"] = {
                "min": min(conns, default=0), "max": max(conns, default=0),
                "mean": round(sum(conns) / max(len(conns), 1), 2)}
            self.result[f"{kind}_rss_mib_mean"] = round(
                sum(rss_mib(p.pid) for p in procs) / max(len(procs), 1), 1)
        self.result["running_at_end"] = self._running()

    def stop(self):
        for _, _, p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for _, _, p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        logs = [self.work / name / "kubelet.log" for kind, name, _ in self.procs
                if kind == "kubelet"]
        texts = [path.read_text(errors="replace") for path in logs]
        self.result["kubelet_log_errors"] = pod_start.count_log_errors(texts)
        if self.bound:
            year = time.gmtime(min(self.bound.values())).tm_year
            self.result["pod_start"] = pod_start.summarize(
                self.bound, self.watched, pod_start.kubelet_running(texts, year))
        for path in logs:
            remove_root_dir(path)
        self.procs = []
        for name in self.names:
            for path in (f"/api/v1/nodes/{name}",
                         f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"):
                try:
                    self.api.call("DELETE", path, ok=(200, 404))
                except (OSError, RuntimeError) as e:
                    self.log(f"hollow nodes: deleting {path}: {e}")
        try:
            self.api.call("DELETE", f"/api/v1/namespaces/{self.ns}", ok=(200, 404))
        except (OSError, RuntimeError) as e:
            self.log(f"hollow nodes: deleting namespace {self.ns}: {e}")


def pod_manifest(name, node):
    """A pod bound to `node` that mounts the namespace's ConfigMap, as a workload's config."""
    return {"metadata": {"name": name, "labels": {"app": "hollow"}},
            "spec": {"nodeName": node,
                     "containers": [{"name": "c", "image": IMAGE, "volumeMounts": [
                         {"name": "config", "mountPath": "/etc/hollow"}]}],
                     "volumes": [{"name": "config", "configMap": {"name": "hollow-config"}}]}}


def remove_root_dir(kubelet_log):
    """Removes the root directory a stopped hollow kubelet made: kubemark makes it in /tmp
    whatever TMPDIR says (test/utils.MakeTempDirOrDie), and names it in its log."""
    try:
        m = re.search(r"Using (/tmp/hollow-kubelet\.\d+) as root dir",
                      kubelet_log.read_text(errors="replace"))
    except OSError:
        return
    if m:
        shutil.rmtree(m.group(1), ignore_errors=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
