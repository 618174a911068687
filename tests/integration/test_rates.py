"""Rates and budgets measured: tests that need the machine to themselves (marked `alone`).

Each sends requests faster than a budget allows (admission's flow for unauthenticated callers,
the TokenReview budget) or a load that needs most of this machine (1,000 pollers), and asserts
what got through. They share no module fixture, so under xdist each is scheduled on its own
after every other test (conftest.py SPLIT): the turn each takes alone then keeps no other test
waiting.
"""
import concurrent.futures
import http.client
import json
import threading
import time

import pytest

from kfrig import Proxy, free_port, metric_values
from test_identity import Caller, behind_a_relay, cache_counts, refused_for
from test_shield import apiserver_requests, delta, pods_namespace


@pytest.fixture
def pods_ns(cluster):
    yield from pods_namespace(cluster)


# 80 requests must come faster than the flow's 20 a second.
@pytest.mark.alone
def test_anonymous_callers_share_one_flow_whatever_their_user_agent(cluster, tmp_path):
    # As the apiserver's APF: every unauthenticated caller is system:anonymous, so rotating the
    # user agent buys no budget of its own. The default global-default flow meters GET/LIST at
    # 20/s with a burst of 40: 80 quick requests, each with a new user agent, must meet 429s.
    proxy = Proxy.start(cluster, tmp_path)
    try:
        anonymous = Caller(cluster, "anonymous, rotating user agents")
        statuses = []
        for i in range(80):
            st, _ = anonymous.call(proxy.secure_port, "GET", "/api/v1/namespaces/default/pods",
                                   headers={"User-Agent": f"rotating-agent-{i}/1.0"})
            statuses.append(st)
        assert statuses[0] == 403, statuses  # Passed through: the apiserver's own refusal.
        assert statuses.count(429) >= 10, statuses
        # A token user is a flow of its own: not held back by the anonymous flow's budget.
        alice = Caller(cluster, "kf-alice", token=cluster.token("alice"))
        assert alice.call(proxy.secure_port, "GET", "/api/v1/namespaces/default/pods")[0] == 403
    finally:
        assert proxy.stop() == 0, proxy.log_tail()


# 30 requests must come within the few seconds the review budget allows.
@pytest.mark.alone
def test_made_up_tokens_cost_the_apiserver_no_more_reviews_than_the_budget(cluster,
                                                                          tmp_path):
    # 30 requests that pass through (Secrets are not cached), each with a new made-up token,
    # against a budget of 1 new TokenReview a second (burst 2): at most a few reviews reach the
    # apiserver, the rest go unreviewed (counted), and every request still gets the apiserver's
    # own 401. (A cached read past the budget is answered 429: the next test.)
    p = Proxy.start(cluster, tmp_path, extra_args=["--authentication-token-review-qps=1",
                                                   "--threads=1"])
    try:
        statuses = []
        for i in range(30):
            st, _ = Caller(cluster, "made-up token", token=f"made-up-{i}-{free_port()}").call(
                p.secure_port, "GET", "/api/v1/namespaces/default/secrets")
            statuses.append(st)
        assert set(statuses) == {401}, statuses
        text = cluster.request("GET", "/metrics", port=p.port, tls=False).body.decode()
        reviews = sum(metric_values(text, "kube_fanout_token_reviews_total").values())
        throttled = metric_values(text, "kube_fanout_token_reviews_throttled_total")[""]
        assert 1 <= reviews <= 6, text
        # (Counted per lookup: admission and the cache each look a request's token up.)
        assert throttled >= 24, (reviews, throttled)
    finally:
        assert p.stop() == 0


