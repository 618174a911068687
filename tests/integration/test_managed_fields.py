"""An operator's dropManagedFields flow schema: its reads from the cache leave out managedFields.

A flow schema of `--admission-config` with `dropManagedFields: true` (docs/fidelity.md, "The
managedFields opt-out") makes what the cache answers its flows (GET, LIST, WATCH and WatchList,
JSON, protobuf and the metadata-only form) the apiserver's answer to the same request with
`metadata.managedFields` taken out: the apiserver's own bytes less that member, nothing else
changed. Every other flow gets the apiserver's answer byte for byte, managedFields kept.
Compared here with the real apiserver's answers to the same reads by the same user.
"""
import json
import re

import pytest

from kfrig import Proxy, read_events, scaled
from test_cache import namespace_factory  # noqa: F401
from test_protobuf import (PROTO, field, fields, frame_event, list_items, open_watch,
                           read_frames, unknown)

ADMISSION_CONFIG = """
apiVersion: kube-fanout.io/v1alpha1
kind: AdmissionConfiguration
priorityLevels:
- name: everyone
  limited: {concurrencyShares: 10}
flowSchemas:
- name: log-shippers
  priorityLevel: everyone
  matchingPrecedence: 100
  rules: [{users: ["kf-alice"]}]
  dropManagedFields: true
- name: everyone-else
  priorityLevel: everyone
  matchingPrecedence: 9000
"""
META_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


@pytest.fixture(scope="module")
def shipped(cluster, namespace_factory, tmp_path_factory):  # noqa: F811
    """(namespace, kube-fanout): ConfigMaps alice and bob may read, made by two managers."""
    ns = namespace_factory()
    cluster.kubectl("create", "role", "cm-reader", "--verb=get,list,watch",
                    "--resource=configmaps", "-n", ns)
    cluster.kubectl("create", "rolebinding", "cm-readers", "--role=cm-reader",
                    "--user=kf-alice", "--user=kf-bob", "-n", ns)
    for i in range(4):
        cluster.kubectl("create", "configmap", f"cm{i}", f"--from-literal=k={i}", "-n", ns)
    cluster.kubectl("label", "configmap", "cm0", "tier=front", "-n", ns)  # A second manager.
    directory = tmp_path_factory.mktemp("managed-fields")
    config = directory / "admission.yaml"
    config.write_text(ADMISSION_CONFIG)
    p = Proxy.start(cluster, directory, extra_args=["--cache-resources=configmaps",
                                                    f"--admission-config={config}"])
    yield ns, p
    assert p.stop() == 0, p.log_tail()


def read(cluster, path, who, port=None, accept="application/json"):
    res = cluster.request("GET", path, identity=who, port=port, headers={"Accept": accept})
    assert res.status == 200, (path, who, res.status, res.body[:300])
    return res.body


def json_without_managed_fields(body, objects):
    """`body` less each object's `,"managedFields":[...]` as Go wrote it (checked present)."""
    assert objects, "nothing to compare"
    for obj in objects:
        managed = obj["metadata"]["managedFields"]
        assert managed, obj["metadata"]["name"]
        member = b',"managedFields":' + json.dumps(managed, separators=(",", ":")).encode()
        assert member in body, (member, body[:400])  # (Objects made in one second share it.)
        body = body.replace(member, b"", 1)
    return body


def list_rv_aside(body):
    """A JSON list with its own resourceVersion blanked (both caches' RVs move with others'
    writes); the items' are kept."""
    return re.sub(rb'^(\{"kind":"[A-Za-z]+List","apiVersion":"[^"]+","metadata":\{'
                  rb'"resourceVersion":")\d+', rb"\1", body, count=1)


def test_a_dropping_flows_json_reads_are_the_apiservers_less_managed_fields(cluster, shipped):
    ns, p = shipped
    base = f"/api/v1/namespaces/{ns}/configmaps"
    for path in [f"{base}?resourceVersion=0", base, f"{base}?labelSelector=tier"]:
        direct = read(cluster, path, "alice")
        items = json.loads(direct)["items"]
        assert len(items) == (1 if "tier" in path else 4)
        expected = list_rv_aside(json_without_managed_fields(direct, items))
        assert list_rv_aside(read(cluster, path, "alice", p.secure_port)) == expected, path
    direct = read(cluster, f"{base}/cm0", "alice")
    assert len(json.loads(direct)["metadata"]["managedFields"]) == 2  # create and label
    ours = read(cluster, f"{base}/cm0", "alice", p.secure_port)
    assert ours == json_without_managed_fields(direct, [json.loads(direct)])
    # The metadata-only form, of the object without them.
    direct = read(cluster, f"{base}?resourceVersion=0", "alice", accept=META_LIST)
    expected = list_rv_aside(json_without_managed_fields(direct, json.loads(direct)["items"]))
    ours = read(cluster, f"{base}?resourceVersion=0", "alice", p.secure_port, accept=META_LIST)
    assert b"PartialObjectMetadataList" in ours and list_rv_aside(ours) == expected
    # Another flow: the apiserver's answer, managedFields kept, byte for byte.
    assert read(cluster, f"{base}/cm0", "bob", p.secure_port) == read(cluster, f"{base}/cm0",
                                                                      "bob")
    # What the cache does not answer (YAML) is the apiserver's, whole.
    assert b"managedFields:" in read(cluster, f"{base}/cm0", "alice", p.secure_port,
                                     accept="application/yaml")


