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
