#include "proxy/serve/list_response.h"

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "proxy/edge/gzip.h"
#include "proxy/serve/cacheable.h"
#include "rapidjson/document.h"
#include "tests/cache/test_objects.h"
#include "tests/proxy/edge/test_support.h"

namespace kf::test {
namespace {

using testing::Pod;
using testing::PodsType;

// A pods cache filled in memory: ns/a@5 on node n1, ns/b@6, other/c@7, listed at RV 10.
struct Pods {
  Pods() { cacher.Replace({Pod("ns", "a", 5, "n1"), Pod("ns", "b", 6), Pod("other", "c", 7)}, 10); }

  // Lists `target` from the cache as the cache handler would, after its RV checks.
  bool List(FilterCall& call, uint64_t at_rv = 0) {
    const auto filter = FilterFor(call.r.request.info, cacher.type());
    REQUIRE(filter.has_value());
    const ListPlan plan = PlanList(call.r.request.info, *filter, cacher.type());
    return Run(ioc, WriteList(call.x, cacher, *filter, plan, at_rv, stats));
  }

  asio::io_context ioc;
  Cacher cacher{PodsType(), EventRingLimits{}, [] { return std::chrono::steady_clock::now(); }};
  CacheServeStats stats;
};

rapidjson::Document Json(const std::string& body) {
  rapidjson::Document d;
  d.Parse(body.data(), body.size());
  REQUIRE_FALSE(d.HasParseError());
  return d;
}

std::vector<std::string> ItemNames(const rapidjson::Document& list) {
  std::vector<std::string> names;
  for (const auto& item : list["items"].GetArray()) {
    names.emplace_back(item["metadata"]["name"].GetString());
  }
  return names;
}

TEST_CASE("WriteList answers a namespace's LIST as the apiserver encodes it") {
  Pods p;
  FilterCall call(http::verb::get, "/api/v1/namespaces/ns/pods");
  CHECK(p.List(call));
  REQUIRE(call.resp.head.has_value());
  CHECK(call.resp.head->status == 200);
  CHECK(call.resp.head->fields[http::field::content_type] == "application/json");
  CHECK(call.resp.head->framing == ResponseHead::Framing::kWhole);
  CHECK(call.resp.head->length == call.resp.body.size());
  CHECK(call.resp.body.ends_with("]}\n"));
  CHECK(call.resp.ended);
  const auto list = Json(call.resp.body);
  CHECK(std::string(list["kind"].GetString()) == "PodList");
  CHECK(std::string(list["apiVersion"].GetString()) == "v1");
  CHECK(std::string(list["metadata"]["resourceVersion"].GetString()) == "10");
  CHECK_FALSE(list["metadata"].HasMember("continue"));
  CHECK(ItemNames(list) == std::vector<std::string>{"a", "b"});
  CHECK(p.stats.lists == 1);
  CHECK(p.stats.bytes_written == call.resp.body.size());
}

TEST_CASE("WriteList pages with a continue token that the next page starts from") {
  Pods p;
  FilterCall first(http::verb::get, "/api/v1/pods?limit=2");
  CHECK(p.List(first));
  const auto page1 = Json(first.resp.body);
  CHECK(ItemNames(page1) == std::vector<std::string>{"a", "b"});
  REQUIRE(page1["metadata"].HasMember("continue"));
  CHECK(page1["metadata"]["remainingItemCount"].GetInt() == 1);

  FilterCall second(http::verb::get, std::string("/api/v1/pods?limit=2&continue=") +
                                         page1["metadata"]["continue"].GetString());
  CHECK(p.List(second, 10));
  const auto page2 = Json(second.resp.body);
  CHECK(ItemNames(page2) == std::vector<std::string>{"c"});
  CHECK_FALSE(page2["metadata"].HasMember("continue"));
}

// The namespace "ns" hashes to 0x08b3…, "other" to 0x0a24…: this selects ns's pods.
constexpr char kNsShard[] =
    "shardRange%28object.metadata.namespace%2C%270x0000000000000000%27%2C%270x0a00000000000000%27%"
    "29";

TEST_CASE("WriteList filters by a shard selector and echoes it in shardInfo, as the apiserver") {
  Pods p;
  p.cacher.SetUpstreamSharding(true);
  FilterCall call(http::verb::get, absl::StrCat("/api/v1/pods?limit=1&shardSelector=", kNsShard));
  const auto filter = FilterFor(call.r.request.info, p.cacher);
  REQUIRE(filter.has_value());
  const ListPlan plan = PlanList(call.r.request.info, *filter, p.cacher.type());
  CHECK(Run(p.ioc, WriteList(call.x, p.cacher, *filter, plan, 0, p.stats)));
  // remainingItemCount counts the collection, not the shard (SelectionPredicate.Empty).
  CHECK(call.resp.body.find(
            ",\"remainingItemCount\":2,\"shardInfo\":{\"selector\":\"shardRange("
            "object.metadata.namespace, '0x0000000000000000', '0x0a00000000000000')\"}},") !=
        std::string::npos);
  CHECK(ItemNames(Json(call.resp.body)) == std::vector<std::string>{"a"});
}

TEST_CASE("FilterFor reads a shard selector only as the upstream does") {
  Pods p;
  const std::string target = absl::StrCat("/api/v1/pods?shardSelector=", kNsShard);
  FilterCall call(http::verb::get, target);
  // Not known yet (no LIST answered): the apiserver answers.
  CHECK_FALSE(FilterFor(call.r.request.info, p.cacher).has_value());
  p.cacher.SetUpstreamSharding(false);  // Ignored, as the upstream ignores it.
  auto ignored = FilterFor(call.r.request.info, p.cacher);
  REQUIRE(ignored.has_value());
  CHECK(ignored->shard.Empty());
  p.cacher.SetUpstreamSharding(true);
  auto sharded = FilterFor(call.r.request.info, p.cacher);
  REQUIRE(sharded.has_value());
  CHECK_FALSE(sharded->shard.Empty());
  FilterCall bad(http::verb::get, "/api/v1/pods?shardSelector=bad%28");
  CHECK_FALSE(FilterFor(bad.r.request.info, p.cacher).has_value());
  FilterCall empty(http::verb::get, "/api/v1/pods?shardSelector=");
  REQUIRE(FilterFor(empty.r.request.info, p.cacher).has_value());
  // A GET has no shard selector at the apiserver (GetOptions): ignored.
  FilterCall get(http::verb::get, "/api/v1/namespaces/ns/pods/a?shardSelector=bad%28");
  CHECK(FilterFor(get.r.request.info, p.cacher).has_value());
}

TEST_CASE("WriteList declines, writing nothing, an exact RV that has left the window") {
  Pods p;
  FilterCall call(http::verb::get, "/api/v1/pods?resourceVersion=3&resourceVersionMatch=Exact");
  CHECK_FALSE(p.List(call, 3));
  CHECK_FALSE(call.resp.head.has_value());
  CHECK(p.stats.lists == 0);
}

TEST_CASE("PlanList reads the RV, exactness, limit and node index as the watch cache does") {
  const ResourceType pods = PodsType();
  const auto plan = [&pods](std::string target) {
    TestRequest r(http::verb::get, std::move(target));
    return PlanList(r.request.info, *FilterFor(r.request.info, pods), pods);
  };
  const ListPlan latest = plan("/api/v1/pods");
  CHECK_FALSE(latest.rv.has_value());
  CHECK_FALSE(latest.exact);
  CHECK(latest.page.limit == 0);

  const ListPlan rv0 = plan("/api/v1/pods?resourceVersion=0&limit=5");
  CHECK(rv0.rv == "0");
  CHECK(rv0.page.limit == 0);  // RV=0 ignores the limit.
  CHECK_FALSE(rv0.exact);

  CHECK(plan("/api/v1/pods?resourceVersion=7&resourceVersionMatch=Exact").exact);
  CHECK(plan("/api/v1/pods?resourceVersion=7&limit=5").exact);  // The legacy meaning.
  CHECK_FALSE(plan("/api/v1/pods?resourceVersion=7&resourceVersionMatch=NotOlderThan").exact);

  const ListPlan by_node = plan("/api/v1/pods?fieldSelector=spec.nodeName%3Dn1");
  CHECK(by_node.page.node_name_index == "n1");
}

// `count` pods in namespace "big", every third one app=db (the others app=web), listed at RV 1000:
// about 330 bytes each, so 600 make a list past the gzip threshold and 1,200 a cache built in the
// pool.
struct ManyPods {
  explicit ManyPods(int count) {
    std::vector<ObjectPtr> pods;
    for (int i = 0; i < count; ++i) {
      pods.push_back(
          Pod("big", absl::StrCat("p-", 10000 + i), 100 + i, "", i % 3 == 0 ? "db" : "web"));
    }
    cacher.Replace(std::move(pods), 1000);
  }

