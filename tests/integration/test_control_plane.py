"""Real kube-scheduler and kube-controller-manager through kube-fanout, as direct.

Both components are built by tests/cluster/build-bins from the same k8s.io/kubernetes module as
the rig's kube-apiserver. The same small workload runs twice, each time on its own fake nodes
and in its own namespace: once with the components' kubeconfigs pointing at the apiserver, once
at kube-fanout's TLS listener. The components authenticate as the rig's apiserver accepts them
(client certificates CN=system:kube-scheduler and CN=system:kube-controller-manager, which
kube-fanout verifies itself and passes on through its front proxy); the controller-manager's
controllers use their own ServiceAccount tokens (--use-service-account-credentials), as kubeadm
runs it, so both kinds of identity travel through kube-fanout.

The test plays the kubelets: it registers Ready nodes, renews their Leases so node-lifecycle
keeps them Ready (and lifts the not-ready taint TaintNodesByCondition puts on new nodes), and
once a pod is bound reports it Running and Ready with an IP, as a kubelet would. Each run checks
that every pod of a Deployment, a DaemonSet and a Job was created and bound, that the Service's
EndpointSlice lists the Deployment's pods, and that the controllers saw the pods become Ready
(readyReplicas); then the two runs must agree. Through kube-fanout, the components' reads of
cached resources must be served from the cache (counted by kube-fanout's metrics and its request
log, with the protocol and Accept header each request came with).

Then kubemark's hollow nodes (the real kubelet with a fake runtime, kube-proxy with a fake
proxier) run a Deployment's pods, one node direct and two through kube-fanout: the connections
each agent holds, and the watches each node holds at the apiserver, are counted.
"""
import collections
import datetime
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from kfrig import ROOT, Proxy, free_port, metric_values, scaled, tcp_connections
from test_identity import issue_cert

sys.path.insert(0, str(ROOT / "tests/load"))
from hollow import remove_root_dir  # noqa: E402  (the load harness's hollow nodes)

NODES = 3
REPLICAS = 3        # Deployment web, selected by Service web
JOB_PARALLELISM = 2
CONTROLLERS = ("deployment-controller", "replicaset-controller", "daemonset-controller",
               "job-controller", "endpointslice-controller", "node-lifecycle-controller")
COMPONENTS = {"kube-scheduler": ("system:kube-scheduler",),
              "kube-controller-manager": ("system:kube-controller-manager",)}
LEASE_RENEW_S = 5
# The scheduler's profile, named in this test's pods: it leaves other tests' pending pods alone.
SCHEDULER_NAME = "kf-cp-scheduler"
SETTLE_TIMEOUT_S = 60   # components start, nodes lose their taint, pods are created and bound


