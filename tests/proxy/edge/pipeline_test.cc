#include "proxy/edge/pipeline.h"

#include <catch2/catch.hpp>

#include "absl/strings/str_join.h"
#include "tests/proxy/edge/test_support.h"

namespace kf::test {
namespace {

using Trace = std::vector<std::string>;

// Notes its name; answers 200 or declines.
class TraceHandler : public Handler {
 public:
  TraceHandler(std::string name, Trace& trace, bool serves = true)
      : name_(std::move(name)), trace_(trace), serves_(serves) {}
  asio::awaitable<bool> Serve(Exchange& x) override {
    trace_.push_back(name_);
    if (!serves_) co_return false;
    const std::string body = name_;
    co_await WriteWhole(*x.response, 200, "text/plain", body);
    co_return true;
  }

 private:
  std::string name_;
  Trace& trace_;
  bool serves_;
};

// Notes its name before and after the rest of the chain, or refuses with a 429.
class TraceFilter : public Filter {
 public:
  TraceFilter(std::string name, Trace& trace, bool rejects = false)
      : name_(std::move(name)), trace_(trace), rejects_(rejects) {}
  asio::awaitable<void> Serve(Exchange& x, const Next& next) override {
    trace_.push_back(name_);
    if (rejects_) {
      const KubeStatus status{429, "TooManyRequests", "no", 1};
      co_await x.Reject(status, name_ + " said no");
      co_return;
    }
    co_await next(x);
    trace_.push_back(name_ + ":after");
  }

 private:
  std::string name_;
  Trace& trace_;
  bool rejects_;
};

struct Stages {
  Trace trace;
  TraceHandler local{"local", trace};
  TraceHandler cache{"cache", trace};
  TraceHandler declining_cache{"cache", trace, /*serves=*/false};
  TraceHandler relay{"relay", trace};
  TraceFilter front1{"front1", trace};
  TraceFilter front2{"front2", trace};
  TraceFilter pass1{"pass1", trace};
  TraceFilter pass2{"pass2", trace};
  TraceFilter refuses{"refuses", trace, /*rejects=*/true};
  Logger log{2, Logger::Level::kError};
  RouteStats stats;

  PipelineStages Make(Handler* cache_handler) {
    PipelineStages s;
    s.routes.is_local = [](std::string_view path) { return path == "/healthz"; };
    s.routes.is_cached = [](const RequestInfo& info) { return info.resource == "pods"; };
    s.local = &local;
    s.cache = cache_handler;
    s.relay = &relay;
    s.front = {&front1, &front2};
    s.passthrough = {&pass1, &pass2};
    return s;
  }

