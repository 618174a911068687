"""Fixtures for integration tests: the real control plane (tests/cluster/up) and kube-fanout.

The control plane is started once per test session in a temporary directory (or reused from
$KF_CLUSTER_DIR when a caller already started one) and stopped at the end.
"""
import os
import pathlib
import subprocess
import tempfile
import uuid

import pytest

from kfrig import Cluster, Proxy

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cluster():
    reuse = os.environ.get("KF_CLUSTER_DIR")
    if reuse:
        yield Cluster.load(pathlib.Path(reuse))
        return
    directory = pathlib.Path(tempfile.mkdtemp(prefix="kf-cluster-"))
    subprocess.run([str(ROOT / "tests/cluster/up"), str(directory)], check=True)
    try:
        yield Cluster.load(directory)
    finally:
        subprocess.run([str(ROOT / "tests/cluster/down"), str(directory)], check=True)


@pytest.fixture(scope="session")
def proxy(cluster, tmp_path_factory):
    """kube-fanout as a pure passthrough proxy (no cache), plain and TLS listeners."""
    p = Proxy.start(cluster, tmp_path_factory.mktemp("proxy"), extra_args=["--cache-resources="])
    yield p
    code = p.stop()
    assert code == 0, f"kube-fanout exited with {code}; log:\n{p.log_tail()}"


def fidelity_tiers():
    """KF_FIDELITY_TIERS=N (N > 1): the differential suite runs against the bottom of N tiers."""
    value = os.environ.get("KF_FIDELITY_TIERS", "1")
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"KF_FIDELITY_TIERS must be a positive whole number, got {value!r}")
    return int(value)


def pytest_collection_modifyitems(config, items):
    """Against a chain of tiers only the tests of cached_proxy run (the others start their own)."""
    if fidelity_tiers() == 1:
        return
    keep = [item for item in items if "cached_proxy" in getattr(item, "fixturenames", ())]
    dropped = [item for item in items if item not in keep]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(scope="session")
def cached_proxy(cluster, tmp_path_factory):
    """kube-fanout with its default cached resources.

    With KF_FIDELITY_TIERS=N (N > 1) it is the bottom of a chain of N kube-fanouts, each the
    upstream of the next (the top one's is the apiserver), all with the default cached
    resources: what a client of the bottom tier sees must be what the apiserver answers.
    """
    chain = []
    try:
        for i in range(fidelity_tiers()):
            directory = tmp_path_factory.mktemp(f"cached-proxy-tier{i}")
            upstream = None
            if chain:
                token_file = directory / "upstream-token"
                token_file.write_text(cluster.token("admin"))
                upstream = [f"--upstream=https://127.0.0.1:{chain[-1].secure_port}",
                            f"--upstream-ca-file={cluster.env['KF_CA_FILE']}",
                            f"--upstream-token-file={token_file}"]
            chain.append(Proxy.start(cluster, directory, upstream_args=upstream))
        yield chain[-1]
    finally:
        codes = [(p.stop(), p) for p in reversed(chain)]
        for code, p in codes:
            assert code == 0, f"kube-fanout exited with {code}; log:\n{p.log_tail()}"


@pytest.fixture
def namespace(cluster):
    """A fresh namespace per test, deleted afterwards (without waiting).

    The name is random, not a free port's number: the rig runs no namespace controller, so a
    deleted namespace stays Terminating for the rest of the session; a port number drawn twice
    (a few percent of runs, with ~50 namespaces from 28,232 ports) fails `create namespace`.
    """
    name = f"kf-it-{uuid.uuid4().hex[:12]}"
    cluster.kubectl("create", "namespace", name)
    # The rig runs no controller-manager, so nothing creates the default ServiceAccount that
    # Pod admission asks for.
    cluster.kubectl("create", "serviceaccount", "default", "-n", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false")
