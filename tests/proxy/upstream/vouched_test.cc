#include "proxy/upstream/vouched.h"

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "tests/proxy/edge/test_support.h"

namespace kf {
namespace {

using By = Vouched::By;

ClientCertificate FrontProxy() {
  ClientCertificate c;
  c.presented = c.front_proxy = true;
  c.error = "not signed by --client-ca-file";
  return c;
}

ClientCertificate Verified(std::string cn, std::vector<std::string> orgs) {
  ClientCertificate c;
  c.presented = c.verified = true;
  c.user = Identity{std::move(cn), std::move(orgs)};
  return c;
}

ClientCertificate Unverified() {
  ClientCertificate c;
  c.presented = true;
  c.error = "self-signed certificate";
  return c;
}

Vouched VouchFor(const ClientCertificate* cert, std::string_view token,
                 std::vector<std::pair<std::string, std::string>> fields = {}) {
  test::TestRequest r(boost::beast::http::verb::get, "/api/v1/pods");
  r.request.client_cert = cert;
  if (!token.empty()) r.fields.set("Authorization", absl::StrCat("Bearer ", ToAbsl(token)));
  for (const auto& [n, v] : fields) r.fields.insert(n, v);
  return Vouch(r.request, RequestHeaderNames());
}

TEST_CASE("Vouch follows the apiserver's chain: request-header, x509, then tokens") {
  const ClientCertificate proxy = FrontProxy();
  const ClientCertificate node = Verified("system:node:n1", {"system:nodes"});
  const ClientCertificate self_signed = Unverified();
  const std::vector<std::pair<std::string, std::string>> alice{{"X-Remote-User", "alice"}};

  const Vouched by_proxy = VouchFor(&proxy, "t", alice);
  CHECK(by_proxy.by == By::kFrontProxy);
  CHECK(by_proxy.user.username == "alice");
  CHECK(by_proxy.asserted());

  // A certificate user wins over a token, and a client's own X-Remote-User names no one.
  const Vouched by_cert = VouchFor(&node, "t", alice);
  CHECK(by_cert.by == By::kCertificate);
  CHECK(by_cert.user == Identity{"system:node:n1", {"system:nodes"}});

  // A front proxy that names nobody, or an unverifiable certificate: the token, if any.
  CHECK(VouchFor(&proxy, "t").by == By::kToken);
  CHECK(VouchFor(&self_signed, "t", alice).by == By::kToken);
  CHECK(VouchFor(&self_signed, "t").credential == TokenDigest("t"));
  CHECK(VouchFor(nullptr, "t").by == By::kToken);

  // ... else the apiserver's 401.
  const Vouched refused = VouchFor(&self_signed, "", alice);
  CHECK(refused.by == By::kRejectedCertificate);
  CHECK(refused.why == "client certificate: self-signed certificate");
  CHECK(VouchFor(&proxy, "").by == By::kRejectedCertificate);

  CHECK(VouchFor(nullptr, "", alice).by == By::kAnonymous);
  // A verified certificate without a CommonName is no error to the apiserver: anonymous.
  const ClientCertificate nameless = Verified("", {"g"});
  CHECK(VouchFor(&nameless, "").by == By::kAnonymous);
}

TEST_CASE("Vouch refuses a certificate subject or front-proxy user no field can carry") {
  // A refused subject is refused outright: a token beside it does not make it someone else.
  ClientCertificate crlf = Verified("x\r\nX-Remote-Group: system:masters", {});
  crlf.subject_refused = true;
  crlf.error = "subject refused: user name holds the control byte 0x0d";
  for (std::string_view token : {"", "t"}) {
    const Vouched v = VouchFor(&crlf, token);
    CHECK(v.by == By::kRejectedCertificate);
    CHECK(v.why == "client certificate: subject refused: user name holds the control byte 0x0d");
  }
  // The same rule at Vouch itself, should a certificate arrive here unchecked.
  const ClientCertificate blank = Verified("system:node:victim ", {"system:nodes"});
  CHECK(VouchFor(&blank, "").by == By::kRejectedCertificate);
  const ClientCertificate bad_org = Verified("system:node:n1", {"system:nodes\x01"});
  CHECK(VouchFor(&bad_org, "t").by == By::kRejectedCertificate);

  // A front proxy's fields hold no CR or LF after either parser, and Beast trims blanks at
  // their ends; the rule holds all the same, should a transport ever hand on other bytes.
  const ClientCertificate proxy = FrontProxy();
  for (auto fields : std::vector<std::vector<std::pair<std::string, std::string>>>{
           {{"X-Remote-User", "alice"}, {"X-Remote-Group", std::string("g\0", 2)}},
           {{"X-Remote-User", "alice"}, {"X-Remote-Uid", "u\x0b"}},
           {{"X-Remote-User", "alice"}, {"X-Remote-Extra-Scopes", "a\x7f"}}}) {
    const Vouched v = VouchFor(&proxy, "t", fields);
    INFO(fields[1].first);
    CHECK(v.by == By::kRejectedCertificate);
    CHECK(v.why.find("front proxy's fields refused") == 0);
  }
}

TEST_CASE("IdentityKey tells apart every way of vouching and every part of a user") {
  const Identity u{"alice", {"g1", "g2"}, "uid", {{"k", {"v"}}}};
  std::vector<std::string> keys;
  for (By by : {By::kNone, By::kAnonymous, By::kToken, By::kCertificate, By::kFrontProxy,
                By::kRejectedCertificate}) {
    keys.push_back(IdentityKey(by, u));
  }
  // Splices that a separator-joined key would confuse.
  keys.push_back(IdentityKey(By::kToken, Identity{"alice", {"g1g2"}, "uid", {{"k", {"v"}}}}));
  keys.push_back(
      IdentityKey(By::kToken, Identity{"alice", {"g1", "g2", ""}, "uid", {{"k", {"v"}}}}));
  keys.push_back(IdentityKey(By::kToken, Identity{"alic", {"eg1", "g2"}, "uid", {{"k", {"v"}}}}));
  keys.push_back(IdentityKey(By::kToken, Identity{"alice", {"g1", "g2"}, "", {{"uidk", {"v"}}}}));
  keys.push_back(
      IdentityKey(By::kToken, Identity{"alice", {"g1", "g2"}, "uid", {{"k", {}}, {"v", {}}}}));
  keys.push_back(
      IdentityKey(By::kToken, Identity{"alice", {"g1", "g2"}, "uid", {{"k", {"v", ""}}}}));
  std::sort(keys.begin(), keys.end());
  CHECK(std::adjacent_find(keys.begin(), keys.end()) == keys.end());
  CHECK(IdentityKey(By::kToken, u) == IdentityKey(By::kToken, u));

  Vouched a{By::kToken, {}, TokenDigest("a"), {}};
  Vouched b{By::kToken, {}, TokenDigest("b"), {}};
  CHECK(a.Key() != b.Key());
}

}  // namespace
}  // namespace kf
