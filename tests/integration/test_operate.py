"""Ready to operate: the image, the manifests, a real Prometheus, the alert rules.

- The OCI image deploy/image/build makes (no container engine): its configuration, its
  filesystem, and kube-fanout run from it against the real apiserver.
- Every kustomize overlay in deploy/kubernetes/ rendered by kubectl and accepted by the real
  apiserver (server-side dry run); the base's config file run by kube-fanout itself.
- Debian's Prometheus scraping kube-fanout's --metrics-listen port: every query of the Grafana
  dashboard returns data, every alert rule evaluates, every metric they name exists.
- promtool checks and unit-tests the alert rules.
"""
import contextlib
import http.client
import json
import os
import pathlib
import re
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from kfrig import BINARY, SANITIZER, Proxy, free_port, metric_values, scaled

ROOT = pathlib.Path(__file__).resolve().parents[2]
IMAGE = ROOT / "build/image/oci"
OVERLAYS = ROOT / "deploy/kubernetes/overlays"
MONITORING = ROOT / "deploy/monitoring"


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def http_get(port, path, timeout=5):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def ready(port):
    try:
        return http_get(port, "/readyz")[0] == 200
    except OSError:
        return False


@contextlib.contextmanager
def running(argv, directory, metrics):
    """kube-fanout started with `argv`, ready on its metrics port; yields its log's path and
    checks that SIGTERM ends it cleanly."""
    log_path = directory / "kube-fanout.log"
    proc = subprocess.Popen(argv, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: proc.poll() is not None or ready(metrics), scaled(20), "readyz")
        assert proc.poll() is None, log_path.read_text()
        yield log_path
    finally:
        proc.terminate()
        assert proc.wait(timeout=scaled(20)) == 0


# --- the image ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def image():
    """The OCI layout deploy/image/build made from the binary under test (rebuilt if older)."""
    if SANITIZER:
        # deploy/image/build writes build/image (the ci image); a sanitized binary there would
        # outlive the run, and in the image's chroot its reports could not reach the log dir.
        pytest.skip("the image ships the ci build, not a sanitized one (docs/sanitizers.md)")
    index = IMAGE / "index.json"
    if not index.exists() or index.stat().st_mtime < BINARY.stat().st_mtime:
        subprocess.run([str(ROOT / "deploy/image/build"), str(BINARY)], check=True,
                       capture_output=True)
    layout = IMAGE

    def blob(digest):
        return (layout / "blobs" / digest.replace(":", "/")).read_bytes()

    index_doc = json.loads(index.read_text())
    desc = next(m for m in index_doc["manifests"]
                if m["annotations"]["org.opencontainers.image.ref.name"] == "dev")
    manifest = json.loads(blob(desc["digest"]))
    config = json.loads(blob(manifest["config"]["digest"]))
    return {"manifest": manifest, "config": config}


def in_image(rootfs, *argv):
    """Runs argv inside the unpacked image's filesystem as the image's user (65532)."""
    cmd = ["chroot", "--userspec=65532:65532", str(rootfs), *argv]
    if os.geteuid() != 0:
        cmd = ["unshare", "--user", "--map-root-user", *cmd]
    return cmd


@pytest.fixture(scope="module")
def rootfs(image, tmp_path_factory):
    bundle = tmp_path_factory.mktemp("image") / "bundle"
    subprocess.run(["umoci", "unpack", "--rootless", "--image", f"{IMAGE}:dev", str(bundle)],
                   check=True, capture_output=True)
    return bundle


