"""Fixtures for integration tests: the real control plane (tests/cluster/up) and kube-fanout.

The control plane is started once per test session in a temporary directory (or reused from
$KF_CLUSTER_DIR when a caller already started one) and stopped at the end.
"""
import os
import pathlib
import subprocess
import tempfile

import pytest

from kfrig import Cluster, Proxy, free_port

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


@pytest.fixture(scope="session")
def cached_proxy(cluster, tmp_path_factory):
    """kube-fanout with its default cached resources."""
    p = Proxy.start(cluster, tmp_path_factory.mktemp("cached-proxy"))
    yield p
    code = p.stop()
    assert code == 0, f"kube-fanout exited with {code}; log:\n{p.log_tail()}"


@pytest.fixture
def namespace(cluster):
    """A fresh namespace per test, deleted afterwards (without waiting)."""
    name = f"kf-it-{free_port()}"
    cluster.kubectl("create", "namespace", name)
    # The rig runs no controller-manager, so nothing creates the default ServiceAccount that
    # Pod admission asks for.
    cluster.kubectl("create", "serviceaccount", "default", "-n", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false")
