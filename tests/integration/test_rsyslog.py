"""A real log shipper at DaemonSet scale: rsyslog's Kubernetes metadata module (Debian's
rsyslog-kubernetes, mmkubernetes) through kube-fanout and directly to the apiserver.

Fifty rsyslogd instances on ten nodes share one ServiceAccount, as a DaemonSet's pods do, each
with a token bound to its own pod (so the token names its node). Each reads the container logs
of the application pods on its node (/var/log/containers-style file names: pod, namespace,
container and id) and annotates every record with the pod's and namespace's metadata: one GET of
the namespace and one of each pod, consistent reads over TLS. The fleet starts at once with the
logs already there, as after a fleet-wide restart. Through kube-fanout, with its default
admission, no lookup may get a 429 (one would leave records without their metadata for good),
every record must carry its pod's labels and uid, the fleet must finish about as fast as
directly, and the apiserver must see fewer reads. The figures are printed for docs/load.md.
"""
import json
import os
import shutil
import signal
import subprocess
import time
import uuid

import pytest

from kfagents import apply, bound_token
from kfrig import Proxy, metric_values, scaled

RSYSLOGD = shutil.which("rsyslogd") or "/usr/sbin/rsyslogd"
MMKUBERNETES = "/usr/lib/x86_64-linux-gnu/rsyslog/mmkubernetes.so"
NODES, SHIPPERS_PER_NODE, PODS_PER_NODE, LINES = 10, 5, 20, 10
CONTAINER_ID = "c0ffee" * 10 + "c0de"  # 64 hex digits, as a container runtime's.

pytestmark = pytest.mark.skipif(
    not (os.path.exists(RSYSLOGD) and os.path.exists(MMKUBERNETES)),
    reason="rsyslog-kubernetes is not installed (deploy/install-deps)")


@pytest.fixture(scope="module")
def fleet_world(cluster):
    """Ten nodes; on each, five shipper pods (ServiceAccount rsyslog) and 20 labelled
    application pods; one bound token per shipper."""
    tag = uuid.uuid4().hex[:8]
    ns = f"kf-rsyslog-{tag}"
    cluster.kubectl("create", "namespace", ns)
    cluster.kubectl("create", "serviceaccount", "default", "-n", ns)
    cluster.kubectl("create", "serviceaccount", "rsyslog", "-n", ns)
    role = f"kf-rsyslog-{tag}"
    cluster.kubectl("create", "clusterrole", role, "--verb=get,list,watch",
                    "--resource=pods,namespaces")
    cluster.kubectl("create", "clusterrolebinding", role, f"--clusterrole={role}",
                    f"--serviceaccount={ns}:rsyslog")
    nodes = [f"kf-rsyslog-{tag}-node-{n}" for n in range(NODES)]
    apply(cluster, [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}
                    for node in nodes])

    def pod(name, node, labels, sa="default"):
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": ns, "labels": labels},
                "spec": {"nodeName": node, "serviceAccountName": sa,
                         "containers": [{"name": "main", "image": "registry.k8s.io/pause"}]}}

    shippers = [(f"rsyslog-{n}-{s}", nodes[n]) for n in range(NODES)
                for s in range(SHIPPERS_PER_NODE)]
    apps = {node: [f"app-{n}-{p}" for p in range(PODS_PER_NODE)] for n, node in enumerate(nodes)}
    apply(cluster, [pod(name, node, {"app": "rsyslog"}, sa="rsyslog") for name, node in shippers]
          + [pod(name, node, {"app": "web", "index": name, "node": node})
             for node, names in apps.items() for name in names])
    listed = json.loads(cluster.request("GET", f"/api/v1/namespaces/{ns}/pods").body)["items"]
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in listed}
    assert len(uids) == len(shippers) + NODES * PODS_PER_NODE  # The setup happened.
    tokens = {name: bound_token(cluster, ns, "rsyslog", name) for name, _ in shippers}
    yield {"ns": ns, "shippers": shippers, "apps": apps, "uids": uids, "tokens": tokens}
    # Its 250 pods go now (forced: no kubelet confirms), not with the namespace: the rig runs no
    # namespace controller, and a cluster holding them pages the LISTs of later tests.
    cluster.kubectl("delete", "pods", "--all", "-n", ns, "--grace-period=0", "--force",
                    "--wait=false", timeout=120)
    cluster.kubectl("delete", "namespace", ns, "--wait=false")
    cluster.kubectl("delete", "clusterrolebinding,clusterrole", role, check=False)
    cluster.kubectl("delete", "nodes", *nodes, "--wait=false", check=False)


def apiserver_reads(cluster):
    """The apiserver's requests by resource and verb, and its 429s."""
    text = cluster.request("GET", "/metrics").body.decode()
    out = {}
    for labels, value in metric_values(text, "apiserver_request_total").items():
        resource = labels.split('resource="')[1].split('"')[0] if 'resource="' in labels else ""
        verb = labels.split('verb="')[1].split('"')[0]
        if resource in ("pods", "namespaces"):
            out[f"{verb} {resource}"] = out.get(f"{verb} {resource}", 0) + value
        if 'code="429"' in labels:
            out["429"] = out.get("429", 0) + value
    return out


