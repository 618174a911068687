#include "edge/client_cert.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <string>

#include "tests/edge/test_support.h"

namespace kf {
namespace {

// A self-signed CA certificate written to a PEM file in the temporary directory.
std::string WriteCa(const std::string& name) { return test::WriteSelfSigned(name).first; }

}  // namespace

// The roles' CA stores belong to the SSL_CTX and go with it (found by LeakSanitizer in the
// integration suite, tests/sanitize; ctest --preset asan checks this test for leaks).
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

}  // namespace kf
