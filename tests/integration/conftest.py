"""Fixtures for integration tests: the real control plane (tests/cluster/up) and kube-fanout.

The control plane is started once per test session in a temporary directory (or reused from
$KF_CLUSTER_DIR when a caller already started one) and stopped at the end. Under pytest-xdist
(`-n N --dist loadfile`, as tests/run runs it) each worker is a session of its own: its own
control plane, kube-fanouts, ports and temporary files. A module's tests stay on one worker,
except those of SPLIT (no module fixtures; minutes of waiting on timeouts), which go one by one;
the longest modules start first (LONGEST_FIRST), so that no worker starts one near the end.

A test marked `alone` measures time or load, or needs most of the machine: it runs while no
other test runs, in this session or in any other that shares $KF_TEST_LOCK_DIR (tests/run gives
its two concurrent pytest runs one; under xdist without it the workers share one of their own).
"""
import contextlib
import fcntl
import json
import os
import pathlib
import shutil
import tempfile
import time
import uuid

import pytest

import kfrig
from kfrig import Proxy, control_plane

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Modules whose tests share no module fixture and wait minutes in all (timeouts that are the
# point of the test): under xdist each test is scheduled on its own.
SPLIT = ("test_limits.py", "test_faults.py", "test_rates.py")
# Modules by their serial time, longest first (the others follow in collection order).
LONGEST_FIRST = SPLIT + ("test_warm_restart.py", "test_cache.py", "test_http2.py",
                         "test_load_agents.py", "test_operate.py", "test_shield.py",
                         "test_identity.py", "test_http2_attacks.py", "test_control_plane.py",
                         "test_replicas.py")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "alone: runs while no other test runs (it measures time or load, or needs "
        "most of the machine)")
    # The xdist controller makes the workers' shared lock directory before it starts them (they
    # inherit its environment); a worker or a plain session uses what it was given, if anything.
    if config.pluginmanager.hasplugin("xdist") and config.getoption("numprocesses", None) \
            and "PYTEST_XDIST_WORKER" not in os.environ and "KF_TEST_LOCK_DIR" not in os.environ:
        os.environ["KF_TEST_LOCK_DIR"] = _made_lock_dir[0] = tempfile.mkdtemp(
            prefix="kf-test-locks-")


_made_lock_dir = [None]  # The lock directory this process made, removed at its end.


def pytest_unconfigure(config):
    if _made_lock_dir[0]:
        shutil.rmtree(_made_lock_dir[0], ignore_errors=True)


@contextlib.contextmanager
def _flock(path, mode):
    with open(path, "a") as f:
        fcntl.flock(f, mode)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def _turn(alone):
    """A test's turn: shared with every other test, or exclusive for an `alone` one.

    A readers-writer lock of two files: `rig` is held shared by each running test and
    exclusively by an `alone` test; `turnstile` is passed through on the way in, and an `alone`
    test holds it while it waits for the running tests to finish, so that new tests queue behind
    it instead of starving it."""
    directory = os.environ.get("KF_TEST_LOCK_DIR")
    if not directory:
        yield
        return
    turnstile, rig = (pathlib.Path(directory) / name for name in ("turnstile", "rig"))
    if alone:
        with _flock(turnstile, fcntl.LOCK_EX), _flock(rig, fcntl.LOCK_EX):
            yield
        return
    with contextlib.ExitStack() as held:
        with _flock(turnstile, fcntl.LOCK_EX):
            held.enter_context(_flock(rig, fcntl.LOCK_SH))
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Setup, call and teardown of each test in its turn (see `alone`); with KF_TEST_TIMELINE
    set, one JSON line per test there (worker, when it asked for its turn, began, ended) to see
    where a run's time goes (tests/tools/timeline)."""
    asked = time.time()
    with _turn(item.get_closest_marker("alone") is not None):
        began = time.time()
        yield
    path = os.environ.get("KF_TEST_TIMELINE")
    if path:
        line = json.dumps({"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
                           "test": item.nodeid, "asked": asked, "began": began,
                           "ended": time.time()})
        with open(path, "a") as f:  # One short write per line: whole under O_APPEND.
            f.write(line + "\n")


def pytest_runtest_logreport(report):
    if report.failed:
        kfrig.TEST_FAILED = True  # This process's control planes are kept for a post-mortem.


@pytest.fixture(scope="session")
def cluster():
    with control_plane("KF_CLUSTER_DIR", "kf-cluster-") as c:
        yield c


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


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` with SPLIT's tests one by one, in collection order (LONGEST_FIRST)."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling  # pylint: disable=import-outside-toplevel

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            module = nodeid.split("::", 1)[0]
            return nodeid if pathlib.PurePath(module).name in SPLIT else module

    config.option.loadscopereorder = False  # Collection order: LONGEST_FIRST.
    return ModuleScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """LONGEST_FIRST, `alone` tests last; against a chain of tiers only the tests of cached_proxy run (the others
    start their own)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def key(item):  # Stable: else as found.
        alone = item.get_closest_marker("alone") is not None
        # `alone` tests last, when the other workers are finishing anyway: SPLIT's at the end of
        # the run, the others at the end of their module (its fixtures set up once).
        return (alone and item.path.name in SPLIT, rank.get(item.path.name, len(rank)), alone)

    items.sort(key=key)
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
            # No self-check (Proxy.start's default, test_self_check.py tests it).
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
