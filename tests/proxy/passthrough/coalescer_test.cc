#include "proxy/passthrough/coalescer.h"

#include <catch2/catch.hpp>

namespace kf {
namespace {

namespace http = boost::beast::http;

struct KeyedRequest {
  std::string method = "GET";
  std::string target = "/api/v1/namespaces/default/pods?limit=500";
  http::fields fields;
  KeyedRequest() {
    fields.set(http::field::authorization, "Bearer alice");
    fields.set(http::field::accept, "application/json");
    fields.set(http::field::accept_encoding, "gzip");
    fields.set(http::field::user_agent, "kube-controller-manager/v1.36.3");
  }
  std::string Key() const { return CoalesceKey(method, target, fields); }
};

TEST_CASE("CoalesceKey differs whenever a part that can change the answer differs") {
  const std::string base = KeyedRequest().Key();
  struct Variant {
    const char* what;
    std::function<void(KeyedRequest&)> change;
  };
  const std::vector<Variant> variants = {
      {"method", [](KeyedRequest& r) { r.method = "HEAD"; }},
      {"resource",
       [](KeyedRequest& r) { r.target = "/api/v1/namespaces/default/secrets?limit=500"; }},
      {"namespace", [](KeyedRequest& r) { r.target = "/api/v1/namespaces/other/pods?limit=500"; }},
      {"name", [](KeyedRequest& r) { r.target = "/api/v1/namespaces/default/pods/a"; }},
      {"group",
       [](KeyedRequest& r) { r.target = "/apis/apps/v1/namespaces/default/pods?limit=500"; }},
      {"query", [](KeyedRequest& r) { r.target = "/api/v1/namespaces/default/pods?limit=501"; }},
      {"query order", [](KeyedRequest& r) { r.target += "&labelSelector=a"; }},
      {"credentials",
       [](KeyedRequest& r) { r.fields.set(http::field::authorization, "Bearer bob"); }},
      {"no credentials", [](KeyedRequest& r) { r.fields.erase(http::field::authorization); }},
      {"accept",
       [](KeyedRequest& r) {
         r.fields.set(http::field::accept, "application/vnd.kubernetes.protobuf");
       }},
      {"table",
       [](KeyedRequest& r) {
         r.fields.set(http::field::accept, "application/json;as=Table;v=v1;g=meta.k8s.io");
       }},
      {"encoding", [](KeyedRequest& r) { r.fields.erase(http::field::accept_encoding); }},
      {"pretty user agent",
       [](KeyedRequest& r) { r.fields.set(http::field::user_agent, "curl/8.0"); }},
      {"impersonation", [](KeyedRequest& r) { r.fields.set("Impersonate-User", "carol"); }},
      {"impersonated group", [](KeyedRequest& r) { r.fields.insert("Impersonate-Group", "g"); }},
      {"audit id", [](KeyedRequest& r) { r.fields.set("Audit-Id", "1234"); }},
      {"unknown field", [](KeyedRequest& r) { r.fields.set("X-Something-New", "1"); }},
  };
  for (const Variant& v : variants) {
    INFO(v.what);
    KeyedRequest r;
    v.change(r);
    CHECK(r.Key() != base);
  }
}

TEST_CASE("CoalesceKey is equal for requests the apiserver answers alike") {
  const std::string base = KeyedRequest().Key();
  KeyedRequest other_agent;
  other_agent.fields.set(http::field::user_agent, "kube-scheduler/v1.36.3");
  CHECK(other_agent.Key() == base);
  KeyedRequest hop;
  hop.fields.set(http::field::connection, "keep-alive");
  hop.fields.set(http::field::host, "kube-fanout:8443");
  hop.fields.set("X-Forwarded-For", "10.0.0.1");
  CHECK(hop.Key() == base);
  KeyedRequest reordered;
  reordered.fields.clear();
  reordered.fields.set(http::field::user_agent, "kube-controller-manager/v1.36.3");
  reordered.fields.set(http::field::accept_encoding, "gzip");
  reordered.fields.set("ACCEPT", "application/json");
  reordered.fields.set(http::field::authorization, "Bearer alice");
  CHECK(reordered.Key() == base);
}

TEST_CASE("CoalesceKey keeps the order of repeated fields and cannot be forged by splicing") {
  KeyedRequest a, b;
  a.fields.insert("Impersonate-Group", "x");
  a.fields.insert("Impersonate-Group", "y");
  b.fields.insert("Impersonate-Group", "y");
  b.fields.insert("Impersonate-Group", "x");
  CHECK(a.Key() != b.Key());
  KeyedRequest c, d;
  c.target = "/api/v1/pods";
  d.target = "/api/v1/pods?";
  CHECK(c.Key() != d.Key());
}

}  // namespace
}  // namespace kf
