"""The in-cluster manifests (deploy/kubernetes/overlays/in-cluster) against the real apiserver.

Every overlay's rendering and dry run: test_operate.py."""
import json
import pathlib
import time

from kfrig import Proxy, metric_values

MANIFEST = pathlib.Path(__file__).resolve().parents[2] / "deploy/kubernetes/overlays/in-cluster"


def test_manifest_is_accepted_by_the_apiserver(cluster):
    out = cluster.kubectl("apply", "--dry-run=server", "-k", str(MANIFEST))
    assert out.stdout.count("(server dry run)") == 8


def start_as(cluster, tmp_path, service_account):
    """kube-fanout with a token of kube-system's `service_account` as its own identity."""
    token = cluster.kubectl("create", "token", service_account,
                            "-n", "kube-system").stdout.strip()
    token_file = tmp_path / "token"
    token_file.write_text(token)
    return Proxy.start(cluster, tmp_path, upstream_args=[
        f"--upstream={cluster.url}", f"--upstream-ca-file={cluster.env['KF_CA_FILE']}",
        f"--upstream-token-file={token_file}"])


def test_the_manifests_rbac_is_enough_for_every_cache(cluster, tmp_path):
    # kube-fanout running as the manifest's ServiceAccount, with only its ClusterRole, syncs
    # every default cache (and is ready), and serves a cached read.
    cluster.kubectl("apply", "-k", str(MANIFEST))
    p = start_as(cluster, tmp_path, "kube-fanout")
    try:
        ready = cluster.request("GET", "/readyz?verbose", port=p.port, tls=False)
        assert ready.status == 200
        assert b"[+]cache-sync ok" in ready.body
        got = cluster.request("GET", "/api/v1/namespaces?resourceVersion=0", port=p.secure_port)
        assert got.status == 200 and json.loads(got.body)["kind"] == "NamespaceList"
        # From the cache: the manifest's identity may review the client (system:auth-delegator).
        text = cluster.request("GET", "/metrics", port=p.port, tls=False).body.decode()
        assert metric_values(text, "kube_fanout_cache_requests_total")['{verb="list"}'] == 1
        assert metric_values(text, "kube_fanout_access_reviews_total")['{result="allowed"}'] >= 1
        assert not any('"level":"error"' in l or "list failed" in l for l in p.log_lines())
    finally:
        assert p.stop() == 0


def test_without_system_auth_delegator_kube_fanout_warns_and_serves_nothing_from_the_cache(
        cluster, tmp_path):
    # An identity that may list and watch (the manifest's ClusterRole) but not review clients:
    # kube-fanout says so at start, and cached reads pass through rather than being served to
    # clients it could not check.
    cluster.kubectl("apply", "-k", str(MANIFEST))
    cluster.kubectl("create", "serviceaccount", "kf-no-delegation", "-n", "kube-system",
                    check=False)
    cluster.kubectl("create", "clusterrolebinding", "kf-no-delegation",
                    "--clusterrole=kube-fanout", "--serviceaccount=kube-system:kf-no-delegation",
                    check=False)
    p = start_as(cluster, tmp_path, "kf-no-delegation")
    try:
        assert cluster.request("GET", "/readyz", port=p.port, tls=False).status == 200
        got = cluster.request("GET", "/api/v1/namespaces?resourceVersion=0", port=p.secure_port)
        assert got.status == 200 and json.loads(got.body)["kind"] == "NamespaceList"
        text = cluster.request("GET", "/metrics", port=p.port, tls=False).body.decode()
        assert metric_values(text, "kube_fanout_cache_requests_total")['{verb="list"}'] == 0
        assert metric_values(text, "kube_fanout_token_reviews_total")['{result="error"}'] >= 1
        deadline = time.monotonic() + 10
        while not any("system:auth-delegator" in line for line in p.log_lines()):
            assert time.monotonic() < deadline, p.log_tail()
            time.sleep(0.1)
    finally:
        assert p.stop() == 0
