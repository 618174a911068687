#include "tests/bench/proc_stats.h"

#include <unistd.h>

#include <catch2/catch.hpp>

namespace kf::bench {
namespace {

TEST_CASE("MetricSum adds the samples whose labels all match, whole labels only") {
  const std::string text =
      "# HELP apiserver_longrunning_requests x\n"
      "apiserver_longrunning_requests{component=\"apiserver\",resource=\"pods\",scope=\"cluster\","
      "verb=\"WATCH\"} 2\n"
      "apiserver_longrunning_requests{component=\"apiserver\",resource=\"pods\",scope="
      "\"namespace\",verb=\"WATCH\"} 1\n"
      "apiserver_longrunning_requests{resource=\"pods\",subresource=\"log\",verb=\"CONNECT\"} 4\n"
      "apiserver_longrunning_requests{resource=\"endpointslices\",verb=\"WATCH\"} 1 1700000000\n"
      "apiserver_longrunning_requests_other{resource=\"pods\",verb=\"WATCH\"} 100\n"
      "kube_fanout_open_connections 7\n";
  CHECK(MetricSum(text, "apiserver_longrunning_requests",
                  {"verb=\"WATCH\"", "resource=\"pods\""}) == 3);
  CHECK(MetricSum(text, "apiserver_longrunning_requests", {"resource=\"endpointslices\""}) == 1);
  CHECK(MetricSum(text, "apiserver_longrunning_requests", {"subresource=\"pods\""}) ==
        std::nullopt);
  CHECK(MetricSum(text, "kube_fanout_open_connections", {}) == 7);
  CHECK(MetricSum(text, "absent", {}) == std::nullopt);
}

TEST_CASE("ReadProc reads this process's RSS, CPU and threads") {
  auto s = ReadProc(getpid());
  REQUIRE(s.has_value());
  CHECK(s->rss_kib > 0);
  CHECK(s->threads >= 1);
  CHECK(s->cpu_seconds >= 0);
}

}  // namespace
}  // namespace kf::bench
