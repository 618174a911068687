"""Every identity the apiserver accepts, kube-fanout accepts (issue: "client certificates, the
front-proxy, selector-aware authorization").

The same requests go to the apiserver directly and through kube-fanout's TLS listener as: a node
(client certificate system:node:NAME, group system:nodes: the Node authorizer and NodeRestriction
decide), a ServiceAccount token (RBAC), an anonymous caller, and a client with a certificate
nobody signed. Every answer must match the apiserver's (status and body); reads kube-fanout may
serve must come from its cache (its counters move), and every refusal must be the apiserver's.

Each test first checks its setup (objects exist, the Node authorizer's graph knows the pods)
before it compares.
"""
import json
import pathlib
import ssl
import subprocess
import time
import http.client

import pytest

from kfrig import ROOT, Proxy, free_port, metric_values, scaled

MATRIX = []  # (identity, request, direct status, kube-fanout status, served from)


class Caller:
    """An HTTPS client of one identity: a client certificate, a bearer token, both or none."""

    def __init__(self, cluster, name, cert=None, token=None):
        self.cluster, self.name, self.token = cluster, name, token
        self.context = ssl.create_default_context(cafile=cluster.env["KF_CA_FILE"])
        if cert:
            self.context.load_cert_chain(*cert)

    def call(self, port, method, path, body=None, headers=None, content_type=None):
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=self.context)
        hdrs = {"Accept": "application/json"}
        if self.token:
            hdrs["Authorization"] = f"Bearer {self.token}"
        if body is not None:
            hdrs["Content-Type"] = content_type or "application/json"
            body = json.dumps(body)
        hdrs.update(headers or {})
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, data


def cache_counts(cluster, proxy):
    text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
    counts = metric_values(text, "kube_fanout_cache_requests_total")
    return {verb: counts.get(f'{{verb="{verb}"}}', 0) for verb in ("list", "get", "watch")}


def review_counts(cluster, proxy):
    text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
    return (metric_values(text, "kube_fanout_token_reviews_total"),
            metric_values(text, "kube_fanout_access_reviews_total"))


class World:
    """The objects and identities of the matrix, and kube-fanout in front of them."""

    def __init__(self, cluster, proxy, ns, node_a, node_b, cert_a):
        self.cluster, self.proxy, self.ns = cluster, proxy, ns
        self.node_a, self.node_b = node_a, node_b
        self.cert_a = cert_a

    def both(self, caller, method, path, body=None, headers=None, expect=None, cached=None,
             content_type=None):
        """The request direct and through kube-fanout: same status and body (`expect`: the
        status both must have). `cached`: the verb kube-fanout must have served from its
        cache (its counter moves), or None: it must not have been."""
        before = cache_counts(self.cluster, self.proxy)
        direct = caller.call(self.cluster.port, method, path, body, headers, content_type)
        through = caller.call(self.proxy.secure_port, method, path, body, headers, content_type)
        after = cache_counts(self.cluster, self.proxy)
        served = [v for v in after if after[v] > before[v]]
        MATRIX.append((caller.name, f"{method} {path}", direct[0], through[0],
                       f"cache ({served[0]})" if served else "not cached"))
        if expect is not None:
            assert direct[0] == expect, (caller.name, method, path, direct)
        assert through[0] == direct[0], (caller.name, method, path, direct, through)
        if cached:
            assert served == [cached], (caller.name, method, path, before, after)
            assert json.loads(through[1])["items" if cached == "list" else "metadata"], through
        else:
            assert not served, (caller.name, method, path, before, after)
        return direct, through

    def same_bytes(self, caller, method, path, expect, body=None, headers=None):
        direct, through = self.both(caller, method, path, body, headers, expect=expect)
        assert through[1] == direct[1], (caller.name, method, path, direct[1], through[1])
        return direct


def issue_cert(cluster, name, *subject):
    out = subprocess.run([str(ROOT / "tests/cluster/node-cert"), str(cluster.directory), name,
                          *subject], check=True, capture_output=True, text=True).stdout.split()
    return out[0], out[1]