def run_fleet(cluster, world, base, url, timeout=120):
    """Starts one rsyslogd per shipper pointed at `url`, waits until every record is written
    (or `timeout`), stops them. Returns (seconds to the last record, records per shipper)."""
    procs = []
    ns = world["ns"]
    expected = PODS_PER_NODE * LINES
    for name, node in world["shippers"]:
        d = base / name
        (d / "containers").mkdir(parents=True)
        (d / "work").mkdir()
        (d / "token").write_text(world["tokens"][name])
        for app in world["apps"][node]:
            with open(d / "containers" / f"{app}_{ns}_main-{CONTAINER_ID}.log", "w") as f:
                for i in range(LINES):
                    f.write(json.dumps({"log": f"{app} line {i}\n", "stream": "stdout",
                                        "time": "2026-01-01T00:00:00Z"}) + "\n")
        rule = (f"rule=:{d}/containers/%pod_name:char-to:_%_%namespace_name:char-to:_%_"
                "%container_name_and_id:char-to:.%.log")
        (d / "rsyslog.conf").write_text(f"""
global(workDirectory="{d}/work")
module(load="imfile" mode="polling" pollingInterval="1")
module(load="mmkubernetes")
template(name="record" type="list") {{ property(name="$!all-json") constant(value="\\n") }}
input(type="imfile" file="{d}/containers/*.log" tag="kube" addMetadata="on" ruleset="k8s")
ruleset(name="k8s") {{
  action(type="mmkubernetes" kubernetesUrl="{url}" tls.caCert="{cluster.env['KF_CA_FILE']}"
         tokenFile="{d}/token" filenameRules="{rule}")
  action(type="omfile" file="{d}/out.json" template="record")
}}
""")
    start = time.monotonic()
    for name, _ in world["shippers"]:
        d = base / name
        procs.append(subprocess.Popen([RSYSLOGD, "-n", "-f", str(d / "rsyslog.conf"),
                                       "-i", str(d / "rsyslogd.pid")],
                                      stdout=open(d / "stderr", "wb"), stderr=subprocess.STDOUT))
    done_at = None
    deadline = start + scaled(timeout)
    try:
        while time.monotonic() < deadline:
            counts = [count_lines(base / name / "out.json") for name, _ in world["shippers"]]
            if all(c >= expected for c in counts):
                done_at = time.monotonic()
                break
            assert all(p.poll() is None for p in procs), "an rsyslogd exited early"
            time.sleep(0.1)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    records = {name: read_records(base / name / "out.json") for name, _ in world["shippers"]}
    return (done_at - start if done_at else None), records


def count_lines(path):
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def read_records(path):
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def annotated(world, records):
    """Records carrying their pod's uid and labels and their namespace (the shipper's lookups
    succeeded), out of all."""
    good = 0
    for r in records:
        k = r.get("kubernetes", {})
        pod = k.get("pod_name", "")
        if (k.get("pod_id") == world["uids"].get(pod) and k.get("labels", {}).get("index") == pod
                and k.get("namespace_id")):
            good += 1
    return good


def cache_answers(cluster, proxy):
    """The requests kube-fanout answered from its cache."""
    text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
    return metric_values(text, "kube_fanout_requests_total").get('{route="cache"}', 0)


def refused_by_proxy(proxy):
    """The 429s kube-fanout answered, from its access log."""
    n = 0
    for line in proxy.log_lines():
        if '"request"' in line and '"status":429' in line.replace(" ", ""):
            n += 1
    return n


def test_a_daemonset_of_rsyslog_shippers_is_served_without_429s(cluster, fleet_world, tmp_path):
    # kube-fanout as deployed: its default admission and consistent-read interval.
    (tmp_path / "kf").mkdir()
    proxy = Proxy.start(cluster, tmp_path / "kf",
                        extra_args=["--consistent-read-passthrough-interval=1s"])
    try:
        results = {}
        for label, url in (("direct", cluster.url), ("through", proxy.server)):
            before = apiserver_reads(cluster)
            refused_before = refused_by_proxy(proxy)
            cached_before = cache_answers(cluster, proxy)
            took, records = run_fleet(cluster, fleet_world, tmp_path / label, url)
            after = apiserver_reads(cluster)
            cost = {k: after.get(k, 0) - before.get(k, 0) for k in after
                    if after.get(k, 0) - before.get(k, 0)}
            total = sum(len(r) for r in records.values())
            good = sum(annotated(fleet_world, r) for r in records.values())
            results[label] = {"seconds": took, "records": total, "annotated": good,
                              "apiserver": cost,
                              "proxy_429": refused_by_proxy(proxy) - refused_before,
                              "cache_answers": cache_answers(cluster, proxy) - cached_before}
            print(f"{label}: {json.dumps(results[label], sort_keys=True)}")
        expected = len(fleet_world["shippers"]) * PODS_PER_NODE * LINES
        direct, through = results["direct"], results["through"]
        # The setup happened: directly, every shipper wrote every record, annotated.
        assert direct["seconds"] is not None and direct["annotated"] == expected, direct
        assert direct["apiserver"].get("GET pods", 0) >= len(fleet_world["shippers"])
        # Through kube-fanout: no 429, every record annotated, about as fast.
        assert through["proxy_429"] == 0, through
        assert through["seconds"] is not None, through
        assert through["records"] == through["annotated"] == expected, through
        assert through["seconds"] <= 2 * direct["seconds"] + scaled(5), results
        # And the apiserver read less: the lookups were answered from the cache, but for the
        # consistent GETs that go straight to it while they come slower than
        # --consistent-get-passthrough-qps (50 a second per resource, its default): at the
        # fleet's start and tail, more of them on a busy machine.
        upstream_gets = through["apiserver"].get("GET pods", 0)
        assert upstream_gets <= 50 * (through["seconds"] + 1), results
        assert through["cache_answers"] + upstream_gets >= direct["apiserver"]["GET pods"], \
            results
        assert upstream_gets < direct["apiserver"]["GET pods"] / 2, results
    finally:
        assert proxy.stop() == 0