def kubernetes_bin_dir():
    """The rig's Kubernetes binaries (built or reused by build-bins, instant when cached)."""
    out = subprocess.run([str(ROOT / "tests/cluster/build-bins")], check=True,
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("export KF_BIN_KUBERNETES="):
            return pathlib.Path(line.split("=", 1)[1])
    raise AssertionError(f"build-bins printed no KF_BIN_KUBERNETES:\n{out}")


def now_rfc3339(micro=False):
    """Now as a Time (seconds) or a MicroTime (Lease renewals) field."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


class Api:
    """JSON requests to the apiserver as the rig's admin (the test's own view, never through
    kube-fanout)."""

    def __init__(self, cluster):
        self.cluster = cluster

    def call(self, method, path, body=None, content_type="application/json", expect=(200,)):
        resp = self.cluster.request(method, path, body=json.dumps(body) if body else None,
                                    headers={"Content-Type": content_type} if body else None)
        assert resp.status in expect, (method, path, resp.status, resp.body[:500])
        return json.loads(resp.body) if resp.body else None

    def items(self, path):
        return self.call("GET", path)["items"]


class Component:
    """One process (kube-scheduler, kube-controller-manager, a hollow kubelet or kube-proxy) in
    its own session, and its log."""

    def __init__(self, name, binary, args, log_path, env):
        self.name, self.log_path = name, log_path
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen([str(binary), *args], stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True,
                                            env={**os.environ, **env})

    def check_alive(self):
        assert self.process.poll() is None, f"{self.name} exited:\n{self.log_tail()}"

    def log_tail(self, n=40):
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=scaled(15))
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def write_kubeconfig(path, server, ca, cert):
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "rig", "cluster": {"server": server, "certificate-authority": ca}}],
        "users": [{"name": "me", "user": {"client-certificate": cert[0], "client-key": cert[1]}}],
        "contexts": [{"name": "rig", "context": {"cluster": "rig", "user": "me"}}],
        "current-context": "rig"}))
    path.chmod(0o600)
    return path


def start_components(cluster, bins, server, directory, how):
    ca = cluster.env["KF_CA_FILE"]
    common = ["--secure-port=0", "--v=1", *how["args"]]
    started = []
    for name, subject in COMPONENTS.items():
        cert = issue_cert(cluster, name, *subject)
        kubeconfig = write_kubeconfig(directory / f"{name}.kubeconfig", server, ca, cert)
        if name == "kube-scheduler":
            config = directory / "kube-scheduler.config"
            config.write_text(json.dumps({
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": str(kubeconfig)},
                "leaderElection": {"leaderElect": False},
                "profiles": [{"schedulerName": SCHEDULER_NAME}]}))
            args = [f"--config={config}", *common]
        else:
            args = [f"--kubeconfig={kubeconfig}", "--leader-elect=false", *common,
                    f"--controllers={','.join(CONTROLLERS)}",
                    "--use-service-account-credentials=true", "--node-monitor-period=1s"]
        started.append(Component(name, bins / name, args, directory / f"{name}.log", how["env"]))
    return started


class FakeKubelets:
    """Ready Node objects with capacity, their Leases renewed in the background, and their pods
    reported Running and Ready once bound (what kubelets would do)."""

    def __init__(self, api, run, ip_prefix):
        self.api, self.run, self.ip_prefix = api, run, ip_prefix
        self.names = [f"kf-cp-{run}-{i}" for i in range(NODES)]
        self._stop = threading.Event()
        self._errors = []
        self._reported = {}  # pod name -> IP
        resources = {"cpu": "4", "memory": "8Gi", "pods": "110"}
        for name in self.names:
            self.api.call("POST", "/api/v1/nodes", {
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                      "kubernetes.io/os": "linux",
                                                      "kf-cp-run": run}},
                "status": {"capacity": resources, "allocatable": resources,
                           "conditions": [{"type": "Ready", "status": "True",
                                           "reason": "KubeletReady",
                                           "lastHeartbeatTime": now_rfc3339(),
                                           "lastTransitionTime": now_rfc3339()}]}},
                expect=(201,))
            self.api.call("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", {
                "metadata": {"name": name},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                         "renewTime": now_rfc3339(micro=True)}}, expect=(201,))
        self._thread = threading.Thread(target=self._renew, daemon=True)
        self._thread.start()

    def _renew(self):
        while not self._stop.wait(LEASE_RENEW_S):
            try:
                for name in self.names:
                    self.api.call("PATCH", f"/apis/coordination.k8s.io/v1/namespaces/"
                                  f"kube-node-lease/leases/{name}",
                                  {"spec": {"renewTime": now_rfc3339(micro=True)}},
                                  content_type="application/merge-patch+json")
            except Exception as e:  # Reported by check(); the thread keeps renewing.
                self._errors.append(repr(e))

    def check(self):
        assert not self._errors, f"lease renewals failed: {self._errors[:3]}"

    def report_running(self, ns):
        """Reports every bound pod of `ns` not yet reported Running and Ready with an IP."""
        for pod in self.api.items(f"/api/v1/namespaces/{ns}/pods"):
            name = pod["metadata"]["name"]
            if name in self._reported or not pod["spec"].get("nodeName"):
                continue
            ip = f"{self.ip_prefix}.{len(self._reported) + 10}"
            stamp = now_rfc3339()
            conditions = [{"type": t, "status": "True", "lastTransitionTime": stamp}
                          for t in ("Initialized", "PodReadyToStartContainers", "ContainersReady",
                                    "Ready")]
            self.api.call("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}/status", {"status": {
                "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": "127.0.0.1",
                "startTime": stamp, "conditions": conditions}},
                content_type="application/strategic-merge-patch+json")
            self._reported[name] = ip

    def reported_ips(self, names):
        return sorted(self._reported[n] for n in names if n in self._reported)

    def delete(self):
        self._stop.set()
        self._thread.join(timeout=scaled(20))
        for name in self.names:
            self.api.call("DELETE", f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/"
                          f"leases/{name}", expect=(200, 404))
            self.api.call("DELETE", f"/api/v1/nodes/{name}", expect=(200, 404))


def workload(api, ns, run):
    """A Deployment with a Service selecting its pods, a DaemonSet and a Job, all on this run's
    nodes only (other tests' nodes stay out of it)."""
    selector = {"kf-cp-run": run}

    def template(app):
        return {"metadata": {"labels": {"app": app}},
                "spec": {"nodeSelector": selector, "terminationGracePeriodSeconds": 0,
                         "schedulerName": SCHEDULER_NAME,
                         "containers": [{"name": "c", "image": "registry.invalid/none:1",
                                         "resources": {"requests": {"cpu": "10m"}}}]}}

    api.call("POST", "/api/v1/namespaces", {"metadata": {"name": ns}}, expect=(201,))
    # ServiceAccount admission wants it before the first pod; the rig's controller-manager runs
    # no serviceaccount-controller (it would touch every other test's namespaces).
    api.call("POST", f"/api/v1/namespaces/{ns}/serviceaccounts",
             {"metadata": {"name": "default"}}, expect=(201,))
    api.call("POST", f"/api/v1/namespaces/{ns}/services", {
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}},
        expect=(201,))
    api.call("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", {
        "metadata": {"name": "web"},
        "spec": {"replicas": REPLICAS, "selector": {"matchLabels": {"app": "web"}},
                 "template": template("web")}}, expect=(201,))
    api.call("POST", f"/apis/apps/v1/namespaces/{ns}/daemonsets", {
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": template("agent")}},
        expect=(201,))
    job = template("job")
    job["spec"]["restartPolicy"] = "Never"
    api.call("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", {
        "metadata": {"name": "batch"},
        "spec": {"parallelism": JOB_PARALLELISM, "completions": JOB_PARALLELISM,
                 "template": job}}, expect=(201,))


def owner_kind(api, ns, pod):
    """Deployment, DaemonSet or Job: the workload a pod belongs to (ReplicaSets resolved)."""
    refs = pod["metadata"].get("ownerReferences") or [{"kind": "none"}]
    kind = refs[0]["kind"]
    if kind == "ReplicaSet":
        rs = api.call("GET", f"/apis/apps/v1/namespaces/{ns}/replicasets/{refs[0]['name']}")
        kind = rs["metadata"]["ownerReferences"][0]["kind"]
    return kind


EXPECTED_PODS = {"Deployment": REPLICAS, "DaemonSet": NODES, "Job": JOB_PARALLELISM}


def observe(api, ns, kubelets):
    """What the components made of the workload, as the apiserver has it."""
    pods = [(p, owner_kind(api, ns, p)) for p in api.items(f"/api/v1/namespaces/{ns}/pods")]
    by_owner = collections.Counter(kind for _, kind in pods)
    bound = collections.Counter(kind for p, kind in pods if p["spec"].get("nodeName"))
    web = sorted(p["metadata"]["name"] for p, kind in pods if kind == "Deployment")
    slices = api.items(f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices"
                       "?labelSelector=kubernetes.io%2Fservice-name%3Dweb")
    endpoints = sorted((a, e.get("conditions", {}).get("ready"))
                       for s in slices for e in s.get("endpoints") or [] for a in e["addresses"])
    deploy = api.call("GET", f"/apis/apps/v1/namespaces/{ns}/deployments/web")["status"]
    daemons = api.call("GET", f"/apis/apps/v1/namespaces/{ns}/daemonsets/agent")["status"]
    job = api.call("GET", f"/apis/batch/v1/namespaces/{ns}/jobs/batch")["status"]
    nodes = collections.Counter(p["spec"].get("nodeName") for p, kind in pods
                                if kind == "DaemonSet")
    return {
        "pods": dict(by_owner), "bound": dict(bound), "slices": len(slices),
        "endpoints": endpoints, "web_ips": kubelets.reported_ips(web),
        "ready_replicas": deploy.get("readyReplicas", 0),
        "daemonset_ready": daemons.get("numberReady", 0),
        "daemonset_nodes": sorted(nodes.values()) == [1] * NODES and
                           set(nodes) == set(kubelets.names),
        "job_active": job.get("active", 0), "job_ready": job.get("ready", 0),
    }


def settled(state):
    return (state["pods"] == EXPECTED_PODS and state["bound"] == EXPECTED_PODS and
            len(state["endpoints"]) == REPLICAS and all(r for _, r in state["endpoints"]) and
            state["ready_replicas"] == REPLICAS and state["daemonset_ready"] == NODES and
            state["job_ready"] == JOB_PARALLELISM)


def run_workload(cluster, bins, server, directory, run, ip_prefix, how):
    """Starts the components against `server`, runs the workload, returns what they made of it
    and how long it took."""
    api = Api(cluster)
    ns = f"kf-cp-{run}"
    directory.mkdir()
    kubelets = FakeKubelets(api, run, ip_prefix)
    components = start_components(cluster, bins, server, directory, how)
    start = time.monotonic()
    state = None
    try:
        workload(api, ns, run)
        deadline = start + scaled(SETTLE_TIMEOUT_S)
        while time.monotonic() < deadline:
            for c in components:
                c.check_alive()
            kubelets.check()
            kubelets.report_running(ns)
            state = observe(api, ns, kubelets)
            if settled(state):
                break
            time.sleep(0.5)
        elapsed = time.monotonic() - start
        logs = "\n".join(f"--- {c.name}\n{c.log_tail()}" for c in components)
        assert state is not None and settled(state), (
            f"{run}: the workload did not settle in {SETTLE_TIMEOUT_S}s: {state}; node taints: "
            f"{[api.call('GET', f'/api/v1/nodes/{n}')['spec'].get('taints') for n in kubelets.names]}"
            f"\n{logs}")
        return state, elapsed
    finally:
        for c in components:
            c.stop()
        kubelets.delete()
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


# How the components talk through kube-fanout, one run each: client-go's defaults in 1.36
# (informers stream their initial state with WatchList, HTTP/2 over TLS), and LIST+WATCH
# informers over HTTP/1.1 (client-go's DISABLE_HTTP2), as older or reconfigured clients do.
MODES = {
    "watchlist-h2": {"args": [], "env": {}, "protocol": "h2"},
    "list-http1.1": {"args": ["--feature-gates=WatchListClient=false"],
                     "env": {"DISABLE_HTTP2": "1"}, "protocol": "http/1.1"},
}


def start_fanout(cluster, directory):
    """kube-fanout with its default cache, verifying client certificates (the components' and
    nodes') and passing their users on through its front-proxy certificate."""
    directory.mkdir()
    return Proxy.start(cluster, directory, extra_args=[
        f"--client-ca-file={cluster.env['KF_CA_FILE']}",
        f"--proxy-client-cert-file={cluster.env['KF_FRONT_PROXY_CLIENT_CERT']}",
        f"--proxy-client-key-file={cluster.env['KF_FRONT_PROXY_CLIENT_KEY']}"])


def requests_by_component(lines, components=tuple(COMPONENTS)):
    """kube-fanout's request log lines of the components (user agents "NAME/..." or "NAME"):
    {component: [entry]}."""
    out = collections.defaultdict(list)
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        agent = entry.get("user_agent", "")
        for name in components:
            if agent == name or agent.startswith(name + "/"):
                out[name].append(entry)
    return out


FAMILIES = {"cache": "kube_fanout_cache_requests_total",
            "protobuf": "kube_fanout_cache_protobuf_requests_total",
            "http2": "kube_fanout_http2_requests_total",
            "routes": "kube_fanout_requests_total",
            "token_reviews": "kube_fanout_token_reviews_total",
            "access_reviews": "kube_fanout_access_reviews_total"}


def metrics(cluster, proxy):
    text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
    return {k: metric_values(text, name) for k, name in FAMILIES.items()}, text


def quiesced(cluster, proxy):
    """The metrics once the stopped components' connections are gone (a request is counted and
    logged when it ends: their watches end when kube-fanout sees the connection close)."""
    deadline = time.monotonic() + scaled(15)
    while True:
        values, text = metrics(cluster, proxy)
        # This scrape's own connection is the one left open.
        if metric_values(text, "kube_fanout_open_connections")[""] <= 1:
            return values
        assert time.monotonic() < deadline, "the components' connections to kube-fanout stay open"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def runs(cluster, tmp_path_factory):
    bins = kubernetes_bin_dir()
    base = tmp_path_factory.mktemp("control-plane")
    suffix = free_port()
    out = {"direct": run_workload(cluster, bins, cluster.url, base / "direct", f"d{suffix}",
                                  "10.244.1", MODES["watchlist-h2"])}
    proxy = start_fanout(cluster, base / "proxy")
    try:
        for i, (mode, how) in enumerate(MODES.items()):
            before, logged = quiesced(cluster, proxy), len(proxy.log_lines())
            state = run_workload(cluster, bins, proxy.server, base / mode, f"t{i}-{suffix}",
                                 f"10.244.{i + 2}", how)
            after = quiesced(cluster, proxy)
            delta = {f: {k: v - before[f].get(k, 0) for k, v in after[f].items()} for f in after}
            out[mode] = state, delta, requests_by_component(proxy.log_lines()[logged:])
        yield out
    finally:
        code = proxy.stop()
        assert code == 0, f"kube-fanout exited with {code}; log:\n{proxy.log_tail()}"


def test_the_workload_settles_direct_and_through_kube_fanout_alike(runs):
    direct, direct_s = runs["direct"]
    print(f"\ndirect: {direct_s:.1f}s {direct}")
    same = ("pods", "bound", "slices", "ready_replicas", "daemonset_ready", "daemonset_nodes",
            "job_active", "job_ready")
    for mode in MODES:
        (through, through_s), _, _ = runs[mode]
        print(f"through kube-fanout ({mode}): {through_s:.1f}s {through}")
        for state in (direct, through):
            assert state["pods"] == state["bound"] == EXPECTED_PODS
            assert state["daemonset_nodes"], "one DaemonSet pod on each of the run's nodes"
            # The Service's EndpointSlice lists exactly the Deployment's pods, Ready.
            assert state["slices"] == 1
            assert state["endpoints"] == [(ip, True) for ip in state["web_ips"]]
        assert {k: through[k] for k in same} == {k: direct[k] for k in same}
        assert len(through["endpoints"]) == len(direct["endpoints"]) == REPLICAS


def summarize(entries):
    """(verb, resource, route, protocol, accept) -> count."""
    return collections.Counter((e.get("verb"), e.get("resource") or "-", e.get("route"),
                                e.get("protocol"), e.get("accept")) for e in entries)


def request_table(requests):
    """Report lines: each component's requests through kube-fanout, counted by kind."""
    lines = []
    for name, entries in requests.items():
        lines.append(f"   {name}: {len(entries)} requests "
                     "(count, verb, resource, answered by, protocol, Accept)")
        lines += [f"   {n:4d}  {' '.join(str(x) for x in key)}" for key, n in sorted(
            summarize(entries).items(), key=lambda kv: (str(kv[0][2]), -kv[1], str(kv[0])))]
    return lines


def write_report(name, lines):
    report = "\n".join(lines)
    print("\n" + report)
    (ROOT / "build").mkdir(exist_ok=True)
    (ROOT / "build" / name).write_text(report + "\n")


def report_runs(runs):
    lines = []
    for mode in MODES:
        _, delta, requests = runs[mode]
        lines.append(f"== through kube-fanout, {mode}; kube-fanout's counters during the run:")
        lines += [f"   {FAMILIES[f]}: " + ", ".join(f"{k or '-'} {v:g}" for k, v in d.items() if v)
                  for f, d in delta.items()]
        lines += request_table(requests)
    write_report("control-plane-requests.txt", lines)


@pytest.mark.parametrize("mode", MODES)
def test_the_components_reads_are_served_from_the_cache(runs, mode):
    if mode == list(MODES)[-1]:
        report_runs(runs)
    _, delta, requests = runs[mode]
    # Informers of pods and nodes: WatchList streams (sendInitialEvents=true) or LIST then WATCH.
    verbs = ("watch",) if mode.startswith("watchlist") else ("list", "watch")
    served = 0
    for name in COMPONENTS:
        entries = requests[name]
        assert entries, f"no request of {name} in kube-fanout's log"
        cached = [e for e in entries if e["route"] == "cache"]
        for verb in verbs:
            for resource in ("pods", "nodes"):
                assert any(e["verb"] == verb and e["resource"] == resource for e in cached), (
                    name, verb, resource, summarize(entries))
        if verbs == ("watch",):
            assert all("sendInitialEvents=true" in e["uri"]
                       for e in cached if e["verb"] == "watch"), summarize(cached)
        # Every request of the component came over the protocol its client was set to.
        assert {e["protocol"] for e in entries} == {MODES[mode]["protocol"]}, summarize(entries)
        served += len(cached)
    # The controllers' own ServiceAccount tokens were reviewed and their reads served too
    # (node-lifecycle GETs its nodes from the cache as system:serviceaccount:...:node-controller).
    assert any(e["route"] == "cache" and e["user_agent"].endswith(":node-controller")
               for e in requests["kube-controller-manager"])
    assert delta["token_reviews"]['{result="authenticated"}'] > 0
    assert delta["access_reviews"]['{result="denied"}'] == 0
    # The metrics agree with the log: every cached answer is counted, over HTTP/2 or not, and
    # was protobuf (client-go's Accept: application/vnd.kubernetes.protobuf, */*).
    assert sum(delta["cache"].values()) == served
    assert delta["protobuf"][""] == served
    assert delta["http2"]['{route="cache"}'] == (served if MODES[mode]["protocol"] == "h2" else 0)


# --- hollow kubelets ---------------------------------------------------------------------------
#
# kubemark (k8s.io/kubernetes/cmd/kubemark, built with the rig) runs the real kubelet with a fake
# container runtime, and kube-proxy with a fake proxier, as Kubernetes' scalability tests do.
# One hollow node talks to the apiserver directly, for reference; the others through
# kube-fanout. kube-scheduler and kube-controller-manager run against the apiserver directly,
# so whatever changes at the apiserver when the hollow nodes start is theirs.

HOLLOW_THROUGH = 2
HOLLOW_AGENTS = ("hollow-kubelet", "hollow-proxy")  # kubemark's user agents


def apiserver_watches(cluster):
    """{group/resource: watches open at the apiserver} (apiserver_longrunning_requests)."""
    text = cluster.request("GET", "/metrics").body.decode()
    out = collections.Counter()
    for labels, value in metric_values(text, "apiserver_longrunning_requests").items():
        fields = dict(f.split("=", 1) for f in labels.strip("{}").split(",") if "=" in f)
        fields = {k: v.strip('"') for k, v in fields.items()}
        if fields.get("verb") == "WATCH" and value:
            group = fields.get("group", "")
            out[fields["resource"] + (f".{group}" if group else "")] += int(value)
    return out


def steady_watches(cluster, window=4):
    """The apiserver's watches once `window` scrapes a second apart agree (consistent reads
    through kube-fanout open short progress watches, timeoutSeconds=3; clients open theirs over
    a few seconds)."""
    deadline = time.monotonic() + scaled(30)
    seen = [apiserver_watches(cluster)]
    while len(seen) < window or any(w != seen[-1] for w in seen[-window:]):
        assert time.monotonic() < deadline, f"the apiserver's watches keep changing: {seen[-4:]}"
        time.sleep(1)
        seen.append(apiserver_watches(cluster))
    return seen[-1]


class HollowNode:
    """A hollow kubelet and a hollow kube-proxy for one node, against `server`."""

    def __init__(self, cluster, bins, name, server, directory, run):
        self.name = name
        directory.mkdir()
        ca = cluster.env["KF_CA_FILE"]
        kubelet_cfg = write_kubeconfig(directory / "kubelet.kubeconfig", server, ca,
                                       issue_cert(cluster, name))
        proxy_cfg = write_kubeconfig(directory / "proxy.kubeconfig", server, ca,
                                     issue_cert(cluster, f"{name}-proxy", "system:kube-proxy"))
        # kubemark makes the kubelet's root directory in /tmp whatever TMPDIR says; stop()
        # removes it.
        env = {}
        self.kubelet = Component(f"hollow-kubelet {name}", bins / "kubemark", [
            "--morph=kubelet", f"--name={name}", f"--kubeconfig={kubelet_cfg}",
            f"--kubelet-port={free_port()}", "--kubelet-read-only-port=0",
            "--use-host-image-service=false", f"--node-labels=kf-cp-run={run}", "--v=1"],
            directory / "kubelet.log", env)
        self.proxy = Component(f"hollow-proxy {name}", bins / "kubemark", [
            "--morph=proxy", f"--name={name}", f"--kubeconfig={proxy_cfg}", "--v=1"],
            directory / "proxy.log", env)

    def components(self):
        return (self.kubelet, self.proxy)

    def ready(self, api):
        """Registered, Ready (as its kubelet reports it) and without taints (node-lifecycle)."""
        for c in self.components():
            c.check_alive()
        node = self.api_node(api)
        if node is None:
            return False
        conditions = {c["type"]: c["status"] for c in node["status"].get("conditions", [])}
        return conditions.get("Ready") == "True" and not node["spec"].get("taints")

    def api_node(self, api):
        resp = api.cluster.request("GET", f"/api/v1/nodes/{self.name}")
        return json.loads(resp.body) if resp.status == 200 else None

    def stop(self, api):
        for c in self.components():
            c.stop()
        remove_root_dir(self.kubelet.log_path)
        api.call("DELETE", f"/api/v1/nodes/{self.name}", expect=(200, 404))
        api.call("DELETE", f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/"
                 f"{self.name}", expect=(200, 404))


def wait_until(what, check, timeout):
    """Polls `check` until true; `what()` describes the wait in the failure."""
    deadline = time.monotonic() + scaled(timeout)
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what()}"
        time.sleep(0.5)


