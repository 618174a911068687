"""Node identities' authorization does not grow with the fleet (issue 38, item 5), and every
decision stays the apiserver's.

kube-fanout asks a node's question once for all nodes where the answer cannot depend on which
node asks: the node's own name in the request replaced by a probe node's (a name generated at
start), asked for that probe node; its yes is every node's; its no sends the node's own review
(node_shape.h). Against the rig's real apiserver (Node authorizer, RBAC):

- a differential test over node identities and request shapes: whenever kube-fanout served a
  node from its cache, the apiserver answers that node 200 for the same request; whenever the
  apiserver answers 403, the node gets the apiserver's 403 through kube-fanout, same bytes;
- a count test: N nodes each reading a kubelet's 7 shapes cost about N + 7
  SubjectAccessReviews (one per shape for the probe, one per node for the ConfigMap only its pod
  makes readable), where one review per node and shape cost N x 7.

Each test checks its setup (pods bound, the Node authorizer's graph knows them) first.
"""
import pytest

from kfrig import Proxy, free_port, metric_values
from test_identity import Caller, cache_counts, issue_cert, wait_for


def reviews(cluster, proxy):
    """(SubjectAccessReviews sent, node authorizations answered by the probe's shared yes)."""
    text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
    sent = sum(metric_values(text, "kube_fanout_access_reviews_total").values())
    shared = sum(metric_values(text, "kube_fanout_access_reviews_shared_total").values())
    return sent, shared


def create(admin, cluster, path, body):
    status, data = admin.call(cluster.port, "POST", path, body)
    assert status == 201, (path, status, data)