def varint_bytes(n):
    out = bytearray()
    while True:
        b, n = n & 0x7f, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def rebuild(message, change):
    """`message` with each length-delimited field whose number `change` names replaced by
    change[number](value) (None drops it); every other field's bytes kept."""
    out = b""
    for number, wire, value in fields(message):
        if wire == 2 and number in change:
            value = change[number](value)
            if value is None:
                continue
        if wire == 0:
            out += varint_bytes(number << 3) + varint_bytes(value)
        elif wire == 2:
            out += varint_bytes(number << 3 | 2) + varint_bytes(len(value)) + value
        else:
            out += varint_bytes(number << 3 | wire) + value
    return out


def proto_object_without(message):
    """An object's message with ObjectMeta (field 1) less managedFields (field 17)."""
    meta = field(message, 1)
    assert any(n == 17 for n, _, _ in fields(meta)), "no managedFields to take out"
    return rebuild(message, {1: lambda m: rebuild(m, {17: lambda _: None})})


def test_a_dropping_flows_protobuf_reads_are_the_apiservers_less_managed_fields(cluster,
                                                                                shipped):
    ns, p = shipped
    base = f"/api/v1/namespaces/{ns}/configmaps"
    direct = read(cluster, f"{base}/cm1", "alice", accept=PROTO)
    kind, raw = unknown(direct)
    assert kind == "ConfigMap"
    expected = b"k8s\0" + rebuild(direct[4:], {2: proto_object_without})
    assert read(cluster, f"{base}/cm1", "alice", p.secure_port, accept=PROTO) == expected
    direct_items, _, _ = list_items(read(cluster, f"{base}?resourceVersion=0", "alice",
                                         accept=PROTO))
    ours_items, _, _ = list_items(read(cluster, f"{base}?resourceVersion=0", "alice",
                                       p.secure_port, accept=PROTO))
    assert len(direct_items) == 4
    assert ours_items == [proto_object_without(i) for i in direct_items]
    bob = read(cluster, f"{base}/cm1", "bob", p.secure_port, accept=PROTO)
    assert bob == read(cluster, f"{base}/cm1", "bob", accept=PROTO) and bob != expected


def test_a_dropping_flows_watches_carry_the_objects_less_managed_fields(cluster, shipped):
    ns, p = shipped
    base = f"/api/v1/namespaces/{ns}/configmaps"
    watchlist = (f"{base}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                 "&allowWatchBookmarks=true")
    conn, resp = open_watch(cluster, p.secure_port, watchlist, "application/json", "alice")
    pconn, presp = open_watch(cluster, p.secure_port,
                              f"{base}?watch=1&fieldSelector=metadata.name%3Dcm3", PROTO, "alice")
    try:
        initial = [json.loads(ln) for ln in read_events(resp, 5, scaled(10))]
        assert [e["type"] for e in initial] == ["ADDED"] * 4 + ["BOOKMARK"], initial
        for e in initial[:4]:
            name = e["object"]["metadata"]["name"]
            direct = read(cluster, f"{base}/{name}", "alice")
            stripped = json_without_managed_fields(direct, [json.loads(direct)])
            assert json.dumps(e["object"], separators=(",", ":")).encode() == stripped.strip(), name
        cluster.kubectl("annotate", "configmap", "cm3", "shipped=yes", "-n", ns)
        [live] = [json.loads(ln) for ln in read_events(resp, 1, scaled(10))]
        direct = read(cluster, f"{base}/cm3", "alice")
        assert live["type"] == "MODIFIED"
        assert len(json.loads(direct)["metadata"]["managedFields"]) == 2
        assert json.dumps(live["object"], separators=(",", ":")).encode() == \
            json_without_managed_fields(direct, [json.loads(direct)]).strip()
        frames = read_frames(presp, 2, scaled(10))
        assert [frame_event(f)[0] for f in frames] == ["ADDED", "MODIFIED"], frames
        direct = read(cluster, f"{base}/cm3", "alice", accept=PROTO)
        assert frame_event(frames[1])[2] == proto_object_without(unknown(direct)[1])
    finally:
        conn.close()
        pconn.close()
