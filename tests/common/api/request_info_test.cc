#include "common/api/request_info.h"

#include <catch2/catch.hpp>

namespace kf {
namespace {

struct Case {
  const char* method;
  const char* target;
  const char* verb;
  const char* group;
  const char* version;
  const char* ns;
  const char* resource;
  const char* name;
  const char* subresource;
};

TEST_CASE(
    "RequestInfo reads group, version, resource, namespace, name, subresource and verb "
    "the way the apiserver does") {
  // Expectations follow k8s.io/apiserver/pkg/endpoints/request/requestinfo_test.go semantics.
  const Case cases[] = {
      {"GET", "/api/v1/namespaces", "list", "", "v1", "", "namespaces", "", ""},
      {"GET", "/api/v1/namespaces/other", "get", "", "v1", "other", "namespaces", "other", ""},
      {"GET", "/api/v1/namespaces/other/pods", "list", "", "v1", "other", "pods", "", ""},
      {"GET", "/api/v1/namespaces/other/pods/foo", "get", "", "v1", "other", "pods", "foo", ""},
      {"HEAD", "/api/v1/namespaces/other/pods/foo", "get", "", "v1", "other", "pods", "foo", ""},
      {"GET", "/api/v1/pods", "list", "", "v1", "", "pods", "", ""},
      {"GET", "/api/v1/pods?watch=true", "watch", "", "v1", "", "pods", "", ""},
      {"GET", "/api/v1/pods?watch=1&resourceVersion=5", "watch", "", "v1", "", "pods", "", ""},
      {"GET", "/api/v1/pods?watch=false", "list", "", "v1", "", "pods", "", ""},
      {"GET", "/api/v1/watch/pods", "watch", "", "v1", "", "pods", "", ""},
      {"GET", "/api/v1/watch/namespaces/other/pods", "watch", "", "v1", "other", "pods", "", ""},
      {"GET", "/api/v1/watch/namespaces/other/pods/foo", "watch", "", "v1", "other", "pods", "foo",
       ""},
      {"GET", "/api/v1/namespaces/other/pods/foo/log", "get", "", "v1", "other", "pods", "foo",
       "log"},
      {"POST", "/api/v1/namespaces/other/pods", "create", "", "v1", "other", "pods", "", ""},
      {"PUT", "/api/v1/namespaces/other/pods/foo", "update", "", "v1", "other", "pods", "foo", ""},
      {"PATCH", "/api/v1/namespaces/other/pods/foo", "patch", "", "v1", "other", "pods", "foo", ""},
      {"DELETE", "/api/v1/namespaces/other/pods/foo", "delete", "", "v1", "other", "pods", "foo",
       ""},
      {"DELETE", "/api/v1/namespaces/other/pods", "deletecollection", "", "v1", "other", "pods", "",
       ""},
      {"PUT", "/api/v1/namespaces/other/finalize", "update", "", "v1", "other", "namespaces",
       "other", "finalize"},
      {"GET", "/api/v1/namespaces/other/status", "get", "", "v1", "other", "namespaces", "other",
       "status"},
      {"GET", "/apis/discovery.k8s.io/v1/namespaces/other/endpointslices", "list",
       "discovery.k8s.io", "v1", "other", "endpointslices", "", ""},
      {"GET", "/apis/apps/v1/deployments", "list", "apps", "v1", "", "deployments", "", ""},
      {"GET", "/apis/apps/v1/namespaces/ns/deployments/d/scale", "get", "apps", "v1", "ns",
       "deployments", "d", "scale"},
      {"GET", "/api/v1/proxy/namespaces/other/pods/foo/a/b", "proxy", "", "v1", "other", "pods",
       "foo", ""},
      {"GET", "/api/v1/nodes?fieldSelector=metadata.name%3Dnode-1&watch=1", "watch", "", "v1", "",
       "nodes", "node-1", ""},
      {"GET", "/api/v1/nodes?fieldSelector=metadata.name==n2,spec.unschedulable=false", "list", "",
       "v1", "", "nodes", "n2", ""},
      {"GET", "/api/v1/nodes?fieldSelector=metadata.name!=n3", "list", "", "v1", "", "nodes", "",
       ""},
      // A bad limit spoils the ListOptions decode; watch=1 is still honoured, the name is not.
      {"GET", "/api/v1/pods?watch=1&limit=x&fieldSelector=metadata.name=a", "watch", "", "v1", "",
       "pods", "", ""},
      // ...and in that fallback any watch value but false/0 counts as a watch.
      {"GET", "/api/v1/pods?watch=f&limit=x", "watch", "", "v1", "", "pods", "", ""},
      {"GET", "/api/v1/pods?watch=f", "list", "", "v1", "", "pods", "", ""},
  };
  for (const Case& c : cases) {
    INFO(c.method << " " << c.target);
    auto info = RequestInfo::Parse(c.method, c.target);
    REQUIRE(info.ok());
    CHECK(info->is_resource_request);
    CHECK(info->verb == c.verb);
    CHECK(info->api_group == c.group);
    CHECK(info->api_version == c.version);
    CHECK(info->namespace_ == c.ns);
    CHECK(info->resource == c.resource);
    CHECK(info->name == c.name);
    CHECK(info->subresource == c.subresource);
  }
}

TEST_CASE("RequestInfo treats paths outside /api and /apis as non-resource requests") {
  for (const char* target : {"/", "/version", "/healthz", "/api", "/api/v1", "/apis/apps/v1",
                             "/openapi/v3", "/metrics", "/other/v1/pods"}) {
    INFO(target);
    auto info = RequestInfo::Parse("GET", target);
    REQUIRE(info.ok());
    CHECK_FALSE(info->is_resource_request);
    CHECK(info->verb == "get");
  }
}

TEST_CASE("RequestInfo rejects a special verb with nothing after it") {
  auto info = RequestInfo::Parse("GET", "/api/v1/watch");
  CHECK(info.status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("RequestInfo keeps selectors of list and watch requests, not of legacy watch paths") {
  auto list = RequestInfo::Parse(
      "GET", "/api/v1/pods?labelSelector=app%3Dweb%2C!canary&fieldSelector=spec.nodeName%3Dn1");
  REQUIRE(list.ok());
  CHECK(list->label_selector == "app=web,!canary");
  CHECK(list->field_selector == "spec.nodeName=n1");
  CHECK(list->GroupResource() == "pods");

  auto legacy = RequestInfo::Parse("GET", "/api/v1/watch/pods?labelSelector=a%3Db");
  REQUIRE(legacy.ok());
  CHECK(legacy->label_selector.empty());

  auto slices = RequestInfo::Parse("GET", "/apis/discovery.k8s.io/v1/endpointslices");
  REQUIRE(slices.ok());
  CHECK(slices->GroupResource() == "endpointslices.discovery.k8s.io");
}

TEST_CASE("RequestInfo decodes percent-escapes in the path") {
  auto info = RequestInfo::Parse("GET", "/api/v1/namespaces/a%2Db/configmaps/x%2Ey");
  REQUIRE(info.ok());
  CHECK(info->namespace_ == "a-b");
  CHECK(info->name == "x.y");
  CHECK_FALSE(RequestInfo::Parse("GET", "/api/v1/pods%zz").ok());
}

}  // namespace
}  // namespace kf
