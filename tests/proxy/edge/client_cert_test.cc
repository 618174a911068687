#include "proxy/edge/client_cert.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "tests/proxy/edge/test_support.h"

namespace kf {
namespace {

// A self-signed CA certificate written to a PEM file in the temporary directory.
std::string WriteCa(const std::string& name) { return test::WriteSelfSigned(name).first; }

}  // namespace

// The roles' CA stores belong to the SSL_CTX and go with it (LeakSanitizer would report them in
// the integration suite, tests/sanitize; ctest --preset asan checks this test for leaks).
TEST_CASE("client certificate roles are freed with their context, also when set twice") {
  const std::string users = WriteCa("kf-client-cert-test-users");
  const std::string proxies = WriteCa("kf-client-cert-test-proxies");
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  REQUIRE(ctx != nullptr);
  const ClientCertConfig config{users, proxies, {"front-proxy"}};
  REQUIRE(RequestClientCertificates(ctx, config).ok());
  CHECK(sk_X509_NAME_num(SSL_CTX_get_client_CA_list(ctx)) == 2);
  REQUIRE(RequestClientCertificates(ctx, config).ok());
  CHECK(sk_X509_NAME_num(SSL_CTX_get_client_CA_list(ctx)) == 2);
  SSL_CTX_free(ctx);
  std::filesystem::remove(users);
  std::filesystem::remove(proxies);
}

TEST_CASE("a CA file that cannot be read is an error, and leaks nothing") {
  const std::string users = WriteCa("kf-client-cert-test-only");
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  REQUIRE(ctx != nullptr);
  const absl::Status status =
      RequestClientCertificates(ctx, {users, "/nonexistent/kf-front-proxy-ca.crt", {}});
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message().find("--requestheader-client-ca-file") != std::string::npos);
  SSL_CTX_free(ctx);
  std::filesystem::remove(users);
}

// A subject of CN and O values, each added as raw UTF-8 (any bytes a CA might have signed).
struct Subject {
  Subject(std::string_view cn, std::vector<std::string> orgs) : name(X509_NAME_new()) {
    REQUIRE(name != nullptr);
    for (const auto& o : orgs) Add("O", o);
    Add("CN", cn);
  }
  ~Subject() { X509_NAME_free(name); }
  void Add(const char* field, std::string_view value) {
    REQUIRE(X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8,
                                       reinterpret_cast<const unsigned char*>(value.data()),
                                       static_cast<int>(value.size()), -1, 0) == 1);
  }
  X509_NAME* name;
};

TEST_CASE("a certificate's user is its last CommonName and every Organization") {
  Subject s("system:node:n1", {"system:nodes", "g2"});
  s.Add("CN", "system:node:last");
  ClientCertificate c;
  ReadSubjectUser(s.name, c);
  CHECK(c.user.username == "system:node:last");
  CHECK(c.user.groups == std::vector<std::string>{"system:nodes", "g2"});
  CHECK_FALSE(c.subject_refused);
}

TEST_CASE("a certificate subject with a control byte or edge blanks authenticates no one") {
  for (const auto& [cn, org] : std::vector<std::pair<std::string, std::string>>{
           {"x\r\nX-Remote-Group: system:masters", "system:nodes"},
           {"system:node:victim ", "system:nodes"},
           {" system:node:victim", "system:nodes"},
           {std::string("system:node:n1\0", 15), "system:nodes"},
           {"system:node:n1", "system:nodes\n"},
           {"system:node:n1", "\tsystem:masters"},
           {"system:node:n1", "g\x7f"}}) {
    Subject s(cn, {org});
    ClientCertificate c;
    c.presented = c.verified = true;
    ReadSubjectUser(s.name, c);
    REQUIRE(c.user.username == cn);  // Setup: the bytes really are in the subject.
    CHECK(c.subject_refused);
    CHECK_FALSE(c.authenticates());
    CHECK(c.error.find("subject refused: ") == 0);
    CHECK(c.error.find('\r') == std::string::npos);  // The log gets the bytes escaped.
    CHECK(c.error.find('\n') == std::string::npos);
  }
}

}  // namespace kf