def fanout_caches(cluster, proxy):
    """kube-fanout's cached resources, and those of them it also caches in protobuf (each with
    its own upstream LIST+WATCH, started by the first client asking for protobuf)."""
    text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
    rows = [dict(re.findall(r'(\w+)="([^"]*)"', k))
            for k in metric_values(text, "kube_fanout_cache_synced")]
    return ({r["resource"] for r in rows},
            collections.Counter(r["resource"] for r in rows if r.get("encoding") == "protobuf"))


def hollow_deployment(api, cluster, ns, run, replicas):
    """A Deployment with one pod per hollow node (required anti-affinity by hostname)."""
    api.call("POST", "/api/v1/namespaces", {"metadata": {"name": ns}}, expect=(201,))
    api.call("POST", f"/api/v1/namespaces/{ns}/serviceaccounts",
             {"metadata": {"name": "default"}}, expect=(201,))
    # The ServiceAccount token volume's CA (root-ca-certificate-publisher's job, which would
    # write it into every namespace of the shared cluster).
    api.call("POST", f"/api/v1/namespaces/{ns}/configmaps", {
        "metadata": {"name": "kube-root-ca.crt"},
        "data": {"ca.crt": pathlib.Path(cluster.env["KF_CA_FILE"]).read_text()}},
        expect=(201,))
    labels = {"app": "hollow-web"}
    api.call("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", {
        "metadata": {"name": "web"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {
                     "nodeSelector": {"kf-cp-run": run}, "schedulerName": SCHEDULER_NAME,
                     "affinity": {"podAntiAffinity": {
                         "requiredDuringSchedulingIgnoredDuringExecution": [{
                             "labelSelector": {"matchLabels": labels},
                             "topologyKey": "kubernetes.io/hostname"}]}},
                     "containers": [{"name": "c", "image": "registry.invalid/none:1"}]}}}},
        expect=(201,))


