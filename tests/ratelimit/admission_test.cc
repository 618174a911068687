#include "ratelimit/admission.h"

#include <catch2/catch.hpp>

namespace kf::ratelimit {
namespace {

using namespace std::chrono_literals;

struct FakeClock {
  Admission::Clock::time_point t{};
  std::function<Admission::Clock::time_point()> fn() {
    return [this] { return t; };
  }
};

RequestAttributes Req(std::string user, std::string verb = "get", std::string resource = "pods") {
  RequestAttributes a;
  a.user = std::move(user);
  a.verb = std::move(verb);
  a.resource = std::move(resource);
  a.namespace_ = "default";
  a.long_running = a.verb == "watch";
  return a;
}

// One limited level with `seats` seats (the implicit catch-all level takes no share here
// because everything matches the one schema), queues of `queue_length`.
Config OneLevel(int seats, int queue_length, TokenBucketConfig bucket = {}) {
  Config c;
  PriorityLevelConfig l;
  l.name = "l";
  l.concurrency_shares = 1000;
  l.queues = 64;
  l.hand_size = 2;
  l.queue_length_limit = queue_length;
  l.queue_wait = 1000ms;
  c.priority_levels = {l};
  c.total_concurrency = seats;
  c.flow_schemas = {FlowSchemaConfig{"all", "l", 100, Distinguisher::kByUser, {}, bucket}};
  return c;
}

// The one schema with a budget of its own for reads the router sends to the cache.
Config WithCachedReads(Config c, TokenBucketConfig cached) {
  c.flow_schemas[0].cached_read_rate_limit = cached;
  return c;
}

RequestAttributes CachedRead(std::string user) {
  RequestAttributes a = Req(std::move(user));
  a.cached_read = true;
  return a;
}

// Declared after the Admission it records, so destroyed first: its held seats are released
// one at a time while `log` and `held` are still whole, because each release lets a queued
// request in and calls that request's `done` — a callback into this Recorder. (Letting
// ~vector destroy the seats ran those callbacks on a vector half destroyed: the seat admitted
// last was pushed past the range being destroyed and leaked, with the State it points to.)
struct Recorder {
  std::vector<std::string> log;
  std::vector<Decision> held;
  Recorder() = default;
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;
  ~Recorder() {
    while (!held.empty()) {
      Decision d = std::move(held.back());
      held.pop_back();
      d.seat.Release();
    }
  }
  Admission::Done For(std::string name) {
    return [this, name](Decision d) {
      log.push_back(name + (d.admitted ? ":ok" : ":" + d.reject_reason));
      if (d.admitted) held.push_back(std::move(d));
    };
  }
};

TEST_CASE("A flow's token bucket answers polling above its rate with 429 at once") {
  FakeClock clock;
  Admission a(OneLevel(100, 10, {1, 2}), clock.fn());
  Recorder r;
  a.Admit(Req("u"), r.For("1"));
  a.Admit(Req("u"), r.For("2"));
  Decision rejected;
  a.Admit(Req("u"), [&](Decision d) { rejected = std::move(d); });
  CHECK(r.log == std::vector<std::string>{"1:ok", "2:ok"});
  CHECK_FALSE(rejected.admitted);
  CHECK(rejected.reject_reason == "rate-limited");
  CHECK(rejected.retry_after_seconds == 1);
  a.Admit(Req("other"), r.For("other"));       // Another flow has its own bucket.
  a.Admit(Req("u", "watch"), r.For("watch"));  // Watches are not metered.
  clock.t += 1s;
  a.Admit(Req("u"), r.For("3"));
  CHECK(r.log == std::vector<std::string>{"1:ok", "2:ok", "other:ok", "watch:ok", "3:ok"});
  auto stats = a.SchemaStatsSnapshot();
  CHECK(stats["all"].admitted == 5);
  CHECK(stats["all"].rejected["rate-limited"] == 1);
}

TEST_CASE("Reads for the cache are metered by their own bucket, apart from passthrough") {
  FakeClock clock;
  Admission a(WithCachedReads(OneLevel(100, 10, {1, 1}), {100, 3}), clock.fn());
  Recorder r;
  const RequestAttributes cached = CachedRead("u");
  for (int i = 0; i < 3; ++i) a.Admit(cached, r.For("cached"));
  a.Admit(cached, r.For("cached-past-burst"));
  // The passthrough bucket is untouched by those: one GET for the apiserver, then 429.
  a.Admit(Req("u"), r.For("passthrough"));
  a.Admit(Req("u"), r.For("passthrough-past-burst"));
  CHECK(r.log == std::vector<std::string>{"cached:ok", "cached:ok", "cached:ok",
                                          "cached-past-burst:rate-limited", "passthrough:ok",
                                          "passthrough-past-burst:rate-limited"});
  // Without a cachedReadRateLimit, a read for the cache pays the passthrough price.
  Admission plain(OneLevel(100, 10, {1, 1}), clock.fn());
  Recorder p;
  plain.Admit(cached, p.For("cached"));
  plain.Admit(Req("u"), p.For("passthrough"));
  CHECK(p.log == std::vector<std::string>{"cached:ok", "passthrough:rate-limited"});
}

TEST_CASE("A read for the cache that passes through pays the passthrough price, unqueued") {
  FakeClock clock;
  Admission a(WithCachedReads(OneLevel(1, 10, {1, 2}), {100, 100}), clock.fn());
  Recorder r;
  const RequestAttributes cached = CachedRead("u");
  a.Admit(cached, r.For("cached"));
  REQUIRE(r.log == std::vector<std::string>{"cached:ok"});
  const Flow flow = r.held.front().flow;
  // The only seat is held (by this read): the charge neither waits for one nor takes one.
  CHECK(a.ChargePassthrough(flow).admitted);
  CHECK(a.ChargePassthrough(flow).admitted);
  const Decision refused = a.ChargePassthrough(flow);
  CHECK_FALSE(refused.admitted);
  CHECK(refused.reject_reason == "rate-limited");
  CHECK(refused.retry_after_seconds == 1);
  CHECK_FALSE(refused.seat.held());
  auto level = a.LevelStatsSnapshot()["l"];
  CHECK(level.executing == 1);
  CHECK(level.queued == 0);
  CHECK(a.SchemaStatsSnapshot()["all"].rejected["rate-limited"] == 1);
  // The same bucket a passthrough request of the flow draws from.
  a.Admit(Req("u"), r.For("passthrough"));
  CHECK(r.log.back() == "passthrough:rate-limited");
  clock.t += 1s;
  CHECK(a.ChargePassthrough(flow).admitted);
  // A schema without a cachedReadRateLimit charged the passthrough price on admission.
  Admission plain(OneLevel(1, 10, {1, 1}), clock.fn());
  for (int i = 0; i < 3; ++i) CHECK(plain.ChargePassthrough(flow).admitted);
}

TEST_CASE("A ByUser flow tells the pods of one ServiceAccount apart by their node") {
  FakeClock clock;
  Admission a(OneLevel(100, 10, {1, 1}), clock.fn());
  Recorder r;
  auto on = [](std::string bound_to) {
    RequestAttributes q = Req("system:serviceaccount:logging:rsyslog");
    q.bound_to = std::move(bound_to);
    return q;
  };
  CHECK(a.Classify(on("node/n1")).key == "all/system:serviceaccount:logging:rsyslog node/n1");
  CHECK(a.Classify(on("")).key == "all/system:serviceaccount:logging:rsyslog");
  a.Admit(on("node/n1"), r.For("n1"));
  a.Admit(on("node/n2"), r.For("n2"));  // Another node: its own bucket.
  a.Admit(on("node/n1"), r.For("n1-again"));
  a.Admit(on("pod/p1"), r.For("pod"));  // A token naming a pod and no node.
  a.Admit(on(""), r.For("unbound"));    // The account's own flow, apart from its pods'.
  CHECK(r.log == std::vector<std::string>{"n1:ok", "n2:ok", "n1-again:rate-limited", "pod:ok",
                                          "unbound:ok"});
}

TEST_CASE("Requests past the seats wait and are let in as seats free") {
  FakeClock clock;
  Admission a(OneLevel(1, 10), clock.fn());
  Recorder r;
  CHECK(a.Admit(Req("u"), r.For("first")) == 0);
  CHECK(a.Admit(Req("u"), r.For("second")) != 0);  // Queued.
  CHECK(r.log == std::vector<std::string>{"first:ok"});
  CHECK(a.LevelStatsSnapshot()["l"].queued == 1);
  clock.t += 200ms;
  r.held.front().seat.Release();
  CHECK(r.log == std::vector<std::string>{"first:ok", "second:ok"});
  CHECK(r.held.back().waited == 200ms);
  auto level = a.LevelStatsSnapshot()["l"];
  CHECK(level.executing == 1);
  CHECK(level.queued_total == 1);
}

TEST_CASE("A noisy flow fills its own queues while another flow is served in turn") {
  FakeClock clock;
  Admission a(OneLevel(1, 50), clock.fn());
  Recorder r;
  a.Admit(Req("noisy"), r.For("n0"));
  for (int i = 1; i <= 20; ++i) a.Admit(Req("noisy"), r.For("n" + std::to_string(i)));
  a.Admit(Req("quiet"), r.For("q"));
  // Round robin over non-empty queues: the quiet flow is within the first few turns, not
  // behind the noisy flow's 20.
  for (int i = 0; i < 3 && r.log.back() != "q:ok"; ++i) {
    r.held.front().seat.Release();
    r.held.erase(r.held.begin());
  }
  CHECK(r.log.back() == "q:ok");
}

TEST_CASE("A full queue and a wait past the limit are 429s") {
  FakeClock clock;
  Admission a(OneLevel(1, 1), clock.fn());
  Recorder r;
  a.Admit(Req("u"), r.For("a"));
  a.Admit(Req("u"), r.For("b"));  // Queued (one of two dealt queues).
  a.Admit(Req("u"), r.For("c"));  // The other dealt queue.
  a.Admit(Req("u"), r.For("d"));  // Both full.
  CHECK(r.log == std::vector<std::string>{"a:ok", "d:queue-full"});
  clock.t += 999ms;
  a.ExpireQueued();
  CHECK(r.log.size() == 2);
  clock.t += 1ms;
  a.ExpireQueued();
  CHECK(r.log == std::vector<std::string>{"a:ok", "d:queue-full", "b:time-out", "c:time-out"});
  CHECK(a.SchemaStatsSnapshot()["all"].rejected["time-out"] == 2);
}

TEST_CASE("A cancelled request leaves its queue and is never decided") {
  FakeClock clock;
  Admission a(OneLevel(1, 5), clock.fn());
  Recorder r;
  a.Admit(Req("u"), r.For("a"));
  const uint64_t t = a.Admit(Req("u"), r.For("b"));
  CHECK(a.Cancel(t));
  CHECK_FALSE(a.Cancel(t));
  r.held.front().seat.Release();
  CHECK(r.log == std::vector<std::string>{"a:ok"});
  CHECK(a.LevelStatsSnapshot()["l"].executing == 0);
}

TEST_CASE("The default configuration classifies as the apiserver's defaults would") {
  Admission a(DefaultConfig());
  RequestAttributes admin = Req("kf-admin");
  admin.groups = {"system:masters", "system:authenticated"};
  CHECK(a.Classify(admin).level == "exempt");
  RequestAttributes node = Req("system:node:n1");
  node.groups = {"system:nodes", "system:authenticated"};
  CHECK(a.Classify(node).level == "system");
  RequestAttributes sa = Req("system:serviceaccount:logging:fluentd");
  sa.groups = {"system:serviceaccounts", "system:serviceaccounts:logging"};
  CHECK(a.Classify(sa).level == "workload");
  CHECK(a.Classify(sa).key == "service-accounts/system:serviceaccount:logging:fluentd");
  // Every answer whole unless an operator's schema says otherwise.
  CHECK_FALSE(a.Classify(sa).drop_managed_fields);
  Config dropping = DefaultConfig();
  dropping.flow_schemas[2].drop_managed_fields = true;  // service-accounts
  a.Reconfigure(dropping);
  CHECK(a.Classify(sa).drop_managed_fields);
  CHECK_FALSE(a.Classify(node).drop_managed_fields);
  a.Reconfigure(DefaultConfig());
  // Reads for the cache of a service account or a user: a budget 50 times the passthrough one.
  int with_cached_budget = 0;
  for (const FlowSchemaConfig& f : DefaultConfig().flow_schemas) {
    if (!f.cached_read_rate_limit) continue;
    ++with_cached_budget;
    CHECK(f.cached_read_rate_limit->qps == 50 * f.rate_limit.qps);
    CHECK(f.cached_read_rate_limit->burst == 50 * f.rate_limit.burst);
  }
  CHECK(with_cached_budget == 2);
  RequestAttributes anon = Req("");
  anon.user_agent = "curl/8";
  anon.source = "10.0.0.7";
  CHECK(a.Classify(anon).level == "global-default");
  CHECK(a.Classify(anon).key == "global-default/curl/8@10.0.0.7");
  // Exempt: never limited.
  int admitted = 0;
  for (int i = 0; i < 1000; ++i) a.Admit(admin, [&](Decision d) { admitted += d.admitted; });
  CHECK(admitted == 1000);
}

TEST_CASE("Reconfiguring keeps seats held under the old configuration working") {
  FakeClock clock;
  Admission a(OneLevel(1, 5), clock.fn());
  Recorder r;
  a.Admit(Req("u"), r.For("a"));
  a.Admit(Req("u"), r.For("b"));  // Queued in the old level.
  a.Reconfigure(OneLevel(5, 5));
  a.Admit(Req("u"), r.For("c"));  // New level: free seats.
  r.held.front().seat.Release();  // Frees the old level's seat: b gets in.
  CHECK(r.log == std::vector<std::string>{"a:ok", "c:ok", "b:ok"});
}

}  // namespace
}  // namespace kf::ratelimit