# The flood must come faster than the review budget.
@pytest.mark.alone
def test_cached_reads_with_tokens_past_the_review_budget_are_answered_429(cluster, namespace,
                                                                        tmp_path):
    # A flood of cached reads (LIST, GET, WATCH of ConfigMaps), each with a new made-up token,
    # at 1 new TokenReview a second (burst 2). A token not reviewed for want of budget must not
    # send its read through to the apiserver (a flood of kube-fanout becoming one of the
    # apiserver): the read is answered 429 with Retry-After, as a review without an answer is.
    # The relay in front of the apiserver counts what reaches it: reviews within the budget,
    # and reads only for the tokens reviewed (the apiserver's 401 for those). A known token
    # keeps being served from the cache meanwhile.
    relay, p = behind_a_relay(cluster, tmp_path, ["--cache-resources=configmaps",
                                                  "--authentication-token-review-qps=1",
                                                  "--threads=1"])
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    admin = Caller(cluster, "kf-admin", token=cluster.token("admin"))

    def refused(reason):
        return refused_for(cluster, p, reason)

    def admission_refused():
        text = cluster.request("GET", "/metrics", port=p.port, tls=False).body.decode()
        return sum(metric_values(text, "kube_fanout_admission_rejected_requests_total").values())

    try:
        cluster.kubectl("create", "configmap", "cm-1", "-n", namespace)
        st, body = admin.call(p.secure_port, "GET", path)  # Setup: admin's token reviewed.
        assert st == 200 and [i["metadata"]["name"] for i in json.loads(body)["items"]] == ["cm-1"]
        assert cache_counts(cluster, p)["list"] >= 1
        assert refused("token_review_throttled") == 0
        time.sleep(2.5)  # The budget refills to its burst.
        admitted_before = admission_refused()
        t0 = time.monotonic()
        targets = [path, f"{path}/cm-1", f"{path}?watch=1&resourceVersion=0&timeoutSeconds=1"]
        statuses, retry_after, admin_statuses = [], set(), []
        for i in range(150):
            caller = Caller(cluster, "made-up token", token=f"made-up-{i}-{free_port()}")
            conn = http.client.HTTPSConnection("127.0.0.1", p.secure_port, timeout=30,
                                               context=caller.context)
            conn.request("GET", targets[i % 3], headers={"Accept": "application/json",
                                                         "Authorization": f"Bearer {caller.token}"})
            resp = conn.getresponse()
            body = resp.read()
            conn.close()
            statuses.append(resp.status)
            if resp.status == 429:
                retry_after.add(resp.getheader("Retry-After"))
                status = json.loads(body)
                assert status["reason"] == "TooManyRequests" and status["code"] == 429, status
            if i % 25 == 0:
                admin_statuses.append(admin.call(p.secure_port, "GET", f"{path}/cm-1")[0])
        took = time.monotonic() - t0
        reviews = relay.count(contains="tokenreviews", since=t0)
        reads = relay.count(method="GET", contains=path, since=t0)
        counts = {s: statuses.count(s) for s in set(statuses)}
        print(f"{len(statuses)} made-up tokens in {took:.1f}s: {counts}; at the apiserver "
              f"{reviews} TokenReviews, {reads} reads of the namespace's ConfigMaps")
        assert set(statuses) <= {401, 429}, counts
        assert statuses.count(429) >= 150 - (took + 3), counts
        assert retry_after == {"1"}
        # Each 429 is the throttled review's, or admission's: unknown callers share one flow
        # (its rate limit); neither reaches the apiserver.
        throttled = refused("token_review_throttled")
        by_admission = admission_refused() - admitted_before
        print(f"429s: {throttled} for the review budget, {by_admission} by admission")
        assert throttled + by_admission == statuses.count(429), (throttled, by_admission)
        # Every read admission let through was reviewed (at most the budget: took + 3) or
        # throttled. How many admission refuses depends on the loop's speed (these GETs and
        # LISTs are for the cache: its budget for them, 1,000/s with a burst of 2,000, leaves
        # nearly all to the review budget). The 50 WATCHes are long-running, never refused by a
        # rate: they all reach the review budget.
        assert throttled >= 150 - by_admission - (took + 3), (throttled, by_admission, took)
        assert throttled >= 50 - (took + 3), (throttled, took)
        # What reached the apiserver is bounded by the budget, not by the flood.
        assert 1 <= reviews <= took + 3, (reviews, took)
        assert reads <= reviews, (reads, reviews)
        assert reads == statuses.count(401), (reads, counts)
        assert admin_statuses == [200] * 6, admin_statuses
    finally:
        assert p.stop() == 0
        relay.stop()


# 1,000 pollers must get through at their rate.
@pytest.mark.alone
def test_a_thousand_pollers_cost_the_apiserver_close_to_nothing(cluster, cached_proxy, pods_ns):
    # Fluentd-style lookups (GET a pod, consistent) and Datadog-style checks (LIST the
    # namespace's pods) from 1,000 pollers at one request per second each, for 10 s.
    pollers, seconds = 1000, 10
    before = apiserver_requests(cluster, "pods")
    token = cluster.token("admin")
    codes = {}
    lock = threading.Lock()

    def run(first):
        conns = {}
        mine = range(first, min(first + 25, pollers))
        start = time.monotonic()
        for second in range(seconds):
            for i in mine:
                conn = conns.get(i) or cluster.connection(cached_proxy.port, tls=False)
                conns[i] = conn
                path = (f"/api/v1/namespaces/{pods_ns}/pods/p{i % 20}" if i % 2 == 0 else
                        f"/api/v1/namespaces/{pods_ns}/pods?resourceVersion=0")
                conn.request("GET", path, headers={"Authorization": f"Bearer {token}",
                                                   "User-Agent": f"fluentd/node-{i}"})
                resp = conn.getresponse()
                resp.read()
                with lock:
                    codes[resp.status] = codes.get(resp.status, 0) + 1
            # One round per second per poller.
            time.sleep(max(0.0, start + second + 1 - time.monotonic()))
        for c in conns.values():
            c.close()

    began = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=40) as ex:
        list(ex.map(run, range(0, pollers, 25)))
    took = time.monotonic() - began  # `seconds`, or more when kube-fanout is slower (sanitizers)
    upstream = delta(apiserver_requests(cluster, "pods"), before)
    sent = sum(codes.values())
    print(f"pollers: {sent} requests {codes} in {took:.1f}s; upstream pods requests: {upstream}")
    # A consistent GET the cache cannot prove current within 3 s (kube-fanout overloaded: a
    # sanitizer on a loaded machine) is refused with 429 and Retry-After, never passed through.
    refused = codes.get(429, 0)
    assert codes.get(200, 0) + refused == sent >= pollers * seconds * 0.9
    assert refused <= 0.01 * sent, codes
    # No GET or full LIST of pods reached the apiserver: at most the consistent reads' coalesced
    # probes (LIST limit=1, at most 20 per second of the run) and short progress watches.
    assert upstream.get("GET", 0) == 0
    assert upstream.get("LIST", 0) <= 20 * (took + 5)
    # 5% of the requests at the designed 10 s; the probes are bounded per second, so a slower
    # run (a sanitizer: 577 in 10,000 under asan on a loaded machine) may have more.
    assert sum(upstream.values()) <= 0.05 * sent * max(1.0, took / seconds)