def wait_for(what, check, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def world(cluster, tmp_path_factory):
    suffix = free_port()
    ns, node_a, node_b = f"kf-id-{suffix}", f"kf-id-a-{suffix}", f"kf-id-b-{suffix}"
    admin = Caller(cluster, "admin", token=cluster.token("admin"))
    cluster.kubectl("create", "namespace", ns)
    cluster.kubectl("create", "serviceaccount", "default", "-n", ns)
    for node in (node_a, node_b):
        st, _ = admin.call(cluster.port, "POST", "/api/v1/nodes",
                           {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
        assert st == 201
    for name in ("cm-used", "cm-unused"):
        st, _ = admin.call(cluster.port, "POST", f"/api/v1/namespaces/{ns}/configmaps",
                           {"metadata": {"name": name}, "data": {"k": name}})
        assert st == 201
    st, _ = admin.call(cluster.port, "POST", f"/api/v1/namespaces/{ns}/secrets",
                       {"metadata": {"name": "secret-unused"}, "stringData": {"k": "v"}})
    assert st == 201
    for pod, node, volumes in (("pod-a", node_a, [{"name": "c", "configMap": {"name": "cm-used"}}]),
                               ("pod-b", node_b, [])):
        st, body = admin.call(cluster.port, "POST", f"/api/v1/namespaces/{ns}/pods", {
            "metadata": {"name": pod},
            "spec": {"nodeName": node, "volumes": volumes,
                     "containers": [{"name": "c", "image": "registry.invalid/none"}]}})
        assert st == 201, body
    cert_a = issue_cert(cluster, node_a)
    node = Caller(cluster, f"node {node_a}", cert=cert_a)
    # The Node authorizer learns pods and what they use from its own informers: wait until it
    # lets the node read the ConfigMap its pod mounts.
    wait_for("the Node authorizer's graph", lambda: node.call(
        cluster.port, "GET", f"/api/v1/namespaces/{ns}/configmaps/cm-used")[0] == 200)

    directory = tmp_path_factory.mktemp("identity-proxy")
    proxy = Proxy.start(cluster, directory, extra_args=[
        f"--client-ca-file={cluster.env['KF_CA_FILE']}",
        f"--proxy-client-cert-file={cluster.env['KF_FRONT_PROXY_CLIENT_CERT']}",
        f"--proxy-client-key-file={cluster.env['KF_FRONT_PROXY_CLIENT_KEY']}"])
    try:
        yield World(cluster, proxy, ns, node_a, node_b, cert_a)
    finally:
        code = proxy.stop()
        cluster.kubectl("delete", "namespace", ns, "--wait=false")
        for n in (node_a, node_b):
            cluster.kubectl("delete", "node", n, "--wait=false", check=False)
        if MATRIX:
            width = max(len(r[1]) for r in MATRIX)
            lines = [f"{'identity':<28} {'request':<{width}} direct  kube-fanout  answered by"]
            lines += [f"{a:<28} {r:<{width}} {d:<7} {t:<12} {s}" for a, r, d, t, s in MATRIX]
            (ROOT / "build").mkdir(exist_ok=True)
            (ROOT / "build/identity-matrix.txt").write_text("\n".join(lines) + "\n")
        assert code == 0, f"kube-fanout exited with {code}; log:\n{proxy.log_tail()}"


def test_a_node_reads_its_own_pods_from_the_cache_and_nothing_more(world):
    node = Caller(world.cluster, f"node {world.node_a}", cert=world.cert_a)
    own = f"/api/v1/pods?fieldSelector=spec.nodeName%3D{world.node_a}"
    _, through = world.both(node, "GET", own, expect=200, cached="list")
    assert [p["metadata"]["name"] for p in json.loads(through[1])["items"]] == ["pod-a"]
    # The other node's pods, and every pod: the Node authorizer's own 403, byte for byte.
    world.same_bytes(node, "GET", f"/api/v1/pods?fieldSelector=spec.nodeName%3D{world.node_b}", 403)
    world.same_bytes(node, "GET", "/api/v1/pods", 403)
    world.same_bytes(node, "GET", f"/api/v1/namespaces/{world.ns}/pods", 403)


def test_a_node_watches_its_own_pods_from_the_cache(world):
    node = Caller(world.cluster, f"node {world.node_a}", cert=world.cert_a)
    before = cache_counts(world.cluster, world.proxy)
    conn = http.client.HTTPSConnection("127.0.0.1", world.proxy.secure_port, timeout=30,
                                       context=node.context)
    conn.request("GET", f"/api/v1/pods?watch=1&timeoutSeconds=5"
                        f"&fieldSelector=spec.nodeName%3D{world.node_a}",
                 headers={"Accept": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    event = json.loads(resp.readline())
    conn.close()
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "pod-a")
    after = cache_counts(world.cluster, world.proxy)
    assert after["watch"] == before["watch"] + 1
    MATRIX.append((node.name, f"WATCH /api/v1/pods?fieldSelector=spec.nodeName={world.node_a}",
                   200, 200, "cache (watch)"))
    world.same_bytes(node, "GET", f"/api/v1/pods?watch=1&timeoutSeconds=1"
                                  f"&fieldSelector=spec.nodeName%3D{world.node_b}", 403)


def test_a_node_reads_the_configmap_its_pod_uses_and_no_other(world):
    node = Caller(world.cluster, f"node {world.node_a}", cert=world.cert_a)
    cms = f"/api/v1/namespaces/{world.ns}/configmaps"
    direct, through = world.both(node, "GET", f"{cms}/cm-used", expect=200, cached="get")
    assert json.loads(through[1]) == json.loads(direct[1])
    world.same_bytes(node, "GET", f"{cms}/cm-unused", 403)
    world.same_bytes(node, "GET", cms, 403)
    world.same_bytes(node, "GET", f"/api/v1/namespaces/{world.ns}/secrets/secret-unused", 403)


def test_a_nodes_writes_pass_through_as_that_node(world):
    node = Caller(world.cluster, f"node {world.node_a}", cert=world.cert_a)
    patch = {"metadata": {"annotations": {"kube-fanout.test/seen": "1"}}}
    world.both(node, "PATCH", f"/api/v1/nodes/{world.node_a}/status", patch, expect=200,
               content_type="application/merge-patch+json")
    # NodeRestriction: another node's object is refused, in the same words.
    world.same_bytes(node, "PATCH", f"/api/v1/nodes/{world.node_b}/status", 403, body=patch,
                     headers={"Content-Type": "application/merge-patch+json"})
    leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": world.node_b}, "spec": {"holderIdentity": world.node_b}}
    world.same_bytes(node, "POST", leases, 403, body=lease)
    lease["metadata"]["name"] = lease["spec"]["holderIdentity"] = world.node_a
    st, body = node.call(world.proxy.secure_port, "POST", leases, lease)
    assert st == 201, body
    MATRIX.append((node.name, f"POST {leases} (own)", "-", st, "not cached"))
    st, body = node.call(world.cluster.port, "GET", f"{leases}/{world.node_a}")
    assert st == 200 and json.loads(body)["spec"]["holderIdentity"] == world.node_a
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "kf-id-"},
             "involvedObject": {"kind": "Node", "name": world.node_a},
             "reason": "KfTest", "message": "through kube-fanout", "type": "Normal"}
    # A Node's events go to "default", as the kubelet sends them.
    world.both(node, "POST", "/api/v1/namespaces/default/events", event, expect=201)


def test_request_header_fields_from_a_client_are_never_believed(world):
    spoof = {"X-Remote-User": "kf-admin", "X-Remote-Group": "system:masters"}
    node = Caller(world.cluster, f"node {world.node_a} + X-Remote-User", cert=world.cert_a)
    world.same_bytes(node, "GET", f"/api/v1/namespaces/{world.ns}/secrets/secret-unused", 403,
                     headers=spoof)
    alice = Caller(world.cluster, "kf-alice + X-Remote-User", token=world.cluster.token("alice"))
    world.same_bytes(alice, "GET", f"/api/v1/namespaces/{world.ns}/configmaps/cm-used", 403,
                     headers=spoof)
    anonymous = Caller(world.cluster, "anonymous + X-Remote-User")
    world.same_bytes(anonymous, "GET", f"/api/v1/namespaces/{world.ns}/secrets", 403,
                     headers=spoof)


def test_a_service_account_token_reads_what_rbac_grants_from_the_cache(world):
    cluster, ns = world.cluster, world.ns
    cluster.kubectl("create", "serviceaccount", "reader", "-n", ns)
    cluster.kubectl("create", "role", "pod-reader", "-n", ns, "--verb=get,list,watch",
                    "--resource=pods")
    cluster.kubectl("create", "rolebinding", "pod-reader", "-n", ns, "--role=pod-reader",
                    f"--serviceaccount={ns}:reader")
    token = cluster.kubectl("create", "token", "reader", "-n", ns).stdout.strip()
    sa = Caller(cluster, f"serviceaccount {ns}:reader", token=token)
    wait_for("the RoleBinding to take effect", lambda: sa.call(
        cluster.port, "GET", f"/api/v1/namespaces/{ns}/pods")[0] == 200)
    tokens_before, _ = review_counts(cluster, world.proxy)
    _, through = world.both(sa, "GET", f"/api/v1/namespaces/{ns}/pods", expect=200,
                            cached="list")
    assert sorted(p["metadata"]["name"] for p in json.loads(through[1])["items"]) == [
        "pod-a", "pod-b"]
    world.both(sa, "GET", f"/api/v1/namespaces/{ns}/pods/pod-a", expect=200, cached="get")
    world.same_bytes(sa, "GET", "/api/v1/namespaces/kube-system/pods", 403)
    world.same_bytes(sa, "GET", "/api/v1/pods", 403)
    world.same_bytes(sa, "GET", f"/api/v1/namespaces/{ns}/configmaps/cm-used", 403)
    tokens_after, access = review_counts(cluster, world.proxy)
    # One TokenReview for the token (one per I/O thread at most), then answers from the cache.
    made = tokens_after['{result="authenticated"}'] - tokens_before.get(
        '{result="authenticated"}', 0)
    assert 1 <= made <= 2, (tokens_before, tokens_after)
    assert access['{result="allowed"}'] >= 1 and access['{result="denied"}'] >= 1, access


def test_an_anonymous_caller_gets_the_apiservers_answers(world):
    anonymous = Caller(world.cluster, "anonymous")
    world.same_bytes(anonymous, "GET", "/api/v1/pods", 403)
    world.same_bytes(anonymous, "GET", f"/api/v1/namespaces/{world.ns}/configmaps/cm-used", 403)
    world.both(anonymous, "GET", "/version", expect=200)


def test_a_certificate_nobody_signed_is_refused_unless_a_token_vouches(world, tmp_path):
    key, crt = tmp_path / "evil.key", tmp_path / "evil.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=system:admin/O=system:masters", "-keyout", key, "-out", crt],
                   check=True, capture_output=True)
    evil = Caller(world.cluster, "unsigned cert system:admin", cert=(crt, key))
    world.same_bytes(evil, "GET", "/api/v1/pods", 401)
    world.same_bytes(evil, "GET", f"/api/v1/namespaces/{world.ns}/configmaps/cm-used", 401)
    with_token = Caller(world.cluster, "unsigned cert + kf-alice token", cert=(crt, key),
                        token=world.cluster.token("alice"))
    world.same_bytes(with_token, "GET", f"/api/v1/namespaces/{world.ns}/configmaps/cm-used", 403)
    # A signed certificate wins over a token, as in the apiserver (x509 before tokens).
    node_and_admin = Caller(world.cluster, f"node {world.node_a} + admin token",
                            cert=world.cert_a, token=world.cluster.token("admin"))
    world.same_bytes(node_and_admin, "GET", f"/api/v1/namespaces/{world.ns}/secrets/secret-unused",
                     403)


