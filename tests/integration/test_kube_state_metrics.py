"""kube-state-metrics (from its module, built by tests/cluster/build-bins) through kube-fanout and
directly: the same samples after a few changes, and its sharded mode.

One instance runs against the apiserver and one through kube-fanout over TLS with a
ServiceAccount token; both export pods, nodes, services, namespaces, configmaps and
EndpointSlices (all cached by kube-fanout). Their /metrics must carry the same samples for this
test's objects, after creates, updates and deletes. Sharded (`--shard`, `--total-shards=2`),
kube-state-metrics lists and watches every object and keeps those whose uid hashes (FNV-64a,
jump hash) to its shard: it asks the apiserver for no shardSelector. The two shards through
kube-fanout together export what the unsharded one does.
"""
import json
import subprocess
import time
import uuid

import pytest

from kfagents import agents_bin, direct_then_through, kube_fanout_and_agents, served_watches
from kfrig import free_port, scaled

RESOURCES = ("pods", "nodes", "services", "namespaces", "configmaps", "endpointslices")


@pytest.fixture(scope="module")
def ksm_world(cluster):
    ksm = agents_bin("kube-state-metrics")  # The rig's build-bins has built it.
    tag = uuid.uuid4().hex[:8]
    ns = f"kf-ksm-{tag}"
    cluster.kubectl("create", "namespace", ns)
    cluster.kubectl("create", "serviceaccount", "default", "-n", ns)
    cluster.kubectl("create", "serviceaccount", "ksm", "-n", ns)
    cluster.kubectl("create", "clusterrole", ns, "--verb=list,watch",
                    "--resource=pods,nodes,services,namespaces,configmaps,"
                    "endpointslices.discovery.k8s.io")
    cluster.kubectl("create", "clusterrolebinding", ns, f"--clusterrole={ns}",
                    f"--serviceaccount={ns}:ksm")
    nodes = [f"kf-ksm-{tag}-node-{n}" for n in range(3)]
    for node in nodes:
        cluster.kubectl("create", "-f", "-", input=json.dumps(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}))
    for i in range(6):
        cluster.kubectl("create", "configmap", f"cm-{i}", f"--from-literal=k={i}", "-n", ns)
        cluster.kubectl("create", "-f", "-", "-n", ns, input=json.dumps(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod-{i}"},
             "spec": {"nodeName": nodes[i % 3], "containers": [
                 {"name": "main", "image": "registry.k8s.io/pause",
                  "resources": {"requests": {"cpu": f"{i + 1}00m"}}}]}}))
    cluster.kubectl("create", "service", "clusterip", "svc-0", "--tcp=80:8080", "-n", ns)
    resp = cluster.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/ksm/token",
                           body=json.dumps({"apiVersion": "authentication.k8s.io/v1",
                                            "kind": "TokenRequest", "spec": {}}),
                           headers={"Content-Type": "application/json"})
    assert resp.status == 201, resp.body
    yield {"ksm": ksm, "tag": tag, "ns": ns, "nodes": nodes,
           "token": json.loads(resp.body)["status"]["token"]}
    cluster.kubectl("delete", "pods", "--all", "-n", ns, "--grace-period=0", "--force",
                    "--wait=false", timeout=120)
    cluster.kubectl("delete", "namespace", ns, "--wait=false")
    cluster.kubectl("delete", "clusterrolebinding,clusterrole", ns, check=False)
    cluster.kubectl("delete", "nodes", *nodes, "--wait=false", check=False)


