"""Prometheus' Kubernetes service discovery in DaemonSet mode, through kube-fanout and directly.

promsd (tests/cluster/gomod/agents/promsd, built by tests/cluster/build-bins) runs Prometheus'
own discovery/kubernetes Discoverers, as the prometheus binary does, for three scrape jobs:
role pod with `spec.nodeName=NODE` (one agent per node, as a DaemonSet of agents), role node and
role endpointslice (which also watches services and pods); protobuf, over TLS with a token bound
to the agent's pod. One agent per node runs directly against the apiserver and one through
kube-fanout; their targets must be the expected ones (not empty) and identical at start, after
churn (pods and EndpointSlices created, changed and deleted) and after kube-fanout restarts. The
apiserver's requests and watches for each fleet are printed for docs/load.md.
"""
import json
import subprocess
import time
import uuid

import pytest

from kfagents import (agents_bin, apiserver_cost, apply, bound_token, cost_since,
                      direct_then_through, kube_fanout_and_agents, restart_proxy, stop_all)
from kfrig import scaled

NODES, APPS_PER_NODE, SERVICES, ENDPOINTS = 10, 3, 3, 4
RESOURCES = ("pods", "nodes", "services", "endpointslices")


@pytest.fixture(scope="module")
def promsd(cluster):  # pylint: disable=unused-argument
    """Once the cluster is up: the rig's build-bins has built the agents."""
    return agents_bin("promsd")


