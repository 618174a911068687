"""Helpers for the tests that run real agents (rsyslog, Prometheus' Kubernetes discovery,
kube-state-metrics) beside direct on the rig: objects, tokens, binaries, apiserver costs."""
import contextlib
import json
import shlex
import subprocess
import time
import types

from kfrig import ROOT, Proxy, metric_values


def apply(cluster, items):
    cluster.kubectl("apply", "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": items}), timeout=120)


def bound_token(cluster, ns, service_account, pod):
    """A token of `service_account` bound to `pod` (TokenRequest: the token names its node)."""
    body = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                       "spec": {"expirationSeconds": 3600,
                                "boundObjectRef": {"kind": "Pod", "apiVersion": "v1",
                                                   "name": pod}}})
    resp = cluster.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{service_account}"
                           "/token", body=body, headers={"Content-Type": "application/json"})
    assert resp.status == 201, resp.body
    return json.loads(resp.body)["status"]["token"]


def agents_bin(name):
    """The path of an agent built by tests/cluster/build-bins (gomod/agents; the rig's `up` runs
    it, so once the cluster is up this only finds them)."""
    done = subprocess.run([str(ROOT / "tests/cluster/build-bins")], capture_output=True,
                          text=True, check=True)
    for line in done.stdout.splitlines():
        if line.startswith("export KF_BIN_AGENTS="):
            return shlex.split(line.split("=", 1)[1])[0] + "/" + name
    raise AssertionError(f"build-bins printed no KF_BIN_AGENTS:\n{done.stdout}")


def apiserver_cost(cluster, resources):
    """The apiserver's requests to `resources` by verb and resource, and its 429s."""
    text = cluster.request("GET", "/metrics").body.decode()
    out = {}
    for labels, value in metric_values(text, "apiserver_request_total").items():
        resource = labels.split('resource="')[1].split('"')[0] if 'resource="' in labels else ""
        verb = labels.split('verb="')[1].split('"')[0]
        if resource in resources:
            out[f"{verb} {resource}"] = out.get(f"{verb} {resource}", 0) + value
        if 'code="429"' in labels:
            out["429"] = out.get("429", 0) + value
    return out


def cost_since(cluster, resources, before):
    after = apiserver_cost(cluster, resources)
    return {k: after[k] - before.get(k, 0) for k in sorted(after) if after[k] - before.get(k, 0)}


def served_watches(cluster, resources):
    """Watches of `resources` the apiserver is serving now."""
    text = cluster.request("GET", "/metrics").body.decode()
    return sum(v for labels, v in metric_values(text, "apiserver_longrunning_requests").items()
               if 'verb="WATCH"' in labels
               and any(f'resource="{r}"' in labels for r in resources))


def restart_proxy(proxy, cluster):
    """kube-fanout stopped (SIGTERM) and started again with the same command line (same
    ports); returns the new Proxy once it is ready."""
    assert proxy.stop() == 0
    log = open(proxy.log_path, "ab")
    process = subprocess.Popen(proxy.process.args, stdout=log, stderr=subprocess.STDOUT)
    again = Proxy(process, proxy.port, proxy.secure_port, proxy.log_path)
    again.wait_ready(cluster)
    return again


def stop_all(procs):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + 10
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def direct_then_through(cluster, proxy, resources, start, wait, started):
    """Agents started with `start(url, label)` straight to the apiserver, then others through
    `proxy`, each appended to `started` at once (to be stopped even if it never settles); after
    each, `wait(agents)` returns the seconds until they settled. Returns what each start cost the
    apiserver: {label: {seconds, requests by verb and resource, watches served once settled}}."""
    figures = {}
    for label, url in (("direct", cluster.url), ("through", proxy.server)):
        before, watches = apiserver_cost(cluster, resources), served_watches(cluster, resources)
        started.append(start(url, label))
        took = wait(started[-1])
        time.sleep(1)  # The watches an agent opens after its lists: those it holds once settled.
        figures[label] = {"seconds": round(took, 1),
                          "apiserver": cost_since(cluster, resources, before),
                          "watches": served_watches(cluster, resources) - watches}
    return figures


@contextlib.contextmanager
def kube_fanout_and_agents(cluster, directory):
    """kube-fanout (started in directory/kf) and the agents a test starts: yields a namespace with
    `proxy` (replace it when restarting it) and `agents` (append each, with its `procs`); on the way
    out the agents stop, then kube-fanout, which must exit 0."""
    (directory / "kf").mkdir()
    run = types.SimpleNamespace(proxy=Proxy.start(cluster, directory / "kf"), agents=[])
    try:
        yield run
    finally:
        stop_all([p for agent in run.agents for p in agent.procs])
        assert run.proxy.stop() == 0