  // Serves `r` through a pipeline of these stages; the exchange as it ended.
  Exchange Serve(PipelineStages s, TestRequest& r, RecordingResponse& resp) {
    asio::io_context ioc;
    Pipeline pipeline(std::move(s), log, stats);
    Exchange x{r.request, &resp, r.stop};
    Run(ioc, pipeline.Serve(x));
    pipeline.Log(x, "10.0.0.7:1234");
    return x;
  }
  std::string Joined() const { return absl::StrJoin(trace, " "); }
};

constexpr std::string_view kRelayed =
    "front1 front2 pass1 pass2 relay pass2:after pass1:after front2:after front1:after";

TEST_CASE("Pipeline takes each route through its stages, filters in order") {
  enum class Cache { kServes, kDeclines, kNone };
  struct Row {
    std::string_view what;
    http::verb method;
    std::string_view target;
    Cache cache;
    std::string_view trace;
    Route route;
    Answer answer;
  };
  const Row rows[] = {
      {"a local path: the local handler alone, no filter", http::verb::get, "/healthz",
       Cache::kServes, "local", Route::kLocal, Answer::kLocal},
      {"a cached read: front filters, then the cache", http::verb::get, "/api/v1/pods",
       Cache::kServes, "front1 front2 cache front2:after front1:after", Route::kCache,
       Answer::kCache},
      {"a read the cache declined: on through the passthrough filters to the relay",
       http::verb::get, "/api/v1/pods", Cache::kDeclines,
       "front1 front2 cache pass1 pass2 relay pass2:after pass1:after front2:after front1:after",
       Route::kPassthrough, Answer::kPassthrough},
      {"a cached resource without a cache handler", http::verb::get, "/api/v1/pods", Cache::kNone,
       kRelayed, Route::kPassthrough, Answer::kPassthrough},
      {"a write", http::verb::post, "/api/v1/namespaces/ns/pods", Cache::kServes, kRelayed,
       Route::kPassthrough, Answer::kPassthrough},
      {"an upgrade", http::verb::get, "/api/v1/namespaces/ns/pods/p/exec", Cache::kServes, kRelayed,
       Route::kTunnel, Answer::kTunnel},
  };
  for (const Row& row : rows) {
    INFO(row.what);
    Stages st;
    TestRequest r(row.method, std::string(row.target));
    if (row.route == Route::kTunnel) {
      r.fields.set(http::field::connection, "Upgrade");
      r.fields.set(http::field::upgrade, "SPDY/3.1");
    }
    Handler* cache = row.cache == Cache::kServes     ? &st.cache
                     : row.cache == Cache::kDeclines ? &st.declining_cache
                                                     : nullptr;
    RecordingResponse resp;
    Exchange x = st.Serve(st.Make(cache), r, resp);
    CHECK(st.Joined() == row.trace);
    CHECK(x.route == row.route);
    CHECK(x.answer == row.answer);
    const std::string_view answered_by = row.answer == Answer::kLocal   ? "local"
                                         : row.answer == Answer::kCache ? "cache"
                                                                        : "relay";
    CHECK(resp.body == answered_by);
    CHECK(st.stats.count(row.answer) == 1);
  }
}

TEST_CASE("Pipeline stops at a filter that rejects: nothing after it runs, the answer is a 429") {
  struct Row {
    bool in_front;
    std::string_view trace;
  };
  const Row rows[] = {
      {true, "front1 refuses front1:after"},
      {false, "front1 front2 cache pass1 refuses pass1:after front2:after front1:after"},
  };
  for (const Row& row : rows) {
    Stages st;
    TestRequest r(http::verb::get, "/api/v1/pods");
    RecordingResponse resp;
    PipelineStages s = st.Make(&st.declining_cache);
    (row.in_front ? s.front : s.passthrough) = {row.in_front ? &st.front1 : &st.pass1, &st.refuses,
                                                row.in_front ? &st.front2 : &st.pass2};
    Exchange x = st.Serve(std::move(s), r, resp);
    CHECK(st.Joined() == row.trace);
    CHECK(x.answer == Answer::kRejected);
    CHECK(x.error == "refuses said no");
    REQUIRE(resp.head.has_value());
    CHECK(resp.head->status == 429);
    CHECK(resp.head->fields[http::field::retry_after] == "1");
    CHECK(resp.ended);
    CHECK(st.stats.count(Answer::kRejected) == 1);
  }
}

}  // namespace
}  // namespace kf::test

namespace kf::test {
namespace {

TEST_CASE("A request record keeps its own copy of every field, moved or not") {
  auto method = std::make_unique<std::string>("GET");
  auto uri = std::make_unique<std::string>("/api/v1/pods?watch=1");
  std::string agent = "kubelet/v1.36.3 (linux/amd64) kubernetes/abcdef";
  RequestLogFields fields{.method = *method,
                          .uri = *uri,
                          .verb = "watch",
                          .resource = "pods",
                          .user_agent = agent,
                          .accept = "",
                          .upstream = "",
                          .error = "client closed",
                          .answer = Answer::kCache,
                          .h2 = true,
                          .start = absl::UnixEpoch()};
  RequestRecord record(fields);
  // What the views pointed into goes away; the record's bytes stay.
  method.reset();
  uri.reset();
  agent.assign(agent.size(), 'x');
  RequestRecord moved = std::move(record);
  const RequestLogFields& kept = moved.fields();
  CHECK(kept.method == "GET");
  CHECK(kept.uri == "/api/v1/pods?watch=1");
  CHECK(kept.verb == "watch");
  CHECK(kept.resource == "pods");
  CHECK(kept.user_agent == "kubelet/v1.36.3 (linux/amd64) kubernetes/abcdef");
  CHECK(kept.accept.empty());
  CHECK(kept.error == "client closed");
  CHECK(kept.answer == Answer::kCache);
  CHECK(kept.h2);
}

}  // namespace
}  // namespace kf::test
