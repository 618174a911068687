"""Consistent reads (no resourceVersion) served from kube-fanout's cache: fresh, and proven by
proofs the readers share.

A consistent read must reflect every write made before it; kube-fanout proves that with a
consistent LIST of the resource that started after the read arrived (one for every read waiting
then), and when the cache holds exactly what that list holds the cache is current at once
(docs/benchmarks.md, "Consistent reads").
"""
import json
import time

from kfrig import Proxy, metric_values


# PodTemplates: a kind no other test writes, so the cache holds only this test's objects however
# many ConfigMaps earlier tests left in the cluster (the rig runs no namespace controller): below
# 500 objects the proofs are by content, which is what these tests count.
RESOURCE = "podtemplates"


def template(name, n):
    return json.dumps({"apiVersion": "v1", "kind": "PodTemplate",
                       "metadata": {"name": name, "annotations": {"n": str(n)}},
                       "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}})


def create(cluster, ns, name, n=0):
    made = cluster.request("POST", f"/api/v1/namespaces/{ns}/{RESOURCE}", body=template(name, n))
    assert made.status == 201, made.body[:300]
    return made


def kf_metric(cluster, proxy, name, resource=RESOURCE):
    text = cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()
    return metric_values(text, name).get(f'{{resource="{resource}"}}', 0)


def apiserver_requests(cluster):
    text = cluster.request("GET", "/metrics").body.decode()
    return sum(v for labels, v in metric_values(text, "apiserver_request_total").items()
               if f'resource="{RESOURCE}"' in labels)


def routes(proxy, marker):
    return [json.loads(line)["route"] for line in proxy.log_lines()
            if marker in line and '"msg":"request"' in line]


def start(cluster, tmp_path):
    # Every consistent read proven and served from the cache (none sent to the apiserver).
    return Proxy.start(cluster, tmp_path, extra_args=[
        f"--cache-resources={RESOURCE}", "--consistent-read-passthrough-interval=0",
        "--consistent-get-passthrough-qps=0"])


def test_a_consistent_read_through_the_cache_sees_every_write_made_before_it(
        cluster, namespace, tmp_path):
    """Write straight to the apiserver, then read through kube-fanout at once: the read must see
    the write (created, changed, deleted), each time, and come from the cache."""
    ns = namespace
    proxy = start(cluster, tmp_path)
    try:
        base = f"/api/v1/namespaces/{ns}/{RESOURCE}"
        create(cluster, ns, "ryw", -1)
        for i in range(25):
            wrote = cluster.request("PUT", f"{base}/ryw", body=template("ryw", i))
            assert wrote.status == 200, wrote.body[:300]
            written_rv = int(json.loads(wrote.body)["metadata"]["resourceVersion"])
            got = cluster.request("GET", f"{base}/ryw?kfryw=get{i}", port=proxy.secure_port)
            assert got.status == 200
            obj = json.loads(got.body)
            assert obj["metadata"]["annotations"]["n"] == str(i), (i, obj["metadata"])
            assert int(obj["metadata"]["resourceVersion"]) == written_rv
            listed = cluster.request("GET", f"{base}?kfryw=list{i}", port=proxy.secure_port)
            body = json.loads(listed.body)
            assert [o["metadata"]["annotations"]["n"] for o in body["items"]
                    if o["metadata"]["name"] == "ryw"] == [str(i)]
            assert int(body["metadata"]["resourceVersion"]) >= written_rv
        deleted = cluster.request("DELETE", f"{base}/ryw")
        assert deleted.status == 200, deleted.body[:300]
        gone = cluster.request("GET", f"{base}/ryw?kfryw=gone", port=proxy.secure_port)
        assert gone.status == 404
        # All of them answered by the cache, none by the apiserver.
        marked = routes(proxy, "kfryw=")
        assert len(marked) == 51 and set(marked) == {"cache"}, marked
    finally:
        proxy.stop()


def test_a_quiet_resource_is_proven_current_by_content_without_a_progress_watch(
        cluster, namespace, tmp_path):
    """PodTemplates nobody writes while Secrets change: the apiserver's RV moves past the cache's,
    and the cache proves it is current from the proof's list (the same objects at the same
    versions), with no short watch waiting for the apiserver's bookmark timer (1-2 s)."""
    ns = namespace
    create(cluster, ns, "quiet")
    proxy = start(cluster, tmp_path)
    try:
        content = kf_metric(cluster, proxy, "kube_fanout_cache_content_proofs_total")
        progress = kf_metric(cluster, proxy, "kube_fanout_upstream_progress_watches_total")
        for i in range(10):
            # Another resource's write: a newer RV the podtemplates cache never gets an event for.
            cluster.kubectl("create", "secret", "generic", f"elsewhere{i}", "-n", ns)
            got = cluster.request("GET", f"/api/v1/namespaces/{ns}/{RESOURCE}/quiet?kfquiet={i}",
                                  port=proxy.secure_port)
            assert got.status == 200
        assert set(routes(proxy, "kfquiet=")) == {"cache"}
        assert kf_metric(cluster, proxy, "kube_fanout_cache_content_proofs_total") >= content + 10
        assert kf_metric(cluster, proxy, "kube_fanout_upstream_progress_watches_total") == progress
        # The cache's RV is the apiserver's: past the last Secret written.
        last = json.loads(cluster.request(
            "GET", f"/api/v1/namespaces/{ns}/secrets/elsewhere9").body)["metadata"]
        assert kf_metric(cluster, proxy, "kube_fanout_cache_resource_version") >= int(
            last["resourceVersion"])
    finally:
        proxy.stop()


def test_concurrent_consistent_reads_share_the_proofs(cluster, namespace, tmp_path):
    """40 clients read at once: each read waits for a proof that started after it arrived, one
    proof serves every read waiting when it starts, so the apiserver sees a few LISTs, not 40.

    "At once" is the reads themselves: first each client connects and makes itself known to
    kube-fanout (its token reviewed, its access checked) with a read at resourceVersion=0 (from
    the cache, no proof); then one thread writes the 40 consistent reads on their connections
    back to back, and only then reads the answers. Reads that reach kube-fanout one by one, each
    after the proof before it ended, take a proof each by design (a proof that answered one read
    is followed at once by the next, a lone sequential reader's cost): sent from 40 threads,
    woken one after another on a busy machine, the reads were spread over up to a third of a
    second, and the count measured the threads' pace rather than the sharing."""
    ns = namespace
    for i in range(5):
        create(cluster, ns, f"cm{i}")
    proxy = start(cluster, tmp_path)
    try:
        cluster.kubectl("create", "secret", "generic", "moved-on", "-n", ns)
        headers = {"Authorization": f"Bearer {cluster.token('admin')}"}
        base = f"/api/v1/namespaces/{ns}/{RESOURCE}"
        conns, warm, statuses = [], [], []
        for n in range(40):
            conn = cluster.connection(proxy.secure_port)
            conn.request("GET", f"{base}/cm{n % 5}?resourceVersion=0&kfwarm={n}", headers=headers)
            answer = conn.getresponse()
            answer.read()  # The connection stays open for the consistent read.
            warm.append(answer.status)
            conns.append(conn)
        proofs = kf_metric(cluster, proxy, "kube_fanout_upstream_rv_probes_total")
        upstream = apiserver_requests(cluster)
        began = time.monotonic()
        for n, conn in enumerate(conns):
            conn.request("GET", f"{base}/cm{n % 5}?kfshare={n}", headers=headers)
        spread_ms = (time.monotonic() - began) * 1000
        for conn in conns:
            answer = conn.getresponse()
            answer.read()
            statuses.append(answer.status)
            conn.close()
        assert warm == [200] * 40 and statuses == [200] * 40, (warm, statuses)
        assert set(routes(proxy, "kfwarm=")) == {"cache"}
        assert set(routes(proxy, "kfshare=")) == {"cache"}
        used = kf_metric(cluster, proxy, "kube_fanout_upstream_rv_probes_total") - proofs
        # The apiserver's own count: the proofs and the metrics scrape itself, nothing per read.
        at_apiserver = apiserver_requests(cluster) - upstream
        # Sharing broken, the 40 reads would take 40 proofs. Shared: the first read's, the one
        # answering every read that joined while it was in flight, and one every 50 ms (the
        # spacing after a shared proof) for reads kube-fanout took longer to get to.
        assert 1 <= used <= 8, (used, f"the 40 reads sent within {spread_ms:.0f} ms")
        assert at_apiserver <= used + 1, (at_apiserver, used)
    finally:
        proxy.stop()
