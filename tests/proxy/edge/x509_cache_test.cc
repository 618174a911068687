#include "proxy/edge/x509_cache.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "proxy/edge/client_cert.h"
#include "proxy/upstream/upstream_pool.h"

// These tests' check is ThreadSanitizer's (ctest --preset tsan): without the cache filled when
// the context is made, the second thread reads the CA's subject key identifier that the first
// one wrote, with nothing TSan sees ordering the two (as two workers' first handshakes did in
// tests/sanitize tsan). Unsanitized they check that verification still works.

namespace kf {
namespace {

X509* NewCert(EVP_PKEY* key, const std::string& cn, X509* issuer, EVP_PKEY* issuer_key,
              long serial) {  // NOLINT(runtime/int): OpenSSL's type.
  X509* cert = X509_new();
  REQUIRE(cert != nullptr);
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(cert), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert, X509_get_subject_name(issuer != nullptr ? issuer : cert));
  X509_set_pubkey(cert, key);
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer != nullptr ? issuer : cert, cert, nullptr, nullptr, 0);
  for (const auto& [nid, value] :
       {std::pair{NID_basic_constraints, issuer == nullptr ? "critical,CA:TRUE" : "CA:FALSE"},
        std::pair{NID_subject_key_identifier, "hash"},
        std::pair{NID_authority_key_identifier, "keyid:always"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    REQUIRE(ext != nullptr);
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
  }
  REQUIRE(X509_sign(cert, issuer_key != nullptr ? issuer_key : key, EVP_sha256()) > 0);
  return cert;
}

// A CA with a subject key identifier and two leaves it issued, naming it by key identifier.
struct Chain {
  Chain() {
    ca_key = EVP_EC_gen("P-256");
    leaf_key = EVP_EC_gen("P-256");
    REQUIRE((ca_key != nullptr && leaf_key != nullptr));
    ca = NewCert(ca_key, "kf-x509-cache-test-ca", nullptr, nullptr, 1);
    leaves[0] = NewCert(leaf_key, "kf-x509-cache-test-a", ca, ca_key, 2);
    leaves[1] = NewCert(leaf_key, "kf-x509-cache-test-b", ca, ca_key, 3);
    // Filled here so that only the CA's are left for the threads.
    for (X509* leaf : leaves) REQUIRE(X509_check_purpose(leaf, -1, 0) == 1);
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(bio, ca);
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio, &data);  // NOLINT(runtime/int): OpenSSL's type.
    ca_pem.assign(data, static_cast<size_t>(n));
    BIO_free(bio);
  }
  ~Chain() {
    for (X509* leaf : leaves) X509_free(leaf);
    X509_free(ca);
    EVP_PKEY_free(leaf_key);
    EVP_PKEY_free(ca_key);
  }
  Chain(const Chain&) = delete;
  Chain& operator=(const Chain&) = delete;

  EVP_PKEY* ca_key = nullptr;
  EVP_PKEY* leaf_key = nullptr;
  X509* ca = nullptr;
  X509* leaves[2] = {nullptr, nullptr};
  std::string ca_pem;
};

// The one CA certificate in `store` checked as the issuer of each leaf, on two threads one after
// the other with nothing between them that orders memory (a relaxed flag), as two workers.
void CheckIssuedOnTwoThreads(X509_STORE* store, const Chain& chain) {
  REQUIRE(store != nullptr);
  STACK_OF(X509)* certs = X509_STORE_get1_all_certs(store);
  REQUIRE(sk_X509_num(certs) == 1);
  X509* ca = sk_X509_value(certs, 0);
  std::atomic<bool> first_done{false};
  int results[2] = {-1, -1};
  std::thread first([&] {
    results[0] = X509_check_issued(ca, chain.leaves[0]);
    first_done.store(true, std::memory_order_relaxed);
  });
  std::thread second([&] {
    while (!first_done.load(std::memory_order_relaxed)) std::this_thread::yield();
    results[1] = X509_check_issued(ca, chain.leaves[1]);
  });
  first.join();
  second.join();
  sk_X509_pop_free(certs, X509_free);
  CHECK(results[0] == X509_V_OK);
  CHECK(results[1] == X509_V_OK);
}

}  // namespace

TEST_CASE("the upstream CA's certificate is ready before workers verify with it") {
  const Chain chain;
  UpstreamConfig config;
  config.ca_pem = chain.ca_pem;
  auto ctx = MakePassthroughTlsContext(config);
  REQUIRE(ctx.ok());
  CheckIssuedOnTwoThreads(SSL_CTX_get_cert_store((*ctx)->native_handle()), chain);
}

TEST_CASE("the client CA's certificate is ready before workers verify with it") {
  const Chain chain;
  // Per process, as test::WriteSelfSigned: other test runs may share /tmp.
  const std::string file = (std::filesystem::temp_directory_path() /
                            absl::StrCat("kf-x509-cache-test-client-ca-", getpid(), ".crt"))
                               .string();
  FILE* f = std::fopen(file.c_str(), "w");
  REQUIRE(f != nullptr);
  std::fputs(chain.ca_pem.c_str(), f);
  std::fclose(f);
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  REQUIRE(ctx != nullptr);
  REQUIRE(RequestClientCertificates(ctx, {file, "", {}}).ok());
  CheckIssuedOnTwoThreads(UsersStore(ctx), chain);
  SSL_CTX_free(ctx);
  std::filesystem::remove(file);
}

}  // namespace kf