  struct Answer {
    std::string encoding, vary, body;
  };
  Answer List(const std::string& target, bool accept_gzip, ListBuilding where = {}) {
    FilterCall call(http::verb::get, target);
    if (accept_gzip) call.r.fields.set(http::field::accept_encoding, "gzip");
    const auto filter = FilterFor(call.r.request.info, cacher.type());
    REQUIRE(filter.has_value());
    const ListPlan plan = PlanList(call.r.request.info, *filter, cacher.type());
    REQUIRE(Run(ioc, WriteList(call.x, cacher, *filter, plan, 0, stats, where)));
    REQUIRE(call.resp.head.has_value());
    CHECK(call.resp.head->length == call.resp.body.size());
    CHECK(call.resp.ended);
    return {std::string(call.resp.head->fields[http::field::content_encoding]),
            std::string(call.resp.head->fields[http::field::vary]), call.resp.body};
  }

  asio::io_context ioc;
  Cacher cacher{PodsType(), EventRingLimits{}, [] { return std::chrono::steady_clock::now(); }};
  CacheServeStats stats;
  // Where lists are built off the session's thread, and their shared compressed bytes.
  ListPool pool{1};
  ListBuilds builds{pool};
  GzipCache gzip{8 << 20};
  const ListBuilding building{.builds = &builds, .gzip = &gzip};
};

TEST_CASE("WriteList builds a large list in the pool: the same bytes, compressed once per list") {
  ManyPods p(1200);
  REQUIRE(p.cacher.object_count() >= ListBuilding::kPoolObjects);
  const ListBuilding& building = p.building;
  GzipCache& gzip = p.gzip;
  const std::string all = "/api/v1/pods?resourceVersion=0";

  // On the session's thread, compressed anew: what the pool's answers must equal.
  const auto plain = p.List(all, false);
  REQUIRE(plain.body.size() > kGzipThresholdBytes);
  CHECK(plain.body.starts_with(
      R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1000"},"items":[)"));
  CHECK(plain.encoding.empty());
  const auto inline_gzip = p.List(all, true);
  CHECK(inline_gzip.encoding == "gzip");
  CHECK(inline_gzip.vary == "Accept-Encoding");
  CHECK(inline_gzip.body.size() < plain.body.size() / 4);

  CHECK(p.List(all, false, building).body == plain.body);
  const auto first = p.List(all, true, building);
  const auto second = p.List(all, true, building);
  CHECK(first.encoding == "gzip");
  CHECK(first.vary == "Accept-Encoding");
  CHECK(first.body == inline_gzip.body);
  CHECK(second.body == inline_gzip.body);
  GzipCache::Stats s = gzip.GetStats();
  CHECK(s.compressed == 1);
  CHECK(s.shared == 1);

  // Another selection is another answer, and so is the same one at the next RV.
  const std::string web = "/api/v1/pods?labelSelector=app%3Dweb&resourceVersion=0";
  const auto by_label = p.List(web, true, building);
  CHECK(by_label.encoding == "gzip");
  CHECK(by_label.body == p.List(web, true).body);
  CHECK(by_label.body != first.body);
  p.cacher.Apply(EventType::kModified, Pod("big", "p-10001", 2000, "", "web"));
  const auto after = p.List(all, true, building);
  CHECK(after.body == p.List(all, true).body);
  CHECK(after.body != first.body);
  s = gzip.GetStats();
  CHECK(s.compressed == 3);
  CHECK(s.shared == 1);
  CHECK(p.stats.lists == 9);
}

TEST_CASE("WriteList compresses a list of a smaller cache in the pool too, with the same bytes") {
  ManyPods p(600);
  REQUIRE(p.cacher.object_count() < ListBuilding::kPoolObjects);
  const ListBuilding& building = p.building;
  GzipCache& gzip = p.gzip;
  const std::string all = "/api/v1/namespaces/big/pods";
  const auto inline_gzip = p.List(all, true);
  REQUIRE(inline_gzip.encoding == "gzip");
  CHECK(p.List(all, true, building).body == inline_gzip.body);
  CHECK(p.List(all, true, building).body == inline_gzip.body);
  CHECK(gzip.GetStats().compressed == 1);
  CHECK(gzip.GetStats().shared == 1);
  // Past the threshold only: a small list goes as it is.
  const auto small = p.List("/api/v1/namespaces/big/pods?limit=3", true, building);
  CHECK(small.encoding.empty());
  CHECK(gzip.GetStats().compressed == 1);
}

TEST_CASE("WriteObject answers a cached object, and NotFound for a missing one") {
  Pods p;
  FilterCall found(http::verb::get, "/api/v1/namespaces/ns/pods/a");
  Run(p.ioc, WriteObject(found.x, p.cacher, p.stats));
  CHECK(found.resp.status() == 200);
  CHECK(found.resp.body == testing::PodJson("ns", "a", 5, "n1") + "\n");

  FilterCall missing(http::verb::get, "/api/v1/namespaces/other/pods/a");
  Run(p.ioc, WriteObject(missing.x, p.cacher, p.stats));
  CHECK(missing.resp.status() == 404);
  const auto status = Json(missing.resp.body);
  CHECK(std::string(status["kind"].GetString()) == "Status");
  CHECK(std::string(status["reason"].GetString()) == "NotFound");
  CHECK(std::string(status["message"].GetString()) == "pods \"a\" not found");
  CHECK(p.stats.gets == 2);
}

}  // namespace
}  // namespace kf::test