def test_the_image_runs_kube_fanout_as_a_non_root_user(image, rootfs):
    cfg = image["config"]
    assert cfg["os"] == "linux" and cfg["architecture"] == "amd64"
    assert cfg["config"]["User"] == "65532:65532"
    assert cfg["config"]["Entrypoint"] == ["/usr/local/bin/kube-fanout"]
    assert len(image["manifest"]["layers"]) == 1
    size = sum(layer["size"] for layer in image["manifest"]["layers"])
    assert 1 << 20 < size < 64 << 20, f"image layer {size} bytes"
    # The runtime spec umoci derives from it says the same.
    spec = json.loads((rootfs / "config.json").read_text())
    assert spec["process"]["user"]["uid"] == 65532 and spec["process"]["user"]["gid"] == 65532
    assert spec["process"]["args"] == ["/usr/local/bin/kube-fanout"]
    fs = rootfs / "rootfs"
    assert (fs / "usr/local/bin/kube-fanout").is_file()
    assert "nonroot:x:65532:65532" in (fs / "etc/passwd").read_text()
    # No shell, no package manager: only the binary, its libraries and a few files in /etc.
    for absent in ("bin/sh", "usr/bin", "bin/bash", "usr/bin/dpkg", "sbin"):
        assert not (fs / absent).exists(), absent
    version = subprocess.run(in_image(fs, "/usr/local/bin/kube-fanout", "--version"),
                             capture_output=True, text=True, timeout=30)
    assert version.returncode == 0, version.stderr
    host = subprocess.run([str(BINARY), "--version"], capture_output=True, text=True, check=True)
    assert version.stdout == host.stdout
    assert re.fullmatch(r"kube-fanout \d+\.\d+\.\d+( \(git [^)]+\))?\n", version.stdout)


def test_kube_fanout_from_the_image_serves_the_real_apiserver(cluster, rootfs, tmp_path):
    # Only the image's files: the libraries it ships, TLS to the apiserver with the CA and a
    # token copied into its /tmp.
    fs = rootfs / "rootfs"
    shutil.copy(cluster.env["KF_CA_FILE"], fs / "tmp/ca.crt")
    (fs / "tmp/token").write_text(cluster.env["KF_ADMIN_TOKEN"])
    for name in ("ca.crt", "token"):
        os.chmod(fs / "tmp" / name, 0o644)
    port, metrics = free_port(), free_port()
    argv = in_image(fs, "/usr/local/bin/kube-fanout", f"--upstream={cluster.url}",
                    "--upstream-ca-file=/tmp/ca.crt", "--upstream-token-file=/tmp/token",
                    f"--listen=127.0.0.1:{port}", f"--metrics-listen=127.0.0.1:{metrics}",
                    "--cache-resources=namespaces")
    with running(argv, tmp_path, metrics):
        got = cluster.request("GET", "/api/v1/namespaces?resourceVersion=0", port=port, tls=False)
        assert got.status == 200 and json.loads(got.body)["kind"] == "NamespaceList"
        assert any(n["metadata"]["name"] == "default" for n in json.loads(got.body)["items"])


# --- the manifests ------------------------------------------------------------------------


def kustomize(cluster, overlay):
    out = subprocess.run([cluster.env["KF_KUBECTL"], "kustomize", str(OVERLAYS / overlay)],
                         capture_output=True, text=True, check=True, timeout=60)
    return out.stdout, [d for d in yaml.safe_load_all(out.stdout) if d]


EXPECTED = {
    "in-cluster": {"ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 2,
                   "ConfigMap": 1, "Service": 1, "Deployment": 1, "PodDisruptionBudget": 1},
    "tier": {"ServiceAccount": 2, "ClusterRole": 2, "ClusterRoleBinding": 4, "ConfigMap": 2,
             "Service": 2, "Deployment": 2, "PodDisruptionBudget": 2},
    "sidecar": {"ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 2, "ConfigMap": 1,
                "Deployment": 1},
}


@pytest.mark.parametrize("overlay", sorted(EXPECTED))
def test_every_overlay_renders_and_the_apiserver_accepts_it(cluster, overlay):
    text, docs = kustomize(cluster, overlay)
    kinds = {}
    for d in docs:
        kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
    assert kinds == EXPECTED[overlay]
    if overlay == "sidecar":
        made = cluster.kubectl("create", "namespace", "monitoring", check=False)
        assert made.returncode == 0 or "AlreadyExists" in made.stderr, made.stderr
    out = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=text)
    assert out.stdout.count("(server dry run)") == len(docs), out.stdout


def containers_of(deployment):
    spec = deployment["spec"]["template"]["spec"]
    return spec.get("initContainers", []) + spec["containers"]