class World:
    """A namespace, NODES labelled nodes with addresses, pods with IPs and ports on each,
    services with EndpointSlices, and an agent pod (ServiceAccount prometheus) per node."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.tag = uuid.uuid4().hex[:8]
        self.ns = f"kf-promsd-{self.tag}"
        self.nodes = [f"kf-promsd-{self.tag}-node-{n}" for n in range(NODES)]
        self.ip = 0

    def next_ip(self):
        self.ip += 1
        return f"10.{20 + self.ip // 250}.{self.ip % 250}.{1 + self.ip % 7}"

    def create_pods(self, names_and_nodes, sa="default"):
        apply(self.cluster, [{
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": self.ns, "labels": {"app": name[:20]}},
            "spec": {"nodeName": node, "serviceAccountName": sa, "containers": [
                {"name": "main", "image": "registry.k8s.io/pause",
                 "ports": [{"name": "http", "containerPort": 8080}]}]}}
            for name, node in names_and_nodes])
        for name, _ in names_and_nodes:  # No kubelet here: the pod's IP, as one would set it.
            ip = self.next_ip()
            resp = self.cluster.request(
                "PATCH", f"/api/v1/namespaces/{self.ns}/pods/{name}/status",
                body=json.dumps({"status": {"podIP": ip, "podIPs": [{"ip": ip}]}}),
                headers={"Content-Type": "application/merge-patch+json"})
            assert resp.status == 200, resp.body

    def endpoint_slice(self, service, n):
        return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": f"{service}-slice", "namespace": self.ns,
                             "labels": {"kubernetes.io/service-name": service}},
                "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}],
                "endpoints": [{"addresses": [f"10.9.{n}.{i + 1}"],
                               "conditions": {"ready": True}} for i in range(ENDPOINTS + n)]}

    def create_services(self, names):
        apply(self.cluster, [{"apiVersion": "v1", "kind": "Service",
                              "metadata": {"name": s, "namespace": self.ns},
                              "spec": {"ports": [{"name": "http", "port": 8080}]}}
                             for s in names]
              + [self.endpoint_slice(s, 0) for s in names])

    def kubectl(self, *args):
        self.cluster.kubectl(*args, "-n", self.ns, timeout=120)

    def setup(self):
        c = self.cluster
        c.kubectl("create", "namespace", self.ns)
        self.kubectl("create", "serviceaccount", "default")
        self.kubectl("create", "serviceaccount", "prometheus")
        c.kubectl("create", "clusterrole", self.ns, "--verb=get,list,watch",
                  "--resource=pods,nodes,services,endpointslices.discovery.k8s.io")
        c.kubectl("create", "clusterrolebinding", self.ns, f"--clusterrole={self.ns}",
                  f"--serviceaccount={self.ns}:prometheus")
        apply(c, [{"apiVersion": "v1", "kind": "Node",
                   "metadata": {"name": node, "labels": {"kf-promsd": self.tag}},
                   "status": {"addresses": [{"type": "InternalIP", "address": f"10.8.0.{n + 1}"},
                                            {"type": "Hostname", "address": node}]}}
                  for n, node in enumerate(self.nodes)])
        self.create_pods([(f"agent-{n}", node) for n, node in enumerate(self.nodes)],
                         sa="prometheus")
        self.create_pods([(f"app-{n}-{p}", node) for n, node in enumerate(self.nodes)
                          for p in range(APPS_PER_NODE)])
        self.create_services([f"svc-{s}" for s in range(SERVICES)])
        self.tokens = [bound_token(c, self.ns, "prometheus", f"agent-{n}")
                       for n in range(NODES)]

    def teardown(self):
        c = self.cluster
        c.kubectl("delete", "pods", "--all", "-n", self.ns, "--grace-period=0", "--force",
                  "--wait=false", timeout=120)
        c.kubectl("delete", "namespace", self.ns, "--wait=false")
        c.kubectl("delete", "clusterrolebinding,clusterrole", self.ns, check=False)
        c.kubectl("delete", "nodes", *self.nodes, "--wait=false", check=False)

    def expected(self, n):
        """The (job, source) pairs agent `n` must have, each with targets, from the apiserver."""
        c = self.cluster
        pods = json.loads(c.request("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3D"
                                    + self.nodes[n]).body)["items"]
        slices = json.loads(c.request(
            "GET", f"/apis/discovery.k8s.io/v1/namespaces/{self.ns}/endpointslices").body)
        return ({("pods", f"pod/{p['metadata']['namespace']}/{p['metadata']['name']}")
                 for p in pods}
                | {("nodes", f"node/{node}") for node in self.nodes}
                | {("endpointslices", f"endpointslice/{self.ns}/{s['metadata']['name']}")
                   for s in slices["items"]})


@pytest.fixture(scope="module")
def world(cluster):
    w = World(cluster)
    w.setup()
    yield w
    w.teardown()


def config(world, n, url):
    auth = {"api_server": url, "bearer_token_file": f"token-{n}",
            "tls_config": {"ca_file": world.cluster.env["KF_CA_FILE"]}}
    return {"scrape_configs": [
        {"job_name": "pods", "kubernetes_sd_configs": [dict(auth, role="pod", selectors=[
            {"role": "pod", "field": f"spec.nodeName={world.nodes[n]}"}])]},
        {"job_name": "nodes", "kubernetes_sd_configs": [dict(auth, role="node", selectors=[
            {"role": "node", "label": f"kf-promsd={world.tag}"}])]},
        {"job_name": "endpointslices", "kubernetes_sd_configs": [
            dict(auth, role="endpointslice", namespaces={"names": [world.ns]})]}]}


class Fleet:
    """One promsd per node, against `url`."""

    def __init__(self, promsd, world, directory, url):
        self.world, self.dir, self.procs = world, directory, []
        directory.mkdir()
        for n in range(NODES):
            (directory / f"token-{n}").write_text(world.tokens[n])
            (directory / f"sd-{n}.yml").write_text(json.dumps(config(world, n, url)))
            self.procs.append(subprocess.Popen(
                [promsd, f"-config={directory}/sd-{n}.yml", f"-out={directory}/targets-{n}.json"],
                stdout=open(directory / f"log-{n}", "wb"), stderr=subprocess.STDOUT))

    def targets(self, n):
        try:
            return json.loads((self.dir / f"targets-{n}.json").read_text())["jobs"]
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def complete(self, n, expected):
        """Whether agent n has exactly the expected groups, each with targets."""
        jobs = self.targets(n)
        if not jobs or any(p.poll() is not None for p in self.procs):
            assert all(p.poll() is None for p in self.procs), "a promsd exited"
            return False
        got = {(job, source) for job, groups in jobs.items() for source in groups}
        return got == expected and all(g["targets"] for groups in jobs.values()
                                       for g in groups.values())


def wait_complete(world, fleets, timeout=45):
    """Seconds until every agent of every fleet has its expected targets, the same in each fleet
    (fails after `timeout`)."""
    start = time.monotonic()
    deadline = start + scaled(timeout)
    expected = [world.expected(n) for n in range(NODES)]
    while time.monotonic() < deadline:
        # Complete, and the same in every fleet (a changed group keeps its source).
        if (all(f.complete(n, expected[n]) for f in fleets for n in range(NODES))
                and all(f.targets(n) == fleets[0].targets(n) for f in fleets
                        for n in range(NODES))):
            return time.monotonic() - start
        time.sleep(0.1)
    missing = {n: sorted(expected[n] ^ {(j, s) for j, g in (f.targets(n) or {}).items()
                                         for s in g})[:5]
               for f in fleets for n in range(NODES)}
    differ = [n for n in range(NODES) if any(f.targets(n) != fleets[0].targets(n) for f in fleets)]
    raise AssertionError(f"targets incomplete after {timeout}s: {missing}; differ: {differ}")


def assert_identical(direct, through):
    for n in range(NODES):
        assert direct.targets(n) == through.targets(n), n


def churn(world, step):
    """Pods created and deleted on every node; an EndpointSlice changed, one deleted, one
    created with its service."""
    world.create_pods([(f"new-{step}-{n}", node) for n, node in enumerate(world.nodes)])
    world.kubectl("delete", "pods", *[f"app-{n}-{step}" for n in range(NODES)],
                  "--grace-period=0", "--force", "--wait=false")
    apply(world.cluster, [world.endpoint_slice("svc-0", step + 1)])
    world.kubectl("delete", "endpointslice", ("svc-1", "svc-2", "svc-new-0")[step] + "-slice")
    world.create_services([f"svc-new-{step}"])


def resumed_and_relisted(log_lines):
    """The agents' watches kube-fanout answered (its access log): those resuming from a
    resourceVersion, and those that list again (`sendInitialEvents`: client-go's watch-list)."""
    counts = {"resumed": 0, "relisted": 0}
    for line in log_lines:
        entry = json.loads(line)
        if entry.get("msg") == "request" and entry.get("user_agent", "").startswith("Prometheus"):
            if entry["verb"] == "watch":
                counts["relisted" if "sendInitialEvents=true" in entry["uri"] else "resumed"] += 1
    return counts


def test_prometheus_sd_targets_through_kube_fanout_match_direct(cluster, promsd, world,
                                                                tmp_path):
    with kube_fanout_and_agents(cluster, tmp_path) as run:
        figures = direct_then_through(
            cluster, run.proxy, RESOURCES,
            lambda url, label: Fleet(promsd, world, tmp_path / label, url),
            lambda fleet: wait_complete(world, [fleet]), run.agents)
        fleets = run.agents
        direct, through = fleets
        assert_identical(direct, through)
        for step in range(2):
            churn(world, step)
            figures[f"churn {step}"] = round(wait_complete(world, fleets), 1)
            assert_identical(direct, through)
        before = apiserver_cost(cluster, RESOURCES)
        run.proxy = restart_proxy(run.proxy, cluster)
        logged = len(run.proxy.log_lines())  # The restarted kube-fanout's lines from here.
        churn(world, 2)
        figures["after restart"] = {"seconds": round(wait_complete(world, fleets), 1),
                                    "apiserver": cost_since(cluster, RESOURCES, before)}
        assert_identical(direct, through)
        # A watch is logged when it ends: all of them once the agents and kube-fanout stop.
        stop_all(through.procs)
        assert run.proxy.stop() == 0
        figures["after restart"]["agents' watches"] = resumed_and_relisted(
            run.proxy.log_lines()[logged:])
        print(json.dumps(figures, sort_keys=True))
        # The apiserver serves the through fleet's watches from kube-fanout's own.
        assert figures["through"]["watches"] < figures["direct"]["watches"] / 2, figures
