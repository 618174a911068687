#include "upstream/access_review.h"

#include <catch2/catch.hpp>

#include "tests/edge/test_support.h"
#include "upstream/request_header.h"

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

TEST_CASE("RequestHeaderNames strip every identity field and assert one user") {
  RequestHeaderNames names;
  names.username = {"X-Remote-User", "X-Other-User"};
  boost::beast::http::fields f;
  f.set("x-remote-user", "a");
  f.set("X-Other-User", "b");
  f.set("X-Remote-Extra-Foo", "c");
  f.set("X-Remote-Group", "d");
  f.set("Accept", "application/json");
  names.Strip(f);
  CHECK(f.count("X-Remote-User") == 0);
  CHECK(f.count("X-Other-User") == 0);
  CHECK(f.count("X-Remote-Extra-Foo") == 0);
  CHECK(f.count("X-Remote-Group") == 0);
  CHECK(f["Accept"] == "application/json");

  names.Assert(Identity{"u", {"g1", "g2"}, "id", {{"scopes.example.com/a b", {"x"}}}}, f);
  CHECK(f["X-Remote-User"] == "u");
  CHECK(f.count("X-Remote-Group") == 2);
  CHECK(f["X-Remote-Uid"] == "id");
  CHECK(f["X-Remote-Extra-scopes.example.com%2Fa%20b"] == "x");
}

TEST_CASE("RequestHeaderNames read a front proxy's user as the apiserver does") {
  RequestHeaderNames names;
  names.username = {"X-Remote-User", "X-Other-User"};
  boost::beast::http::fields f;
  CHECK_FALSE(names.Read(f).has_value());  // No user: not authenticated this way.
  f.set("X-Other-User", "system:node:n1");
  f.insert("X-Remote-Group", "system:nodes");
  f.insert("x-remote-group", "g2");
  f.set("X-Remote-Uid", "u-1");
  f.insert("X-Remote-Extra-Scopes", "a");
  f.insert("X-Remote-Extra-scopes", "b");
  f.insert("X-Remote-Extra-Example.com%2Fkey", "c");
  auto user = names.Read(f);
  REQUIRE(user.has_value());
  CHECK(user->username == "system:node:n1");
  CHECK(user->groups == std::vector<std::string>{"system:nodes", "g2"});
  CHECK(user->uid == "u-1");
  using Extra = std::vector<std::pair<std::string, std::vector<std::string>>>;
  CHECK(user->extra == Extra{{"example.com/key", {"c"}}, {"scopes", {"a", "b"}}});
  // What Assert writes, Read reads back.
  boost::beast::http::fields out;
  names.Assert(*user, out);
  CHECK(names.Read(out) == user);
}

TEST_CASE("VouchedUser: a front proxy's fields first, then the certificate's own user") {
  RequestHeaderNames names;
  ClientCertificate proxy;
  proxy.presented = proxy.front_proxy = true;
  ClientCertificate node;
  node.presented = node.verified = true;
  node.user = Identity{"system:node:n1", {"system:nodes"}};
  for (auto [cert, want] : {std::pair{&proxy, "alice"}, std::pair{&node, "system:node:n1"}}) {
    test::TestRequest r(boost::beast::http::verb::get, "/api/v1/pods");
    r.fields.set("X-Remote-User", "alice");
    r.request.client_cert = cert;
    auto u = VouchedUser(r.request, names);
    REQUIRE(u.has_value());
    CHECK(u->username == want);
  }
  // A front proxy that names nobody vouches for no one (its certificate is not a user's).
  test::TestRequest bare(boost::beast::http::verb::get, "/api/v1/pods");
  bare.request.client_cert = &proxy;
  CHECK_FALSE(VouchedUser(bare.request, names).has_value());
}

}  // namespace
}  // namespace kf
