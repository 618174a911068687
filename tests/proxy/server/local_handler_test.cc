#include "proxy/server/local_handler.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <vector>

#include "proxy/serve/serve_metrics.h"
#include "proxy/server/metrics.h"
#include "proxy/server/process_metrics.h"
#include "tests/proxy/edge/test_support.h"

namespace kf::test {
namespace {

struct Local {
  asio::io_context ioc;
  HealthChecks health;
  int renders = 0;
  LocalHandler handler{health, [this] {
                         ++renders;
                         return std::string("kube_fanout_up 1\n");
                       }};
  // Serves `target` over a loopback connection; whether the handler answered, and what the
  // client read.
  std::pair<bool, ParsedResponse> Serve(http::verb method, std::string target) {
    WireCall w(ioc, method, std::move(target));
    const bool served = Run(ioc, handler.Serve(w.x));
    return {served, ParseResponse(w.pair.ReadAvailable(), method == http::verb::head)};
  }
};

TEST_CASE("LocalHandler renders /metrics in the Prometheus text format on each request") {
  Local l;
  auto [served, got] = l.Serve(http::verb::get, "/metrics");
  CHECK(served);
  REQUIRE(got.done);
  CHECK(got.message.result_int() == 200);
  CHECK(got.message[http::field::content_type] == "text/plain; version=0.0.4; charset=utf-8");
  CHECK(got.message.body() == "kube_fanout_up 1\n");
  CHECK(l.renders == 1);
}

TEST_CASE("LocalHandler answers the health endpoints as HealthChecks words them") {
  Local l;
  auto [ready, ok] = l.Serve(http::verb::get, "/readyz");
  CHECK(ready);
  CHECK(ok.message.result_int() == 200);
  CHECK(ok.message.body() == "ok");

  l.health.SetShuttingDown();
  auto [draining, failed] = l.Serve(http::verb::get, "/readyz");
  CHECK(draining);
  CHECK(failed.message.result_int() == 500);
  CHECK(failed.message.body().find("[-]shutdown failed") != std::string::npos);

  auto [head_served, head] = l.Serve(http::verb::head, "/livez");
  CHECK(head_served);
  CHECK(head.done);
  CHECK(head.message[http::field::content_length] == "2");
  CHECK(head.consumed == head.raw.size());
}

TEST_CASE("LocalHandler declines, writing nothing, a path that is not its own") {
  Local l;
  CHECK_FALSE(LocalHandler::Serves("/version"));
  auto [served, got] = l.Serve(http::verb::get, "/version");
  CHECK_FALSE(served);
  CHECK(got.raw.empty());
  CHECK(l.renders == 0);
}

}  // namespace
}  // namespace kf::test

namespace kf {
namespace {

TEST_CASE("RenderProcessMetrics reports this process's memory, CPU, descriptors and start") {
  const std::string text = RenderMetrics({RenderProcessMetrics});
  auto value = [&text](const std::string& name) {
    const size_t at = text.find("\n" + name + " ");
    REQUIRE(at != std::string::npos);
    return std::stod(text.substr(at + name.size() + 2));
  };
  CHECK(value("process_resident_memory_bytes") > 1 << 20);
  CHECK(value("process_cpu_seconds_total") >= 0);
  CHECK(value("process_open_fds") >= 3);
  CHECK(value("process_max_fds") >= value("process_open_fds"));
  const double start = value("process_start_time_seconds");
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  CHECK(start > now - 24 * 3600);
  CHECK(start <= now + 1);
}

}  // namespace
}  // namespace kf

namespace kf {
namespace {

TEST_CASE("Metric values keep every digit (a byte counter past a million is not rounded)") {
  CacheServeStats serve;
  serve.bytes_written = 1234567891;
  serve.declined = 3;
  const std::string text =
      RenderMetrics({[&](metrics::Writer& w) { RenderServeMetrics(w, serve); },
                     [&](metrics::Writer& w) { RenderWatchWriteMetrics(w, serve); }});
  CHECK(text.find("\nkube_fanout_cache_bytes_written_total 1234567891\n") != std::string::npos);
  CHECK(text.find("\nkube_fanout_cache_declined_total 3\n") != std::string::npos);
}

TEST_CASE("OpenFds counts descriptors as they open and close, as a listing of /proc/self/fd") {
  auto listed = [] {
    size_t n = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
      (void)entry;
      ++n;
    }
    return n - 1;  // The listing's own descriptor.
  };
  const size_t before = OpenFds();
  CHECK(before == listed());
  std::vector<int> fds;
  for (int i = 0; i < 10; ++i) {
    fds.push_back(open("/dev/null", O_RDONLY | O_CLOEXEC));
    REQUIRE(fds.back() >= 0);
  }
  CHECK(OpenFds() == before + 10);
  CHECK(OpenFds() == listed());
  for (int fd : fds) close(fd);
  CHECK(OpenFds() == before);
}

}  // namespace
}  // namespace kf