def node_world(cluster, admin, ns, nodes, pods, groups=None):
    """Nodes, ConfigMaps cm-used and cm-unused, a Secret, and `pods`: {pod: (node, configmap or
    None)}; returns each node's certificate (O=system:nodes and the node's further `groups`)
    once the Node authorizer's graph lets each pod's node read its ConfigMap."""
    cluster.kubectl("create", "namespace", ns)
    cluster.kubectl("create", "serviceaccount", "default", "-n", ns)
    for node in nodes:
        create(admin, cluster, "/api/v1/nodes",
               {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    for name in ("cm-used", "cm-unused"):
        create(admin, cluster, f"/api/v1/namespaces/{ns}/configmaps",
               {"metadata": {"name": name}, "data": {"k": name}})
    create(admin, cluster, f"/api/v1/namespaces/{ns}/secrets",
           {"metadata": {"name": "secret-unused"}, "stringData": {"k": "v"}})
    for pod, (node, configmap) in pods.items():
        volumes = [{"name": "c", "configMap": {"name": configmap}}] if configmap else []
        create(admin, cluster, f"/api/v1/namespaces/{ns}/pods", {
            "metadata": {"name": pod},
            "spec": {"nodeName": node, "volumes": volumes,
                     "containers": [{"name": "c", "image": "registry.invalid/none"}]}})
    groups = groups or {}
    certs = {node: issue_cert(cluster, node, *([f"system:node:{node}", "system:nodes",
                                                *groups[node]] if node in groups else []))
             for node in nodes}
    for pod, (node, configmap) in pods.items():
        if configmap:
            caller = Caller(cluster, node, cert=certs[node])
            wait_for(f"the Node authorizer's graph for {node}", lambda c=caller, m=configmap: c.call(
                cluster.port, "GET", f"/api/v1/namespaces/{ns}/configmaps/{m}")[0] == 200)
    return certs


def start_proxy(cluster, directory, extra_args=()):
    return Proxy.start(cluster, directory, extra_args=[
        f"--client-ca-file={cluster.env['KF_CA_FILE']}",
        f"--proxy-client-cert-file={cluster.env['KF_FRONT_PROXY_CLIENT_CERT']}",
        f"--proxy-client-key-file={cluster.env['KF_FRONT_PROXY_CLIENT_KEY']}", *extra_args])


def bind_group(cluster, group):
    """Binds `group` to system:node-proxier (kube-proxy's role: lists Nodes, Services,
    EndpointSlices), as a fleet whose node certificates carry a further O value does."""
    cluster.kubectl("create", "clusterrolebinding", group.replace(":", "-"),
                    "--clusterrole=system:node-proxier", f"--group={group}")


def cleanup(cluster, proxy, ns, nodes, groups=()):
    code = proxy.stop()
    for group in groups:
        cluster.kubectl("delete", "clusterrolebinding", group.replace(":", "-"), check=False)
    cluster.kubectl("delete", "namespace", ns, "--wait=false")
    for n in nodes:
        cluster.kubectl("delete", "node", n, "--wait=false", check=False)
    assert code == 0, f"kube-fanout exited with {code}; log:\n{proxy.log_tail()}"


def shapes(ns, node, other):
    """What a node may ask, and what it may not: (label, path)."""
    return [
        ("own pods", f"/api/v1/pods?fieldSelector=spec.nodeName%3D{node}"),
        ("own pods (rv=0)", f"/api/v1/pods?fieldSelector=spec.nodeName%3D{node}&resourceVersion=0"),
        ("another node's pods", f"/api/v1/pods?fieldSelector=spec.nodeName%3D{other}"),
        ("all pods", "/api/v1/pods"),
        ("own Node", f"/api/v1/nodes/{node}"),
        ("own Node by selector", f"/api/v1/nodes?fieldSelector=metadata.name%3D{node}"),
        ("another Node", f"/api/v1/nodes/{other}"),
        ("all Nodes", "/api/v1/nodes"),
        ("Services", "/api/v1/services"),
        ("EndpointSlices", "/apis/discovery.k8s.io/v1/endpointslices"),
        ("CSIDrivers", "/apis/storage.k8s.io/v1/csidrivers"),
        ("RuntimeClasses", "/apis/node.k8s.io/v1/runtimeclasses"),
        ("ConfigMap its pod uses", f"/api/v1/namespaces/{ns}/configmaps/cm-used"),
        ("ConfigMap no pod uses", f"/api/v1/namespaces/{ns}/configmaps/cm-unused"),
        ("ConfigMaps", f"/api/v1/namespaces/{ns}/configmaps"),
        ("Secret", f"/api/v1/namespaces/{ns}/secrets/secret-unused"),
        ("Secrets", f"/api/v1/namespaces/{ns}/secrets"),
    ]


def test_every_node_decision_through_kube_fanout_is_the_apiservers(cluster, tmp_path):
    suffix = free_port()
    ns = f"kf-nr-{suffix}"
    # a: a pod that mounts cm-used; b: a pod that mounts nothing; c: no pod; d: no pod, and a
    # further group in its certificate that RBAC grants kube-proxy's reads (asked first, so its
    # probe's yeses are kept when the others ask: they must not be theirs).
    a, b, c, d = (f"kf-nr-{x}-{suffix}" for x in "abcd")
    group = f"kf-nr-proxiers:{suffix}"
    admin = Caller(cluster, "admin", token=cluster.token("admin"))
    bind_group(cluster, group)
    certs = node_world(cluster, admin, ns, [a, b, c, d],
                       {"pod-a": (a, "cm-used"), "pod-b": (b, None)}, groups={d: [group]})
    proxy = start_proxy(cluster, tmp_path)
    try:
        rows, served_total, denied_total = [], 0, 0
        for node, other in ((d, a), (a, b), (b, a), (c, a)):
            caller = Caller(cluster, node, cert=certs[node])
            for label, path in shapes(ns, node, other):
                before = cache_counts(cluster, proxy)
                direct = caller.call(cluster.port, "GET", path)
                through = caller.call(proxy.secure_port, "GET", path)
                after = cache_counts(cluster, proxy)
                served = any(after[v] > before[v] for v in after)
                rows.append((node, label, direct[0], through[0], served))
                # Served from the cache only what the apiserver serves this node.
                if served:
                    assert direct[0] == 200, (node, label, direct)
                    served_total += 1
                # A denial is the apiserver's own, byte for byte.
                if direct[0] == 403:
                    assert through == direct, (node, label, direct, through)
                    denied_total += 1
                assert through[0] == direct[0], (node, label, direct, through)
        print("\n".join(f"{n:<24} {lb:<24} direct {d} kube-fanout {t} {'cache' if s else ''}"
                        for n, lb, d, t, s in rows))
        verdict = {(n, lb): (d, s) for n, lb, d, _, s in rows}
        # The matrix has both kinds, and the graph and the selectors decided as expected.
        assert verdict[(a, "ConfigMap its pod uses")] == (200, True)
        assert verdict[(b, "ConfigMap its pod uses")][0] == 403
        assert verdict[(a, "another node's pods")][0] == 403
        assert verdict[(c, "own pods")] == (200, True)
        assert verdict[(c, "own Node")] == (200, True)
        # The further group's grants are d's, from the cache, and no other node's.
        for label in ("EndpointSlices", "all Nodes", "another Node"):
            assert verdict[(d, label)] == (200, True), (label, verdict[(d, label)])
            for node in (a, b, c):
                assert verdict[(node, label)][0] == 403, (node, label, verdict[(node, label)])
        assert verdict[(d, "own pods")] == (200, True)
        assert served_total >= 25 and denied_total >= 18, (served_total, denied_total)
        sent, shared = reviews(cluster, proxy)
        assert shared >= 10, (sent, shared)
    finally:
        cleanup(cluster, proxy, ns, [a, b, c, d], [group])


KUBELET_SHAPES = 7


def agent_shapes(ns, node):
    """A kubelet's reads with its node certificate: its pods, its Node (by name, and as its
    informer lists it, by metadata.name), Services, the ConfigMap its pod mounts, CSIDrivers,
    RuntimeClasses. (EndpointSlices are kube-proxy's, whose own identity the Node authorizer
    does not answer for: a node is refused them, test above.)"""
    return [f"/api/v1/pods?fieldSelector=spec.nodeName%3D{node}", f"/api/v1/nodes/{node}",
            f"/api/v1/nodes?fieldSelector=metadata.name%3D{node}", "/api/v1/services",
            f"/api/v1/namespaces/{ns}/configmaps/cm-used", "/apis/storage.k8s.io/v1/csidrivers",
            "/apis/node.k8s.io/v1/runtimeclasses"]


@pytest.mark.parametrize("fleet,share,further_group",
                         [(10, True, False), (10, True, True), (10, False, False)])
def test_a_fleet_of_nodes_costs_about_one_review_per_node(cluster, tmp_path, fleet, share,
                                                          further_group):
    suffix = free_port()
    ns = f"kf-nrc-{suffix}"
    nodes = [f"kf-nrc-{i}-{suffix}" for i in range(fleet)]
    admin = Caller(cluster, "admin", token=cluster.token("admin"))
    # With a further group, every node's certificate carries it (as the load harness's client-go
    # fleet: a kubelet and a kube-proxy in one identity).
    groups = [f"kf-nrc-proxiers:{suffix}"] if further_group else []
    for group in groups:
        bind_group(cluster, group)
    certs = node_world(cluster, admin, ns, nodes,
                       {f"pod-{i}": (n, "cm-used") for i, n in enumerate(nodes)},
                       groups={n: groups for n in nodes})
    proxy = start_proxy(cluster, tmp_path,
                        [f"--authorization-share-node-reviews={str(share).lower()}"])
    try:
        before_cache = cache_counts(cluster, proxy)
        for node in nodes:
            caller = Caller(cluster, node, cert=certs[node])
            paths = agent_shapes(ns, node)
            assert len(paths) == KUBELET_SHAPES
            for path in paths:
                status, body = caller.call(proxy.secure_port, "GET", path)
                assert status == 200, (node, path, body)
        after_cache = cache_counts(cluster, proxy)
        served = sum(after_cache[v] - before_cache[v] for v in after_cache)
        sent, shared = reviews(cluster, proxy)
        print(f"\nshared={share} further group={further_group}: {fleet} nodes x {KUBELET_SHAPES} shapes: {sent:.0f} reviews, "
              f"{shared:.0f} authorizations shared, {served} reads served from the cache")
        # Every read was the cache's (else no review was needed for it).
        assert served == fleet * KUBELET_SHAPES, served
        if not share:  # Each node asked about itself: one review per node and shape.
            assert sent == fleet * KUBELET_SHAPES and shared == 0, (sent, shared)
            return
        # One review per shape for the probe node, one per node for the ConfigMap only its own
        # pod makes readable (the Node authorizer's graph): N + 7, not N x 7.
        assert sent <= fleet + KUBELET_SHAPES + 1, sent
        assert shared >= fleet * (KUBELET_SHAPES - 1) - 1, shared
    finally:
        cleanup(cluster, proxy, ns, nodes, groups)
