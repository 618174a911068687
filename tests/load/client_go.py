"""The client-go fleet for run-load (--client-go-agents N): real client-go v0.36.3 agents, many
in one process (tests/clients/informer/fleet, built by tests/clients/build-informer --fleet),
beside kf_load's C++ agents and under its churn.

Each agent connects as a kubelet and kube-proxy do: its own transport and TLS connection with
its own client certificate (system:node:node-I in system:nodes, issued by the fleet from the
cluster's client CA; plus a group the fleet binds to system:node-proxier for EndpointSlices),
HTTP/2, protobuf, WatchList, and seven informers (its pods, its Node, Services, EndpointSlices,
one ConfigMap its pods mount, CSIDrivers, RuntimeClasses). The agents start evenly over
--client-go-ramp seconds, spread over kf_load's nodes (node-0 .. node-(kubelets-1)).

What it reports (the fleet's JSON, `client_go` in a mode's results): agents synced and time to
sync, requests without an answer by kind (handshake, eof_reset, refused, timeout), 429s, LISTs
(WatchLists that fell back), events, write->handler latency per kind; and here, from run-load's
/proc samples of the process that serves the agents (kube-apiserver direct, kube-fanout
otherwise): its CPU during the connect ramp per agent and its RSS growth per agent after it.
"""
import json
import pathlib
import subprocess

import harness

ROOT = pathlib.Path(__file__).resolve().parents[2]
SETTLE_S = 5  # after the ramp, before the connect window's end: the last agents' initial lists


def binary():
    """The fleet from the informer module's one `go build` (instant when cached)."""
    out = subprocess.run([str(ROOT / "tests/clients/build-informer"), "--fleet"], check=True,
                         capture_output=True, text=True, timeout=1800).stdout.strip()
    return pathlib.Path(out.splitlines()[-1])


def run_seconds(s):
    """The fleet runs as long as kf_load plans to: its ramp, the churn and the drain."""
    return harness.agents(s) / max(s["ramp_rate"], 1) + s["duration"] + s["drain"]


def command(fleet_bin, s, agents, ramp, target, env, out):
    """The fleet's command line for one mode."""
    cmd = [str(fleet_bin), f"--server={target}", f"--apiserver={env['KF_APISERVER_URL']}",
           f"--ca-file={env['KF_CA_FILE']}", f"--client-ca-cert={env['KF_CA_FILE']}",
           f"--client-ca-key={env['KF_CA_KEY_FILE']}", f"--admin-token={env['KF_ADMIN_TOKEN']}",
           f"--agents={agents}", f"--nodes={max(s['kubelets'], 1)}", f"--ramp={ramp:g}",
           f"--duration={run_seconds(s):g}", f"--out={out}"]
    if s["configmaps_per_kubelet"] > 0:  # kf_load's pods mount lcm-0 .. lcm-(K-1)
        cmd.append("--configmap=lcm-0")
    return cmd


def connect_cost(raw, t_start, ramp, agents):
    """From one process's [(t, cpu seconds so far, rss MiB)] samples (t relative to the same
    origin as t_start): CPU ms per agent over [t_start, t_start + ramp + SETTLE_S] and RSS KiB
    per agent from the last sample before t_start to the first after that window."""
    before = [r for r in raw if r[0] <= t_start]
    end = t_start + ramp + SETTLE_S
    after = [r for r in raw if r[0] >= end]
    if not before or not after or agents <= 0:
        return {"cpu_ms_per_agent": None, "rss_kib_per_agent": None}
    b, a = before[-1], after[0]
    return {"cpu_ms_per_agent": round((a[1] - b[1]) * 1000 / agents, 2),
            "rss_kib_per_agent": round((a[2] - b[2]) * 1024 / agents, 1),
            "window_s": round(a[0] - b[0], 1)}


def read_result(path):
    try:
        return json.loads(pathlib.Path(path).read_text())
    except (OSError, ValueError) as e:
        return {"error": f"no fleet result in {path}: {e}"}