class Ksm:
    def __init__(self, cluster, world, directory, url, shard_args=()):
        directory.mkdir()
        kubeconfig = directory / "kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {
                "server": url, "certificate-authority": cluster.env["KF_CA_FILE"]}}],
            "users": [{"name": "u", "user": {"token": world["token"]}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
        self.port = free_port()
        self.cluster = cluster
        self.process = subprocess.Popen(
            [world["ksm"], f"--kubeconfig={kubeconfig}", "--host=127.0.0.1", f"--port={self.port}",
             "--telemetry-host=127.0.0.1", f"--telemetry-port={free_port()}",
             f"--resources={','.join(RESOURCES)}",
             "--metric-labels-allowlist=pods=[changed],nodes=[zone]", *shard_args],
            stdout=open(directory / "log", "wb"), stderr=subprocess.STDOUT)
        self.procs = [self.process]

    def samples(self, tag):
        """The sample lines that name this test's objects (its namespace or nodes)."""
        assert self.process.poll() is None, "kube-state-metrics exited"
        try:
            resp = self.cluster.request("GET", "/metrics", port=self.port, tls=False,
                                        identity="anonymous")
        except OSError:
            return set()
        if resp.status != 200:
            return set()
        return {line for line in resp.body.decode().splitlines()
                if line and not line.startswith("#") and tag in line}


def settle(cluster, world, instances, expect, timeout=45):
    """Seconds until `expect(samples of each instance)` holds; fails after `timeout`."""
    start = time.monotonic()
    deadline = start + scaled(timeout)
    while time.monotonic() < deadline:
        got = [k.samples(world["tag"]) for k in instances]
        if expect(got):
            return time.monotonic() - start
        time.sleep(0.2)
    labelled = sorted(line for line in got[0] if "label_" in line or "pod-5" in line)[:20]
    raise AssertionError(f"samples did not settle in {timeout}s: {[len(g) for g in got]}; "
                         f"first instance's labels and pod-5: {labelled}")


def same_and_complete(world, pods=6, configmaps=6):
    """All instances' samples equal, and naming the first `pods` pods, the first `configmaps`
    ConfigMaps and every node."""
    def check(got):
        names = ([f'pod="pod-{i}"' for i in range(pods)] + [f'node="{n}"' for n in world["nodes"]]
                 + [f'configmap="cm-{i}"' for i in range(configmaps)])
        return (all(g == got[0] for g in got)
                and all(any(name in line for line in got[0]) for name in names))
    return check


def changes(cluster, world):
    ns = world["ns"]
    cluster.kubectl("label", "pod", "pod-0", "changed=yes", "-n", ns)
    cluster.kubectl("delete", "pod", "pod-5", "-n", ns, "--grace-period=0", "--force")
    cluster.kubectl("delete", "configmap", "cm-5", "-n", ns)
    cluster.kubectl("create", "configmap", "cm-new", "--from-literal=k=new", "-n", ns)
    cluster.kubectl("label", "node", world["nodes"][0], "zone=a")
    cluster.kubectl("create", "service", "clusterip", "svc-new", "--tcp=81:8081", "-n", ns)


def test_kube_state_metrics_through_kube_fanout_matches_direct(cluster, ksm_world, tmp_path):
    with kube_fanout_and_agents(cluster, tmp_path) as run:
        figures = direct_then_through(
            cluster, run.proxy, RESOURCES,
            lambda url, label: Ksm(cluster, ksm_world, tmp_path / label, url),
            lambda ksm: settle(cluster, ksm_world, [ksm], same_and_complete(ksm_world)),
            run.agents)
        instances = run.agents
        direct, through = instances
        # Each settled on its own; both complete and equal before their samples are compared
        # (on a busy machine one may still be listing a kind the other has).
        settle(cluster, ksm_world, instances, same_and_complete(ksm_world))
        samples = direct.samples(ksm_world["tag"])
        assert len(samples) > 50 and samples == through.samples(ksm_world["tag"])
        changes(cluster, ksm_world)
        figures["changes"] = round(settle(
            cluster, ksm_world, instances,
            lambda got: same_and_complete(ksm_world, pods=5, configmaps=5)(got)
            and any('pod="pod-0"' in line and 'label_changed="yes"' in line for line in got[0])
            and any('label_zone="a"' in line for line in got[0])
            and not any('pod="pod-5"' in line for line in got[0])
            and not any('configmap="cm-5"' in line for line in got[0])
            and any('configmap="cm-new"' in line for line in got[0])), 1)
        figures["samples"] = len(through.samples(ksm_world["tag"]))
        print(json.dumps(figures, sort_keys=True))
        # One instance: kube-fanout's protobuf caches start at its first protobuf request (one
        # upstream list and watch per resource), so through costs the apiserver as many watches
        # as direct, no more; more instances add none (the sharded test).
        assert figures["through"]["watches"] <= figures["direct"]["watches"], figures


def test_kube_state_metrics_shards_through_kube_fanout_add_up(cluster, ksm_world, tmp_path):
    with kube_fanout_and_agents(cluster, tmp_path) as run:
        instances = run.agents
        instances.append(Ksm(cluster, ksm_world, tmp_path / "whole", run.proxy.server))
        # pod-5 is there unless the other test deleted it.
        settle(cluster, ksm_world, instances, same_and_complete(ksm_world, pods=5, configmaps=5))
        time.sleep(1)  # Its watches, opened after its lists.
        watches = served_watches(cluster, RESOURCES)
        for shard in range(2):
            instances.append(Ksm(cluster, ksm_world, tmp_path / f"shard-{shard}",
                                 run.proxy.server,
                                 shard_args=(f"--shard={shard}", "--total-shards=2")))

        def union_is_whole(got):
            return (got[0] and got[1] and got[2] and got[1] | got[2] == got[0]
                    and not got[1] & got[2])
        took = settle(cluster, ksm_world, instances, union_is_whole)
        time.sleep(1)
        shards = [len(k.samples(ksm_world["tag"])) for k in instances]
        added = served_watches(cluster, RESOURCES) - watches
        print(json.dumps({"samples": shards, "seconds": round(took, 1), "watches added": added}))
        assert added == 0, added  # Served from kube-fanout's watches.
        # Its own hash: every request it sent (kube-fanout's access log) names no shardSelector.
        log = run.proxy.log_path.read_text(errors="replace")
        assert "kube-state-metrics" in log and "shardSelector" not in log