def test_the_in_cluster_service_is_highly_available(cluster):
    _, docs = kustomize(cluster, "in-cluster")
    by_kind = {d["kind"]: d for d in docs}
    dep, pdb, svc = by_kind["Deployment"], by_kind["PodDisruptionBudget"], by_kind["Service"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert dep["spec"]["replicas"] >= 3
    assert dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    term = dep["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"].items() <= labels.items()
    kf = containers_of(dep)[0]
    assert kf["resources"]["requests"]["cpu"] and kf["resources"]["requests"]["memory"]
    assert kf["securityContext"]["runAsNonRoot"] and kf["securityContext"]["readOnlyRootFilesystem"]


def test_the_tier_below_uses_the_first_as_its_upstream(cluster):
    _, docs = kustomize(cluster, "tier")
    deps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    svcs = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    assert set(deps) == {"kube-fanout", "kube-fanout-edge"}
    edge_args = containers_of(deps["kube-fanout-edge"])[0]["args"]
    assert "--upstream=https://kube-fanout.kube-system.svc:443" in edge_args
    assert not any(a.startswith("--upstream") for a in containers_of(deps["kube-fanout"])[0]["args"])
    # Each Service selects its own tier's pods only.
    for name, svc in svcs.items():
        pods = deps[name]["spec"]["template"]["metadata"]["labels"]
        other = deps[({"kube-fanout", "kube-fanout-edge"} - {name}).pop()]
        assert svc["spec"]["selector"].items() <= pods.items()
        assert not svc["spec"]["selector"].items() <= \
            other["spec"]["template"]["metadata"]["labels"].items()


def test_a_tier_below_syncs_from_the_first_and_serves_its_events(cluster, namespace, tmp_path):
    # The tier overlay's edge, run with its own arguments and config file, its upstream the
    # top kube-fanout (here on loopback, its certificate from the rig's CA) and its identity
    # the edge ServiceAccount with only the edge's RBAC (its ClusterRole, system:auth-delegator).
    _, docs = kustomize(cluster, "tier")
    edge_rbac = [d for d in docs if d["metadata"]["name"].endswith("-edge")
                 and d["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")]
    assert sorted(d["metadata"]["name"] for d in edge_rbac) == [
        "kube-fanout-edge", "kube-fanout-edge", "kube-fanout-edge",
        "kube-fanout:auth-delegator-edge"]
    assert all(s["name"] == "kube-fanout-edge" for d in edge_rbac for s in d.get("subjects", []))
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(edge_rbac))
    token = cluster.kubectl("create", "token", "kube-fanout-edge", "-n", "kube-system").stdout
    (tmp_path / "token").write_text(token.strip())
    edge = next(d for d in docs if d["kind"] == "Deployment"
                and d["metadata"]["name"] == "kube-fanout-edge")
    config = next(d for d in docs if d["kind"] == "ConfigMap"
                  and d["metadata"]["name"].startswith("kube-fanout-config-edge-"))
    (tmp_path / "config.yaml").write_text(config["data"]["config.yaml"])
    (tmp_path / "top").mkdir()
    top = Proxy.start(cluster, tmp_path / "top")
    try:
        args = containers_of(edge)[0]["args"]
        assert args[0] == "--config=/etc/kube-fanout/config/config.yaml"
        upstream = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in args[1:]}
        assert set(upstream) == {"--upstream", "--upstream-ca-file", "--upstream-token-file"}
        crt, key = cluster.issue_serving_cert(tmp_path)
        secure, metrics = free_port(), free_port()
        argv = [str(BINARY), f"--config={tmp_path / 'config.yaml'}",
                f"--upstream=https://127.0.0.1:{top.secure_port}",
                f"--upstream-ca-file={cluster.env['KF_CA_FILE']}",
                f"--upstream-token-file={tmp_path / 'token'}",
                f"--secure-listen=127.0.0.1:{secure}", f"--metrics-listen=127.0.0.1:{metrics}",
                f"--tls-cert-file={crt}", f"--tls-private-key-file={key}",
                f"--cache-snapshot-dir={tmp_path / 'snapshots'}"]
        with running(argv, tmp_path, metrics) as log_path:
            assert b"[+]cache-sync ok" in http_get(metrics, "/readyz?verbose")[1]
            # The edge's reflectors are the top's watchers, one per cached resource.
            _, top_metrics = http_get(top.port, "/metrics")
            assert metric_values(top_metrics.decode(), "kube_fanout_cache_requests_total")[
                '{verb="watch"}'] >= 8
            watch = cluster.connection(secure, timeout=30)
            watch.request("GET", f"/api/v1/namespaces/{namespace}/configmaps?watch=1"
                          "&resourceVersion=0&timeoutSeconds=30",
                          headers={"Authorization": f"Bearer {cluster.token('admin')}"})
            resp = watch.getresponse()
            assert resp.status == 200
            cluster.kubectl("create", "configmap", "through-two-tiers", "-n", namespace)
            line = json.loads(resp.readline())
            assert line["type"] == "ADDED"
            assert line["object"]["metadata"]["name"] == "through-two-tiers"
            watch.close()
            lines = log_path.read_text().splitlines()
            assert not any('"level":"error"' in l for l in lines)
    finally:
        assert top.stop() == 0


