#include "proxy/serve/cacheable.h"

#include <catch2/catch.hpp>

namespace kf {
namespace {

namespace http = boost::beast::http;

RequestInfo Info(std::string_view method, std::string_view target) {
  auto info = RequestInfo::Parse(method, target);
  REQUIRE(info.ok());
  return *std::move(info);
}

struct CacheableRow {
  std::string_view method;
  std::string_view target;
  bool cacheable;
  std::string_view accept = "";
  std::string_view extra_field = "";  // A field set to "x" besides Accept.
};

TEST_CASE("Cacheable answers only the reads whose form the cache serves exactly") {
  const CacheableRow rows[] = {
      {"GET", "/api/v1/pods", true},
      {"GET", "/api/v1/namespaces/ns/pods/p", true},
      {"GET", "/api/v1/pods?watch=1", true},
      {"GET", "/api/v1/watch/namespaces/ns/pods/p", true},
      {"GET", "/api/v1/pods?limit=10&resourceVersion=0", true},
      {"GET", "/api/v1/pods?resourceVersionMatch=NotOlderThan&resourceVersion=5", true},
      {"GET", "/api/v1/pods?resourceVersionMatch=Exact&resourceVersion=5", true},
      {"GET", "/api/v1/pods", true, "application/json, */*"},
      {"GET",
       "/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&"
       "allowWatchBookmarks=true",
       true},
      // Subresources, writes and representations the apiserver renders itself.
      {"GET", "/api/v1/namespaces/ns/pods/p/status", false},
      {"GET", "/api/v1/namespaces/ns/pods/p/log", false},
      {"POST", "/api/v1/namespaces/ns/pods", false},
      {"DELETE", "/api/v1/namespaces/ns/pods", false},
      {"GET", "/api/v1/pods", false, "application/json;as=Table;g=meta.k8s.io;v=v1"},
      {"GET", "/api/v1/pods", false, "application/json;as=Table;v=v1;g=meta.k8s.io,*/*"},
      {"GET", "/api/v1/pods", false,
       "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1"},
      // PartialObjectMetadata (meta.k8s.io/v1) is the cache's (which form fits the verb: the
      // cache handler's).
      {"GET", "/api/v1/pods", true,
       "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"},
      {"GET", "/api/v1/pods?watch=1", true,
       "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
       "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"},
      {"GET", "/api/v1/pods", false, "", "Impersonate-User"},
      // The media type is NegotiateMedia's (proxy/edge/representation.h) to decide.
      {"GET", "/api/v1/pods", true, "application/vnd.kubernetes.protobuf"},
      // Query forms the apiserver words its own errors for.
      {"GET", "/api/v1/pods?resourceVersionMatch=NotOlderThan", false},
      {"GET", "/api/v1/pods?resourceVersionMatch=Exact&resourceVersion=0", false},
      {"GET", "/api/v1/pods?resourceVersionMatch=Bogus&resourceVersion=5", false},
      {"GET", "/api/v1/pods?continue=not-a-token", false},
      {"GET", "/api/v1/pods?limit=-1", false},
      {"GET", "/api/v1/pods?limit=ten", false},
      {"GET", "/api/v1/pods?resourceVersion=abc", false},
      {"GET", "/api/v1/pods?sendInitialEvents=true", false},
      {"GET", "/api/v1/pods?watch=1&timeoutSeconds=x", false},
      {"GET", "/api/v1/pods?watch=1&allowWatchBookmarks=maybe", false},
      {"GET", "/api/v1/pods?watch=1&resourceVersionMatch=NotOlderThan", false},
      {"GET", "/api/v1/pods?watch=1&continue=x", false},
      {"GET", "/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
       false},
      {"GET",
       "/api/v1/pods?watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan&"
       "allowWatchBookmarks=true",
       false},
      {"GET", "/api/v1/namespaces/ns/pods/p?resourceVersionMatch=NotOlderThan", false},
      // resourceVersion as Go's strconv.ParseUint reads it: a sign or a space is the
      // apiserver's 400, in a LIST, a GET and a WATCH alike ('+' in a query is a space).
      {"GET", "/api/v1/pods?resourceVersion=%2B1", false},
      {"GET", "/api/v1/pods?resourceVersion=+1", false},
      {"GET", "/api/v1/pods?resourceVersion=1+", false},
      {"GET", "/api/v1/namespaces/ns/pods/p?resourceVersion=%2B1", false},
      {"GET", "/api/v1/pods?watch=1&resourceVersion=%201", false},
      {"GET", "/api/v1/pods?watch=1&resourceVersion=18446744073709551616", false},
      {"GET", "/api/v1/pods?watch=1&resourceVersion=01", true},
      {"GET", "/api/v1/pods?resourceVersion=18446744073709551615", true},
      {"GET", "/api/v1/pods?limit=+5", false},   // " 5" once unescaped.
      {"GET", "/api/v1/pods?limit=%2B5", true},  // strconv.ParseInt takes a sign.
      {"GET", "/api/v1/pods?watch=1&timeoutSeconds=5%20", false},
  };
  for (const CacheableRow& row : rows) {
    INFO(row.method << " " << row.target << " accept=" << row.accept << " " << row.extra_field);
    http::fields fields;
    if (!row.accept.empty()) fields.set(http::field::accept, row.accept);
    if (row.extra_field == "User-Agent") {
      fields.set(http::field::user_agent, "curl/8.5.0");
    } else if (!row.extra_field.empty()) {
      fields.set(row.extra_field, "x");
    }
    CHECK(Cacheable(Info(row.method, row.target), fields) == row.cacheable);
  }
}

const ResourceType kPods{"", "v1", "pods", "Pod", true, false};
const ResourceType kNodes{"", "v1", "nodes", "Node", false, false};
const ResourceType kNamespaces{"", "v1", "namespaces", "Namespace", false, false};

TEST_CASE("FilterFor selects by namespace, labels and fields, and notes a required name") {
  auto f = FilterFor(
      Info("GET",
           "/api/v1/namespaces/ns/pods?labelSelector=app%3Dweb&fieldSelector=spec.nodeName%3Dn1"),
      kPods);
  REQUIRE(f.has_value());
  CHECK(f->namespace_ == "ns");
  CHECK_FALSE(f->labels.Empty());
  CHECK(f->fields.RequiresExactMatch("spec.nodeName") == "n1");
  CHECK_FALSE(f->name.has_value());

  auto all = FilterFor(Info("GET", "/api/v1/pods"), kPods);
  REQUIRE(all.has_value());
  CHECK(all->namespace_.empty());
  CHECK(all->labels.Empty());
  CHECK(all->fields.Empty());

  auto named = FilterFor(Info("GET", "/api/v1/pods?fieldSelector=metadata.name%3Dp"), kPods);
  REQUIRE(named.has_value());
  CHECK(named->name == "p");
}

TEST_CASE("FilterFor selects a legacy single-object watch by the object's name") {
  auto f = FilterFor(Info("GET", "/api/v1/watch/namespaces/ns/pods/p"), kPods);
  REQUIRE(f.has_value());
  CHECK(f->namespace_ == "ns");
  CHECK(f->name == "p");
  auto same = FilterFor(
      Info("GET", "/api/v1/watch/namespaces/ns/pods/p?fieldSelector=metadata.name%3Dp"), kPods);
  REQUIRE(same.has_value());
  CHECK(same->name == "p");
}

TEST_CASE("FilterFor leaves to the apiserver what it refuses") {
  const std::pair<std::string_view, const ResourceType*> refused[] = {
      {"/api/v1/pods?labelSelector=app%20in%20(", &kPods},    // Unparsable labels.
      {"/api/v1/pods?fieldSelector=spec.bogus%3Dx", &kPods},  // Not selectable.
      {"/api/v1/namespaces/ns/nodes", &kNodes},               // Cluster-scoped.
      {"/api/v1/watch/namespaces/ns/pods/p?fieldSelector=metadata.name%3Dq", &kPods},
      {"/api/v1/watch/pods/p", &kPods},  // Namespaced, no ns.
  };
  for (const auto& [target, type] : refused) {
    INFO(target);
    CHECK_FALSE(FilterFor(Info("GET", target), *type).has_value());
  }
  // The namespaces resource itself: its name reads as a namespace.
  auto ns = FilterFor(Info("GET", "/api/v1/namespaces/ns"), kNamespaces);
  REQUIRE(ns.has_value());
  CHECK(ns->namespace_.empty());
}

TEST_CASE("Before its cache syncs, a read is answered as the apiserver's initializing cache") {
  struct Row {
    std::string_view method, target;
    bool busy;  // 429 "storage is (re)initializing"; false: the apiserver's to answer.
  };
  const Row rows[] = {
      // Every watch, whatever its RV (the apiserver's cacher refuses them all while not ready).
      {"GET", "/api/v1/pods?watch=1&resourceVersion=5", true},
      {"GET", "/api/v1/pods?watch=1", true},
      {"GET", "/api/v1/watch/namespaces/ns/pods/p", true},
      // LISTs the apiserver sends to etcd: a limit and no selector; and a page after the first.
      {"GET", "/api/v1/pods?limit=500", false},
      {"GET", "/api/v1/pods?limit=500&resourceVersion=0", false},
      {"GET", "/api/v1/pods?limit=500&continue=abc", false},
      // LISTs whose cost from storage is unbounded: refused.
      {"GET", "/api/v1/pods", true},
      {"GET", "/api/v1/pods?resourceVersion=0", true},
      {"GET", "/api/v1/pods?limit=0", true},
      {"GET", "/api/v1/pods?limit=500&fieldSelector=spec.nodeName%3Dn1", true},
      {"GET", "/api/v1/pods?limit=500&labelSelector=app%3Dx", true},
      // A GET always goes to storage.
      {"GET", "/api/v1/namespaces/ns/pods/p", false},
      {"GET", "/api/v1/namespaces/ns/pods/p?resourceVersion=0", false},
  };
  for (const Row& row : rows) {
    INFO(row.target);
    CHECK(BusyWhileInitializing(Info(row.method, row.target)) == row.busy);
  }
}

TEST_CASE("The Retry-After while initializing grows with how long the cache has been at it") {
  using std::chrono::seconds;
  CHECK(RetryAfterWhileInitializing(seconds(0)) == 1);
  CHECK(RetryAfterWhileInitializing(seconds(10)) == 1);  // e^0.6 = 1.8
  CHECK(RetryAfterWhileInitializing(seconds(20)) == 3);  // e^1.2 = 3.3
  CHECK(RetryAfterWhileInitializing(seconds(30)) == 6);  // e^1.8 = 6.05
  CHECK(RetryAfterWhileInitializing(seconds(56)) == 28);
  CHECK(RetryAfterWhileInitializing(seconds(600)) == 30);
}

}  // namespace
}  // namespace kf
