#include "proxy/upstream/access_review.h"

#include <catch2/catch.hpp>

namespace kf {
namespace {

RequestInfo Info(std::string_view method, std::string_view target) {
  auto info = RequestInfo::Parse(method, target);
  REQUIRE(info.ok());
  return *std::move(info);
}

TEST_CASE("AccessAttributes carry a list's and a watch's selectors, as the apiserver's") {
  const auto list = AccessAttributes::Of(
      Info("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&labelSelector=app%3Dweb"));
  CHECK(list.verb == "list");
  CHECK(list.resource == "pods");
  CHECK(list.field_selector == "spec.nodeName=n1");
  CHECK(list.label_selector == "app=web");
  CHECK_FALSE(list.IsWholeResource());
  CHECK(list.WholeResource().IsWholeResource());
  CHECK(list.WholeResource().verb == "list");

  const auto watch = AccessAttributes::Of(
      Info("GET", "/api/v1/namespaces/ns/pods?watch=1&fieldSelector=spec.nodeName%3Dn1"));
  CHECK(watch.verb == "watch");
  CHECK(watch.namespace_ == "ns");
  CHECK(watch.field_selector == "spec.nodeName=n1");

  // A get has no selectors for the authorizer, whatever its query says.
  const auto get =
      AccessAttributes::Of(Info("GET", "/api/v1/namespaces/ns/pods/p?labelSelector=a%3Db"));
  CHECK(get.verb == "get");
  CHECK(get.name == "p");
  CHECK(get.label_selector.empty());
}

TEST_CASE("AccessReview asks a SubjectAccessReview for the user with the request's attributes") {
  Identity user{
      "system:node:n1", {"system:nodes", "system:authenticated"}, "uid-1", {{"k", {"v1", "v2"}}}};
  const auto attrs =
      AccessAttributes::Of(Info("GET", "/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3Dn1"));
  CHECK(AccessReview::ReviewBody(user, attrs) ==
        R"({"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{)"
        R"("resourceAttributes":{"namespace":"","verb":"watch","group":"","version":"v1",)"
        R"("resource":"pods","name":"","fieldSelector":{"rawSelector":"spec.nodeName=n1"}},)"
        R"("user":"system:node:n1","groups":["system:nodes","system:authenticated"],)"
        R"("extra":{"k":["v1","v2"]},"uid":"uid-1"}})");
}

TEST_CASE("AccessReview caches answers per identity, how it was vouched and attributes") {
  const Identity alice{"alice", {"system:authenticated"}};
  const auto attrs = AccessAttributes::Of(Info("GET", "/api/v1/namespaces/ns/pods"));
  const std::string key = AccessReview::CacheKey(Vouched::By::kToken, alice, attrs);
  CHECK(key == AccessReview::CacheKey(Vouched::By::kToken, alice, attrs));
  // The same user vouched for another way: another answer.
  CHECK(key != AccessReview::CacheKey(Vouched::By::kCertificate, alice, attrs));
  CHECK(key != AccessReview::CacheKey(Vouched::By::kFrontProxy, alice, attrs));
  Identity other = alice;
  other.groups.emplace_back("system:masters");
  CHECK(key != AccessReview::CacheKey(Vouched::By::kToken, other, attrs));
  CHECK(key != AccessReview::CacheKey(Vouched::By::kToken, alice, attrs.WholeResource()));
}

}  // namespace
}  // namespace kf