def test_the_sidecar_listens_on_loopback_as_the_pods_own_service_account(cluster):
    _, docs = kustomize(cluster, "sidecar")
    dep = next(d for d in docs if d["kind"] == "Deployment")
    kf = next(c for c in containers_of(dep) if c["name"] == "kube-fanout")
    assert kf.get("restartPolicy") == "Always"  # A native sidecar.
    assert "--listen=127.0.0.1:8001" in kf["args"]
    assert not any(a.startswith(("--upstream", "--kubeconfig")) for a in kf["args"])
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == "prometheus-agent"
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    agent = yaml.safe_load(cm["data"]["prometheus.yml"])
    servers = {sd["api_server"] for job in agent["scrape_configs"]
               for sd in job["kubernetes_sd_configs"]}
    assert servers == {"http://127.0.0.1:8001"}


def test_the_sidecars_flags_and_the_agents_rbac_are_enough_for_its_caches(cluster, tmp_path):
    # The sidecar's own arguments, run as the agent's ServiceAccount with only its
    # ClusterRole: every cache syncs (kube-fanout becomes ready) and a cached read is served.
    text, docs = kustomize(cluster, "sidecar")
    made = cluster.kubectl("create", "namespace", "monitoring", check=False)
    assert made.returncode == 0 or "AlreadyExists" in made.stderr, made.stderr
    cluster.kubectl("apply", "-f", "-", input=text)
    dep = next(d for d in docs if d["kind"] == "Deployment")
    kf = next(c for c in containers_of(dep) if c["name"] == "kube-fanout")
    token = cluster.kubectl("create", "token", "prometheus-agent", "-n", "monitoring").stdout
    (tmp_path / "token").write_text(token.strip())
    port, metrics = free_port(), free_port()
    args = [a for a in kf["args"] if not a.startswith(("--listen=", "--metrics-listen="))]
    assert any(a.startswith("--cache-resources=pods,") for a in args)
    argv = [str(BINARY), *args, f"--listen=127.0.0.1:{port}",
            f"--metrics-listen=127.0.0.1:{metrics}", f"--upstream={cluster.url}",
            f"--upstream-ca-file={cluster.env['KF_CA_FILE']}",
            f"--upstream-token-file={tmp_path / 'token'}"]
    with running(argv, tmp_path, metrics) as log_path:
        status, body = http_get(metrics, "/readyz?verbose")
        assert status == 200 and b"[+]cache-sync ok" in body
        got = cluster.request("GET", "/api/v1/nodes?resourceVersion=0", port=port, tls=False)
        assert got.status == 200 and json.loads(got.body)["kind"] == "NodeList"
        lines = log_path.read_text().splitlines()
        assert not any('"level":"error"' in l or "list failed" in l for l in lines)