@pytest.fixture(scope="module")
def hollow(cluster, tmp_path_factory):
    bins = kubernetes_bin_dir()
    api = Api(cluster)
    base = tmp_path_factory.mktemp("hollow")
    run = f"h{free_port()}"
    ns = f"kf-cp-{run}"
    proxy = start_fanout(cluster, base / "proxy")
    (base / "components").mkdir()
    components = start_components(cluster, bins, cluster.url, base / "components",
                                  MODES["watchlist-h2"])
    nodes = []
    out = {"watches": {}, "fanout_watches": {}, "connections": {}, "pods": {}}

    def running(names):
        """True once each of the nodes runs its pod (the kubelet reports it Running)."""
        for c in components + [c for n in nodes for c in n.components()]:
            c.check_alive()
        pods = api.items(f"/api/v1/namespaces/{ns}/pods")
        out["pods"] = {p["spec"].get("nodeName"): p["status"].get("phase") for p in pods}
        return all(out["pods"].get(n) == "Running" for n in names)

    def start(how, server, port, count):
        started = []
        for _ in range(count):
            i = len(nodes)
            node = HollowNode(cluster, bins, f"kf-hollow-{run}-{i}", server, base / f"node{i}",
                              run)
            node.how, node.port = how, port
            nodes.append(node)
            started.append(node)
        for node in started:
            wait_until(lambda: f"{node.name} Ready", lambda: node.ready(api), 60)
        names = [n.name for n in started]
        wait_until(lambda: f"a Running pod on {names}: {out['pods']}", lambda: running(names), 60)
        out["watches"][how] = steady_watches(cluster)
        out["fanout_watches"][how] = fanout_caches(cluster, proxy)[1]

    try:
        out["watches"]["baseline"] = steady_watches(cluster)
        hollow_deployment(api, cluster, ns, run, 1 + HOLLOW_THROUGH)
        # One node direct, alone, so that the watches it adds at the apiserver are its own.
        start("direct", cluster.url, cluster.port, 1)
        start("through", proxy.server, proxy.secure_port, HOLLOW_THROUGH)
        out["ready_replicas"] = api.call(
            "GET", f"/apis/apps/v1/namespaces/{ns}/deployments/web")["status"].get("readyReplicas")
        for node in nodes:
            out["connections"][node.name] = (node.how, {
                c.name.split()[0]: tcp_connections(c.process.pid, node.port)
                for c in node.components()})
        out["cached"], _ = fanout_caches(cluster, proxy)
        # Stopped, their watches end and kube-fanout logs them.
        for node in nodes:
            node.stop(api)
        out["metrics"] = quiesced(cluster, proxy)
        out["requests"] = requests_by_component(proxy.log_lines(), HOLLOW_AGENTS)
        yield out, nodes
    finally:
        for node in nodes:
            node.stop(api)
        for c in components:
            c.stop()
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        code = proxy.stop()
        assert code == 0, f"kube-fanout exited with {code}; log:\n{proxy.log_tail()}"


