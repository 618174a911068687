"""deploy/demo as a newcomer meets it: its output piped through `tee`, a certificate kubeconfig that
works through kube-fanout, and Ctrl-C stopping everything it started."""
import os
import pathlib
import re
import signal
import subprocess
import time

from kfrig import BINARY

ROOT = pathlib.Path(__file__).resolve().parents[2]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purpose (its parent has not reaped it yet).
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_ctrl_c_stops_everything_when_the_output_is_piped(tmp_path):
    log = tmp_path / "demo.log"
    log.touch()
    env = dict(os.environ, KF_DEMO_BINARY=str(BINARY))
    # Its own session and process group, as a terminal's foreground job: Ctrl-C is SIGINT to the
    # whole group (the demo, tee, and what they started in that group).
    job = subprocess.Popen(["bash", "-c", f"deploy/demo 2>&1 | tee {log}"], cwd=ROOT, env=env,
                           stdout=subprocess.DEVNULL, start_new_session=True)
    work = None
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and "Ctrl-C stops the demo" not in log.read_text():
            assert job.poll() is None, log.read_text()[-3000:]
            time.sleep(0.5)
        text = log.read_text()
        assert "Ctrl-C stops the demo" in text, text[-3000:]
        # The demo's client certificate was answered through kube-fanout as its own user.
        assert re.search(r"demo-admin", text) and "system:masters" in text, text[-3000:]
        assert "cannot pass through" not in text
        work = pathlib.Path(re.search(r"export KUBECONFIG=(\S+)/kubeconfig-via-kube-fanout",
                                      text).group(1))
        pids = [int(p.read_text().split()[0]) for p in (work / "cluster/run").glob("*.pid")]
        assert len(pids) >= 2, list((work / "cluster/run").iterdir())  # etcd, kube-apiserver
        assert all(alive(p) for p in pids)
        proxy = [int(p) for p in subprocess.run(["pgrep", "-f", "--", f"--tls-cert-file={work}/tls.crt"],
                                                capture_output=True, text=True).stdout.split()]
        assert proxy

        os.killpg(job.pid, signal.SIGINT)
        job.wait(timeout=60)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(alive(p) for p in pids + proxy):
            time.sleep(0.2)
        assert not [p for p in pids + proxy if alive(p)], (work / "demo-stop.log").read_text()
        assert "demo: stopped" in (work / "demo-stop.log").read_text()
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        if work is not None:  # whatever the demo left running when the test failed
            subprocess.run([ROOT / "tests/cluster/down", work / "cluster"], capture_output=True)
            subprocess.run(["pkill", "-f", "--", f"--tls-cert-file={work}/tls.crt"])