def test_the_base_config_file_runs_with_the_api_on_tls_and_metrics_apart(cluster, tmp_path):
    _, docs = kustomize(cluster, "in-cluster")
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    dep = next(d for d in docs if d["kind"] == "Deployment")
    config = yaml.safe_load(cm["data"]["config.yaml"])
    ports = {p["name"]: p["containerPort"] for p in containers_of(dep)[0]["ports"]}
    assert config["secure-listen"].endswith(f":{ports['https']}")
    assert config["metrics-listen"].endswith(f":{ports['metrics']}")
    assert "listen" not in config
    # kube-fanout reads that file; the command line moves the listeners to free loopback
    # ports and the certificate to the rig's (flags win over the file).
    # Snapshots on, in a volume the container mounts.
    mounts = {m["name"]: m["mountPath"] for m in containers_of(dep)[0]["volumeMounts"]}
    volumes = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
    assert "emptyDir" in volumes["cache"]
    assert config["cache-snapshot-dir"].startswith(mounts["cache"] + "/")
    # The graceful stop's three phases fit in the pod's termination grace period.
    stop_phases = ("shutdown-delay-duration", "shutdown-watch-termination-grace-period",
                   "shutdown-grace-period")
    assert all(config[k].endswith("s") for k in stop_phases)
    assert (sum(int(config[k][:-1]) for k in stop_phases)
            < dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"])
    (tmp_path / "config.yaml").write_text(cm["data"]["config.yaml"])
    crt, key = cluster.issue_serving_cert(tmp_path)
    secure, metrics = free_port(), free_port()
    argv = [str(BINARY), f"--config={tmp_path / 'config.yaml'}",
            f"--secure-listen=127.0.0.1:{secure}", f"--metrics-listen=127.0.0.1:{metrics}",
            f"--tls-cert-file={crt}", f"--tls-private-key-file={key}",
            f"--kubeconfig={cluster.env['KF_KUBECONFIG']}",
            f"--cache-snapshot-dir={tmp_path / 'snapshots'}"]
    with running(argv, tmp_path, metrics) as log_path:
        # The metrics listener: health and metrics, nothing else.
        assert http_get(metrics, "/livez") == (200, b"ok")
        status, body = http_get(metrics, "/metrics")
        assert status == 200 and b"kube_fanout_cache_synced" in body
        for path in ("/api/v1/namespaces", "/api", "/version", "/"):
            assert http_get(metrics, path) == (404, b"404 page not found\n"), path
        # The API on TLS.
        got = cluster.request("GET", "/api/v1/namespaces?resourceVersion=0", port=secure)
        assert got.status == 200 and json.loads(got.body)["kind"] == "NamespaceList"
        serving = [json.loads(l) for l in log_path.read_text().splitlines()
                   if '"msg":"serving"' in l]
        assert serving and serving[0]["listen"] == ""  # No plain API listener.


def test_a_plain_listener_off_loopback_is_refused_with_the_way_out_named():
    out = subprocess.run([str(BINARY), "--listen=0.0.0.0:0", "--upstream=https://127.0.0.1:1"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 2
    assert "not a loopback address" in out.stderr and "--allow-insecure-listen" in out.stderr
    assert "--secure-listen" in out.stderr and "--metrics-listen" in out.stderr


# --- Prometheus ---------------------------------------------------------------------------


def test_promtool_checks_and_unit_tests_the_alert_rules():
    check = subprocess.run(["promtool", "check", "rules", str(MONITORING / "alerts.yaml")],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 10 rules found" in check.stdout
    unit = subprocess.run(["promtool", "test", "rules", "alerts_test.yaml"], cwd=MONITORING,
                          capture_output=True, text=True, timeout=60)
    assert unit.returncode == 0, unit.stdout + unit.stderr
    assert "SUCCESS" in unit.stdout


def dashboard_queries():
    dash = json.loads((MONITORING / "kube-fanout-dashboard.json").read_text())
    return [(p["title"], t["expr"]) for p in dash["panels"] for t in p.get("targets", [])]


def metric_names(text):
    return set(re.findall(r"\b((?:kube_fanout|process)_[a-z_]+)", text))


class Prometheus:
    def __init__(self, directory, target_port):
        self.port = free_port()
        config = directory / "prometheus.yml"
        config.write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(MONITORING / "alerts.yaml")],
            "scrape_configs": [{"job_name": "kube-fanout",
                                "static_configs": [{"targets": [f"127.0.0.1:{target_port}"]}]}],
        }))
        self.log_path = directory / "prometheus.log"
        self.process = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={directory / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=open(self.log_path, "wb"), stderr=subprocess.STDOUT)

    def api(self, path, **params):
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as resp:
            doc = json.load(resp)
        assert doc["status"] == "success", doc
        return doc["data"]

    def query(self, expr):
        return self.api("query", query=expr)["result"]

    def ready(self):
        if self.process.poll() is not None:
            raise AssertionError(f"prometheus exited:\n{self.log_path.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def test_prometheus_scrapes_kube_fanout_and_every_dashboard_query_returns_data(
        cluster, namespace, tmp_path):
    metrics = free_port()
    proxy = Proxy.start(cluster, tmp_path, extra_args=[f"--metrics-listen=127.0.0.1:{metrics}"])
    prom = Prometheus(tmp_path, metrics)
    watch = None
    try:
        # Traffic: a watch from the cache that sees events, reads checked by access reviews,
        # and a ServiceAccount polling past its token bucket (20/s, burst 40) into 429s.
        watch = cluster.connection(proxy.secure_port, timeout=30)
        watch.request("GET", f"/api/v1/namespaces/{namespace}/configmaps?watch=1"
                      "&resourceVersion=0&timeoutSeconds=60",
                      headers={"Authorization": f"Bearer {cluster.token('admin')}"})
        watch_resp = watch.getresponse()
        assert watch_resp.status == 200
        for i in range(3):
            cluster.kubectl("create", "configmap", f"cm-{i}", "-n", namespace)
        sa_token = cluster.kubectl("create", "token", "default", "-n", namespace).stdout.strip()
        statuses = []
        conn = cluster.connection(proxy.secure_port)
        for _ in range(80):
            conn.request("GET", f"/api/v1/namespaces/{namespace}/pods",
                         headers={"Authorization": f"Bearer {sa_token}"})
            resp = conn.getresponse()
            resp.read()
            statuses.append(resp.status)
        conn.close()
        assert statuses.count(429) > 0, statuses

        wait_for(prom.ready, 60, "Prometheus ready")
        wait_for(lambda: prom.query('up{job="kube-fanout"} == 1'), 30, "a scrape of kube-fanout")
        # Enough samples for rate() over the dashboard's window.
        wait_for(lambda: prom.query("count_over_time(kube_fanout_requests_total[1m]) >= 5"), 30,
                 "five scrapes")

        queries = dashboard_queries()
        assert len(queries) >= 20
        empty = []
        for title, expr in queries:
            concrete = (expr.replace("$__rate_interval", "1m").replace('"$job"', '"kube-fanout"')
                        .replace('"$instance"', '".+"'))
            if not prom.query(concrete):
                empty.append((title, concrete))
        assert not empty, f"dashboard queries without data: {empty}"

        def value(expr):
            result = prom.query(expr)
            return float(result[0]["value"][1]) if result else 0.0
        assert value('sum(kube_fanout_watchers{resource="configmaps"})') >= 1
        assert value("sum(kube_fanout_cache_synced) == count(kube_fanout_cache_synced)") > 0
        assert value('sum(kube_fanout_events_dispatched_total{resource="configmaps"})') >= 3
        assert value('sum(kube_fanout_upstream_events_total{resource="configmaps"})') >= 3
        assert value('sum(kube_fanout_upstream_watches_total{resource="configmaps"})') >= 1
        assert value('sum(kube_fanout_access_reviews_total{result="allowed"})') >= 1
        by_flow = prom.query('sum by (flow_schema, reason) '
                             '(kube_fanout_admission_rejected_requests_total)')
        assert [(r["metric"]["reason"], float(r["value"][1])) for r in by_flow] == \
            [("rate-limited", statuses.count(429))], by_flow
        assert by_flow[0]["metric"]["flow_schema"]

        # Every metric the dashboard and the alert rules name is one kube-fanout exports.
        exported = set(prom.api("label/__name__/values"))
        named = metric_names((MONITORING / "kube-fanout-dashboard.json").read_text()) | \
            metric_names((MONITORING / "alerts.yaml").read_text())
        assert named and named <= exported, named - exported
        # promtool's lint of the exposition: names, units, _total counters, HELP and TYPE.
        _, body = http_get(metrics, "/metrics")
        lint = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True,
                              timeout=30)
        assert lint.returncode == 0, lint.stdout + lint.stderr

        # The alert rules load and evaluate against the real series; none fires on a healthy
        # replica (those with a `for` would be pending first).
        wait_for(lambda: all(r.get("lastEvaluation", "").startswith("2")
                             and r["health"] == "ok"
                             for g in prom.api("rules")["groups"] for r in g["rules"]),
                 30, "every rule evaluated")
        rules = [r for g in prom.api("rules")["groups"] for r in g["rules"]]
        assert len(rules) == 10
        active = {r["name"]: r["state"] for r in rules if r["state"] != "inactive"}
        assert set(active) <= {"KubeFanoutTooManyRequests"}, active
    finally:
        if watch is not None:
            watch.close()
        prom.stop()
        assert proxy.stop() == 0