def test_hollow_kubelets_run_pods_through_kube_fanout(hollow):
    out, nodes = hollow
    assert out["pods"] == {n.name: "Running" for n in nodes}
    assert out["ready_replicas"] == len(nodes)
    w, own = out["watches"], out["fanout_watches"]
    direct = w["direct"] - w["baseline"]
    # What the apiserver gained when the nodes behind kube-fanout started, less kube-fanout's own
    # new upstream watches (a protobuf cache per resource they asked for in protobuf).
    fanout = own["through"] - own["direct"]
    through = w["through"] - w["direct"] - fanout
    write_report("hollow-nodes.txt", [
        "connections per hollow node process (to the apiserver direct, to kube-fanout through):",
        *(f"   {name} {how}: {c}" for name, (how, c) in out["connections"].items()),
        f"apiserver watches of the direct hollow node: {dict(direct)}",
        f"apiserver watches of {HOLLOW_THROUGH} hollow nodes through kube-fanout: {dict(through)}",
        f"kube-fanout's own upstream watches they started (protobuf caches): {dict(fanout)}",
        f"== requests of the {HOLLOW_THROUGH} hollow nodes through kube-fanout:",
        *request_table(out["requests"])])
    # A node's agents hold as many connections through kube-fanout as direct: HTTP/2 carries
    # all of an agent's requests and watches on one.
    reference = [c for how, c in out["connections"].values() if how == "direct"]
    assert all(c == reference[0] for _, c in out["connections"].values()), out["connections"]

    # The setup happened: the direct node's kubelet and kube-proxy watch pods, nodes, services
    # and EndpointSlices at the apiserver.
    for resource in ("pods", "nodes", "services", "endpointslices.discovery.k8s.io"):
        assert direct[resource] >= 1, direct
    # Through kube-fanout, the nodes hold no watch at the apiserver: everything their kubelets
    # and kube-proxies watch is in kube-fanout's default cache. kube-fanout's own upstream
    # watches grow with the kinds asked for, not with the nodes: one protobuf cache each.
    assert not through, (through, out["cached"])
    assert all(n == 1 and r in direct for r, n in fanout.items()), (fanout, direct)
    # Their pods, nodes, services... came from the cache, in protobuf, over HTTP/2.
    cached = [e for entries in out["requests"].values() for e in entries if e["route"] == "cache"]
    assert {(e["verb"], e["resource"]) for e in cached} >= {
        ("watch", "pods"), ("watch", "nodes"), ("watch", "services"), ("watch", "configmaps"),
        ("watch", "endpointslices.discovery.k8s.io"), ("watch", "csidrivers.storage.k8s.io"),
        ("watch", "runtimeclasses.node.k8s.io"), ("watch", "servicecidrs.networking.k8s.io")}
    assert {e["protocol"] for entries in out["requests"].values() for e in entries} == {"h2"}
    assert out["metrics"]["protobuf"][""] == len(cached)