SELF_SUBJECT_REVIEWS = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
SELF_SUBJECT_REVIEW = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


def issue_cert_with_subject(cluster, directory, common_name, orgs=()):
    """A client certificate signed by the rig's cluster CA (the apiserver's --client-ca-file)
    whose subject holds exactly `common_name` and `orgs`, whatever bytes they are (openssl's
    -subj cannot carry a CR or LF). Returns (crt, key) paths."""
    import datetime
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca_cert = x509.load_pem_x509_certificate(pathlib.Path(cluster.env["KF_CA_FILE"]).read_bytes())
    ca_key = serialization.load_pem_private_key(
        pathlib.Path(cluster.env["KF_CA_KEY_FILE"]).read_bytes(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
                        + [x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    # Setup: the issued certificate really holds those bytes.
    issued = x509.load_pem_x509_certificate(cert.public_bytes(serialization.Encoding.PEM))
    assert issued.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == common_name
    crt_path, key_path = directory / "subject.crt", directory / "subject.key"
    crt_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return crt_path, key_path


def unauthorized_body(world, tmp_path):
    """The apiserver's own 401 body for a certificate it refuses (asked of it directly)."""
    key, crt = tmp_path / "nobody.key", tmp_path / "nobody.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=nobody", "-keyout", key, "-out", crt],
                   check=True, capture_output=True)
    st, body = Caller(world.cluster, "unsigned", cert=(crt, key)).call(
        world.cluster.port, "GET", "/api/v1/namespaces/kube-system/secrets")
    assert st == 401 and json.loads(body)["reason"] == "Unauthorized", body
    return body


@pytest.mark.parametrize("label, common_name", [
    ("CR/LF and a header", "x\r\nX-Remote-Group: system:masters"),
    ("a trailing space", "system:node:{node} "),
])
def test_a_certificate_subject_no_header_field_can_carry_is_refused_401(world, tmp_path, label,
                                                                       common_name):
    # The cluster CA signed a subject that, copied into X-Remote-User, would add a field of its
    # own (system:masters) or be trimmed into node A's name by the apiserver's header reader.
    # The apiserver itself authenticates the odd name as it is (403 on Secrets; its
    # SelfSubjectReview echoes the name); kube-fanout cannot carry that name upstream, so it
    # refuses it as unauthenticated, with the apiserver's 401 body, token or not.
    cn = common_name.format(node=world.node_a)
    crt, key = issue_cert_with_subject(world.cluster, tmp_path, cn)
    odd = Caller(world.cluster, f"cluster-CA cert, CN with {label}", cert=(crt, key))
    unauthorized = unauthorized_body(world, tmp_path)
    secrets = "/api/v1/namespaces/kube-system/secrets"
    st, _ = odd.call(world.cluster.port, "GET", secrets)
    assert st == 403
    st, body = odd.call(world.cluster.port, "POST", SELF_SUBJECT_REVIEWS, SELF_SUBJECT_REVIEW)
    assert st == 201 and json.loads(body)["status"]["userInfo"]["username"] == cn, body
    with_token = Caller(world.cluster, f"cluster-CA cert, CN with {label} + admin token",
                        cert=(crt, key), token=world.cluster.token("admin"))
    for caller in (odd, with_token):
        for method, path, body in (("GET", secrets, None),
                                   ("GET", f"/api/v1/namespaces/{world.ns}/secrets/secret-unused",
                                    None),
                                   ("GET", f"/api/v1/pods?fieldSelector=spec.nodeName%3D"
                                           f"{world.node_a}", None),
                                   ("POST", SELF_SUBJECT_REVIEWS, SELF_SUBJECT_REVIEW)):
            direct, _ = caller.call(world.cluster.port, method, path, body)
            st, got = caller.call(world.proxy.secure_port, method, path, body)
            MATRIX.append((caller.name, f"{method} {path}", direct, st, "kube-fanout"))
            assert (st, got) == (401, unauthorized), (caller.name, method, path, st, got)


def test_a_self_signed_certificate_never_shares_a_front_proxys_answer(world, tmp_path):
    # kube-fanout trusts a front proxy (the rig's front-proxy CA and name). The front proxy names
    # kf-admin (system:masters) in X-Remote-* fields; an attacker with a self-signed certificate
    # sends the very same fields at the same moments. Identical concurrent reads coalesce, but
    # never across identities: the attacker always gets the apiserver's 401, never the
    # SecretList, and the front proxy's reads always succeed (none joins the attacker's 401).
    cluster, env = world.cluster, world.cluster.env
    proxy = Proxy.start(cluster, tmp_path, extra_args=[
        f"--client-ca-file={env['KF_CA_FILE']}",
        f"--requestheader-client-ca-file={env['KF_FRONT_PROXY_CA_FILE']}",
        "--requestheader-allowed-names=kube-fanout-front-proxy",
        f"--proxy-client-cert-file={env['KF_FRONT_PROXY_CLIENT_CERT']}",
        f"--proxy-client-key-file={env['KF_FRONT_PROXY_CLIENT_KEY']}",
        "--enable-admission=false", "--coalesce-reads=true"])
    key, crt = tmp_path / "attacker.key", tmp_path / "attacker.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=kube-fanout-front-proxy", "-keyout", key, "-out", crt],
                   check=True, capture_output=True)
    fields = {"X-Remote-User": "kf-admin", "X-Remote-Group": "system:masters"}
    front = Caller(cluster, "front proxy naming kf-admin",
                   cert=(env["KF_FRONT_PROXY_CLIENT_CERT"], env["KF_FRONT_PROXY_CLIENT_KEY"]))
    attacker = Caller(cluster, "self-signed + the same X-Remote-*", cert=(crt, key))
    unauthorized = unauthorized_body(world, tmp_path)
    path = "/api/v1/namespaces/kube-system/secrets"

    def coalesced():
        text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
        return metric_values(text, "kube_fanout_passthrough_coalesced_total").get("", 0)

    import threading
    rounds, fronts, attackers = 12, 8, 4
    results = []  # (who, status, body)
    lock = threading.Lock()
    try:
        # Setup: each alone gets its own answer.
        st, body = front.call(proxy.secure_port, "GET", path, headers=fields)
        assert st == 200 and json.loads(body)["kind"] == "SecretList", body
        assert attacker.call(proxy.secure_port, "GET", path, headers=fields) == (401, unauthorized)
        before = coalesced()
        for _ in range(rounds):
            barrier = threading.Barrier(fronts + attackers)

            def one(who, caller):
                conn = http.client.HTTPSConnection("127.0.0.1", proxy.secure_port, timeout=30,
                                                   context=caller.context)
                conn.connect()
                barrier.wait()
                conn.request("GET", path, headers={"Accept": "application/json", **fields})
                resp = conn.getresponse()
                data = resp.read()
                conn.close()
                with lock:
                    results.append((who, resp.status, data))

            threads = [threading.Thread(target=one, args=("front", front)) for _ in range(fronts)]
            threads += [threading.Thread(target=one, args=("attacker", attacker))
                        for _ in range(attackers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        shared = coalesced() - before
    finally:
        assert proxy.stop() == 0
    front_answers = [(st, json.loads(body).get("kind")) for who, st, body in results
                     if who == "front"]
    attacker_answers = [(st, body) for who, st, body in results if who == "attacker"]
    print(f"{len(front_answers)} front-proxy reads, {len(attacker_answers)} attacker reads, "
          f"{shared:.0f} answers shared")
    assert len(front_answers) == rounds * fronts and len(attacker_answers) == rounds * attackers
    assert set(front_answers) == {(200, "SecretList")}, front_answers
    assert all(a == (401, unauthorized) for a in attacker_answers), attacker_answers
    # Coalescing did happen, among the front proxy's own reads: the test could have failed.
    assert shared >= 1, shared
    MATRIX.append((front.name, f"GET {path} x{rounds * fronts}", "-", 200, "apiserver/coalesced"))
    MATRIX.append((attacker.name, f"GET {path} x{rounds * attackers}", "-", 401, "kube-fanout"))



def behind_a_relay(cluster, tmp_path, extra_args):
    """kube-fanout whose upstream is a FaultRelay (kffault.py) in front of the apiserver."""
    from kffault import FaultRelay

    relay = FaultRelay(cluster, tmp_path)
    token_file = tmp_path / "upstream-token"
    token_file.write_text(cluster.token("admin"))
    return relay, Proxy.start(cluster, tmp_path, extra_args=extra_args,
                              upstream_args=relay.upstream_args(token_file))


STORM_CAUSES = ("tls_handshake_timeout", "handshake_queue", "fd_headroom",
                "token_review_unavailable", "access_review_unavailable", "token_review_throttled",
                "admission_rejected", "passthrough_rejected")


def overload_line(proxy, phase, n, timeout=20):
    """The `n`th warning `overload <phase>` (began, continues, ended) in `proxy`'s log, parsed;
    kube-fanout writes it within a second of what it reports."""
    deadline = time.monotonic() + scaled(timeout)
    while True:
        lines = [json.loads(l) for l in proxy.log_lines()
                 if l.startswith("{") and f'"msg":"overload {phase}' in l]
        if len(lines) >= n:
            assert lines[n - 1]["level"] == "warning", lines[n - 1]
            return lines[n - 1]
        assert time.monotonic() < deadline, (phase, n, proxy.log_tail())
        time.sleep(0.1)


def others_zero(line, *causes):
    return all(line[c] == 0 for c in STORM_CAUSES if c not in causes)


def refused_for(cluster, proxy, reason):
    """kube_fanout_requests_refused_total{reason} of `proxy`."""
    text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
    return metric_values(text, "kube_fanout_requests_refused_total").get(
        f'{{reason="{reason}"}}', 0)


def test_a_node_through_two_tiers_is_still_that_node(world, tmp_path):
    # bottom kube-fanout ─(front proxy: its certificate, X-Remote-*)─► top kube-fanout
    # ─(front proxy)─► apiserver. The top accepts the bottom as a front proxy
    # (--requestheader-client-ca-file, --requestheader-allowed-names), as the apiserver does.
    cluster, env = world.cluster, world.cluster.env
    front = [f"--proxy-client-cert-file={env['KF_FRONT_PROXY_CLIENT_CERT']}",
             f"--proxy-client-key-file={env['KF_FRONT_PROXY_CLIENT_KEY']}"]
    (tmp_path / "top").mkdir()
    top = Proxy.start(cluster, tmp_path / "top",
                      extra_args=[f"--client-ca-file={env['KF_CA_FILE']}",
                                  f"--requestheader-client-ca-file={env['KF_FRONT_PROXY_CA_FILE']}",
                                  "--requestheader-allowed-names=kube-fanout-front-proxy", *front])
    token_file = tmp_path / "admin-token"
    token_file.write_text(cluster.token("admin"))
    (tmp_path / "bottom").mkdir()
    try:
        bottom = Proxy.start(cluster, tmp_path / "bottom",
                             extra_args=[f"--client-ca-file={env['KF_CA_FILE']}", *front],
                             upstream_args=[f"--upstream=https://127.0.0.1:{top.secure_port}",
                                            f"--upstream-ca-file={env['KF_CA_FILE']}",
                                            f"--upstream-token-file={token_file}"])
        try:
            node = Caller(cluster, f"node {world.node_a} via two tiers", cert=world.cert_a)
            tiers = World(cluster, bottom, world.ns, world.node_a, world.node_b, world.cert_a)
            own = f"/api/v1/pods?fieldSelector=spec.nodeName%3D{world.node_a}"
            _, through = tiers.both(node, "GET", own, expect=200, cached="list")
            assert [p["metadata"]["name"] for p in json.loads(through[1])["items"]] == ["pod-a"]
            # Refusals name the user: the apiserver saw node A, through both front proxies.
            refused = tiers.same_bytes(
                node, "GET", f"/api/v1/namespaces/{world.ns}/secrets/secret-unused", 403)
            assert f"system:node:{world.node_a}".encode() in refused[1]
            tiers.same_bytes(node, "GET",
                             f"/api/v1/pods?fieldSelector=spec.nodeName%3D{world.node_b}", 403)
            patch = {"metadata": {"annotations": {"kube-fanout.test/tiers": "1"}}}
            tiers.both(node, "PATCH", f"/api/v1/nodes/{world.node_a}/status", patch, expect=200,
                       content_type="application/merge-patch+json")
            tiers.same_bytes(node, "PATCH", f"/api/v1/nodes/{world.node_b}/status", 403,
                             body=patch,
                             headers={"Content-Type": "application/merge-patch+json"})
            # A client cannot pose as a front proxy at the top: its own X-Remote-User is ignored
            # there too (a node certificate is not of the front-proxy CA).
            spoof = Caller(cluster, f"node {world.node_a} + X-Remote-User at the top",
                           cert=world.cert_a)
            st, body = spoof.call(top.secure_port, "GET",
                                  f"/api/v1/namespaces/{world.ns}/secrets/secret-unused",
                                  headers={"X-Remote-User": "kf-admin",
                                           "X-Remote-Group": "system:masters"})
            assert st == 403 and f"system:node:{world.node_a}".encode() in body, body
        finally:
            assert bottom.stop() == 0
    finally:
        assert top.stop() == 0


def test_a_review_without_an_answer_is_answered_429_not_passed_through(cluster, namespace,
                                                                       tmp_path):
    # kube-fanout's upstream through a relay that fails or stalls the reviews only. A review
    # that gets no answer (the apiserver overloaded: 503; stalled past kube-fanout's 10 s) must
    # not turn into a passthrough read at the apiserver: the client gets 429 with Retry-After
    # and a TooManyRequests Status (kube-fanout's overload answer, as for --max-watchers) and
    # tries again. A review the apiserver refuses kube-fanout (403: no system:auth-delegator)
    # still passes through: the apiserver answered, and only it can serve the read then.
    relay, p = behind_a_relay(cluster, tmp_path, ["--cache-resources=configmaps"])
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    client = Caller(cluster, "kf-admin", token=cluster.token("admin"))

    def refused(reason):
        return refused_for(cluster, p, reason)

    def answered_429(target, t0):
        conn = http.client.HTTPSConnection("127.0.0.1", p.secure_port, timeout=60,
                                           context=client.context)
        conn.request("GET", target, headers={"Accept": "application/json",
                                             "Authorization": f"Bearer {client.token}"})
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
        assert resp.status == 429, (resp.status, body)
        assert resp.getheader("Retry-After") == "1"
        status = json.loads(body)
        assert status["kind"] == "Status" and status["reason"] == "TooManyRequests", status
        assert status["code"] == 429 and status["details"]["retryAfterSeconds"] == 1, status
        # Nothing of it reached the apiserver: no read of the namespace's ConfigMaps at all.
        assert relay.count(method="GET", contains=path, since=t0) == 0, relay.requests[-10:]
        return time.monotonic() - t0

    try:
        cluster.kubectl("create", "configmap", "cm-1", "-n", namespace)
        # Setup: served from the cache while the reviews work (so this read can be cached).
        st, body = client.call(p.secure_port, "GET", path)
        assert st == 200 and [i["metadata"]["name"] for i in json.loads(body)["items"]] == ["cm-1"]
        assert relay.count(contains="tokenreviews", outcome="forwarded") >= 1
        assert relay.count(contains="subjectaccessreviews", outcome="forwarded") >= 1
        assert cache_counts(cluster, p)["list"] >= 1

        # The apiserver too busy to review a token (admin's answer is cached now: another
        # identity's token, not reviewed yet).
        relay.fail("tokenreviews", 503)
        client = Caller(cluster, "kf-alice", token=cluster.token("alice"))
        t0 = time.monotonic()
        answered_429(path, t0)
        answered_429(f"{path}?watch=1&resourceVersion=0", t0)
        assert relay.count(contains="tokenreviews", outcome="fault 503", since=t0) >= 1
        assert refused("token_review_unavailable") == 2
        # The log says so, once: a warning as the refusals begin (the first second's count),
        # and one 10 s after the last, with the episode's counts.
        began = overload_line(p, "began", 1)
        assert 1 <= began["token_review_unavailable"] <= 2, began
        assert others_zero(began, "token_review_unavailable"), began
        ended = overload_line(p, "ended", 1)
        assert ended["token_review_unavailable"] == 2, ended
        assert others_zero(ended, "token_review_unavailable"), ended
        assert len([l for l in p.log_lines() if '"msg":"overload ' in l]) == 2

        # A SubjectAccessReview that stalls: answered 429 after the review's 10 s.
        relay.clear()
        relay.stall("subjectaccessreviews")
        client = Caller(cluster, "kf-bob", token=cluster.token("bob"))
        t0 = time.monotonic()
        took = answered_429(path, t0)
        assert 9 <= took < 30, took
        assert relay.count(contains="subjectaccessreviews", outcome="stalled", since=t0) >= 1
        assert refused("access_review_unavailable") == 1
        # A new episode after the quiet period, counted from zero.
        again = overload_line(p, "began", 2)
        assert again["access_review_unavailable"] == 1 and others_zero(
            again, "access_review_unavailable"), again

        # The review API refused to kube-fanout itself: the apiserver answers the read.
        relay.unstall()
        relay.fail("subjectaccessreviews", 403)
        client = Caller(cluster, "kf-admin", token=cluster.token("admin"))
        t0 = time.monotonic()
        st, body = client.call(p.secure_port, "GET", f"{path}/cm-1")
        assert st == 200 and json.loads(body)["metadata"]["name"] == "cm-1", body
        assert relay.count(contains="subjectaccessreviews", outcome="fault 403", since=t0) >= 1
        assert relay.count(method="GET", contains=f"{path}/cm-1", since=t0) == 1
        assert refused("access_review_unavailable") == 1
    finally:
        assert p.stop() == 0
        relay.stop()


def test_metrics_on_the_api_listener_are_authorized_as_the_apiserver_authorizes_its_own(world):
    """/metrics on the TLS listener: anonymous callers, users RBAC does not allow and made-up
    tokens get the apiserver's own answer, byte for byte (before, kube-fanout's metrics were
    served to anyone); a user RBAC allows gets kube-fanout's metrics."""
    cluster = world.cluster
    anonymous = Caller(cluster, "anonymous")
    alice = Caller(cluster, "alice", token=cluster.token("alice"))
    nobody = Caller(cluster, "made-up token", token="kf-not-a-real-token")
    admin = Caller(cluster, "admin", token=cluster.token("admin"))
    for caller, status in ((anonymous, 403), (alice, 403), (nobody, 401)):
        _, body = world.same_bytes(caller, "GET", "/metrics", status)  # Bodies checked equal.
        assert b"kube_fanout_" not in body
    status, body = admin.call(world.proxy.secure_port, "GET", "/metrics")
    assert status == 200 and b"kube_fanout_requests_total" in body
    # Health stays open to all, as the apiserver's (system:public-info-viewer).
    assert anonymous.call(world.proxy.secure_port, "GET", "/healthz") == (200, b"ok")
