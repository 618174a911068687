// CachedResources: what --cache-resources becomes once the upstream's discovery has answered,
// against a scripted upstream on loopback (reflector_test.cc has the reflectors' own rules).
#include "proxy/sync/cached_resources.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "tests/proxy/sync/scripted_upstream.h"

namespace kf {
namespace {

constexpr std::string_view kCoreV1Discovery =
    R"({"kind":"APIResourceList","groupVersion":"v1","resources":[)"
    R"({"name":"pods","namespaced":true,"kind":"Pod","verbs":["get","list","watch"]},)"
    R"({"name":"pods/status","namespaced":true,"kind":"Pod","verbs":["get"]},)"
    R"({"name":"nodes","namespaced":false,"kind":"Node","verbs":["get","list","watch"]}]})";

RequestInfo Info(std::string_view target) {
  auto info = RequestInfo::Parse("GET", target);
  REQUIRE(info.ok());
  return *info;
}

struct ResourcesRig {
  explicit ResourcesRig(const std::vector<std::string>& names)
      : resources(*ResourceSpec::ParseList(names), EventRingLimits{}, log) {
    upstream.lists = {test::PodList(5, {})};
  }
  asio::io_context ioc;
  test::ScriptedUpstream upstream{ioc};
  // Closed after the resources and their log are gone.
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file{std::tmpfile(), &std::fclose};
  std::FILE* sink = file.get();
  Logger log{fileno(sink), Logger::Level::kWarning};
  CachedResources resources;

  std::string Logged() const {
    std::fflush(sink);
    std::rewind(sink);
    std::string out;
    for (int c; (c = std::fgetc(sink)) != EOF;) out.push_back(static_cast<char>(c));
    return out;
  }

  bool StartUntil(const std::function<bool()>& done) {
    test::Spawn(ioc, test::ScriptedUpstream::Serve(&upstream));
    resources.Start(ioc, upstream.up.pool, upstream.up.pool, [] { return std::string(); });
    return test::RunUntil(ioc, done, std::chrono::seconds(5));
  }
  ~ResourcesRig() {
    resources.Stop();
    upstream.up.acceptor.close();
    test::RunUntil(
        ioc, [] { return false; }, std::chrono::milliseconds(50));
  }
};

}  // namespace

TEST_CASE(
    "a resource's kind and scope come from discovery: one the upstream does not serve is "
    "passed through",
    "[cached_resources]") {
  ResourcesRig rig({"pods", "nodes", "widgets.example.com/v1"});
  rig.upstream.documents["/api/v1"] = {200, std::string(kCoreV1Discovery)};
  rig.upstream.documents["/apis/example.com/v1"] = {404, "{}"};
  REQUIRE(rig.StartUntil([&] { return rig.resources.started() && rig.resources.AllSynced(); }));
  REQUIRE(rig.resources.entries().size() == 2);

  const CachedResources::Entry* pods = rig.resources.Find(Info("/api/v1/namespaces/ns/pods"));
  REQUIRE(pods != nullptr);
  CHECK(pods->cacher->type().kind == "Pod");
  CHECK(pods->cacher->type().namespaced);
  CHECK_FALSE(pods->cacher->type().list_items_have_type_meta);  // A built-in group.
  const CachedResources::Entry* nodes = rig.resources.Find(Info("/api/v1/nodes/n1"));
  REQUIRE(nodes != nullptr);
  CHECK(nodes->cacher->type().kind == "Node");
  CHECK_FALSE(nodes->cacher->type().namespaced);

  // Asked for, so covered; not served upstream, so nothing caches it.
  const RequestInfo widgets = Info("/apis/example.com/v1/namespaces/ns/widgets");
  CHECK(rig.resources.Covers(widgets));
  CHECK(rig.resources.Find(widgets) == nullptr);
  CHECK(rig.resources.Find(Info("/api/v1/namespaces/ns/secrets")) == nullptr);
  CHECK_FALSE(rig.resources.Covers(Info("/api/v1/namespaces/ns/secrets")));
  CHECK_THAT(rig.Logged(), Catch::Contains("cached resource not served by the upstream") &&
                               Catch::Contains("widgets.example.com/v1"));
}

TEST_CASE("a protobuf cache starts with its first use, not before", "[cached_resources]") {
  ResourcesRig rig({"pods"});
  rig.upstream.documents["/api/v1"] = {200, std::string(kCoreV1Discovery)};
  REQUIRE(rig.StartUntil([&] { return rig.resources.started() && rig.resources.AllSynced(); }));
  const CachedResources::Entry* pods = rig.resources.Find(Info("/api/v1/pods"));
  REQUIRE(pods != nullptr);
  REQUIRE(pods->proto_cacher != nullptr);
  CHECK_FALSE(pods->proto_started.load());
  const size_t lists = rig.upstream.list_targets.size();
  CHECK(lists == 1);  // The JSON cache's list only.
  CHECK(rig.resources.UseProtobuf(*pods) == pods->proto_cacher.get());
  CHECK(pods->proto_started.load());
  CHECK(test::RunUntil(rig.ioc, [&] { return rig.upstream.list_targets.size() > lists; }));
}

TEST_CASE("discovery that fails is asked again until it answers", "[cached_resources]") {
  ResourcesRig rig({"pods"});
  rig.upstream.documents["/api/v1"] = {503, "{}"};
  REQUIRE(rig.StartUntil([&] { return rig.upstream.document_targets.size() >= 2; }));
  CHECK_FALSE(rig.resources.started());
  rig.upstream.documents["/api/v1"] = {200, std::string(kCoreV1Discovery)};
  CHECK(test::RunUntil(
      rig.ioc, [&] { return rig.resources.started() && rig.resources.AllSynced(); },
      std::chrono::seconds(5)));
  CHECK(rig.resources.Find(Info("/api/v1/pods")) != nullptr);
}

}  // namespace kf
