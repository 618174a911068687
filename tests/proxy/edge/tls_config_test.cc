#include "proxy/edge/tls_config.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "proxy/edge/client_cert.h"
#include "tests/proxy/edge/test_support.h"

namespace kf {
namespace {

std::set<std::string> Tls12Ciphers(SSL_CTX* ctx) {
  std::set<std::string> out;
  STACK_OF(SSL_CIPHER)* ciphers = SSL_CTX_get_ciphers(ctx);
  for (int i = 0; i < sk_SSL_CIPHER_num(ciphers); ++i) {
    const std::string name = SSL_CIPHER_get_name(sk_SSL_CIPHER_value(ciphers, i));
    if (name.rfind("TLS_", 0) != 0) out.insert(name);  // TLS 1.3's are named TLS_*.
  }
  return out;
}

void Copy(const std::string& from, const std::string& to) {
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
}

using SslPtr = std::unique_ptr<SSL, decltype(&SSL_free)>;
using CtxPtr = std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)>;

// A server context with its certificate asking for client certificates signed by `client_crt`
// (its own CA), and a client context presenting that certificate.
std::pair<CtxPtr, CtxPtr> ClientCertContexts(const std::string& serving_crt,
                                             const std::string& serving_key,
                                             const std::string& client_crt,
                                             const std::string& client_key) {
  CtxPtr server_ctx(SSL_CTX_new(TLS_server_method()), &SSL_CTX_free);
  CtxPtr client_ctx(SSL_CTX_new(TLS_client_method()), &SSL_CTX_free);
  REQUIRE(SSL_CTX_use_certificate_chain_file(server_ctx.get(), serving_crt.c_str()) == 1);
  REQUIRE(SSL_CTX_use_PrivateKey_file(server_ctx.get(), serving_key.c_str(), SSL_FILETYPE_PEM) ==
          1);
  REQUIRE(RequestClientCertificates(server_ctx.get(), ClientCertConfig{client_crt, "", {}}).ok());
  REQUIRE(SSL_CTX_use_certificate_chain_file(client_ctx.get(), client_crt.c_str()) == 1);
  REQUIRE(SSL_CTX_use_PrivateKey_file(client_ctx.get(), client_key.c_str(), SSL_FILETYPE_PEM) == 1);
  return {std::move(server_ctx), std::move(client_ctx)};
}

// One TLS connection in memory (a BIO pair), both sides handshaken; the client has then read
// what the server sent after its handshake (TLS 1.3's tickets). `resume`: a session the client
// offers. Null sides when the handshake failed.
std::pair<SslPtr, SslPtr> Connect(SSL_CTX* server_ctx, SSL_CTX* client_ctx, SSL_SESSION* resume) {
  SslPtr server(SSL_new(server_ctx), &SSL_free), client(SSL_new(client_ctx), &SSL_free);
  BIO *server_bio = nullptr, *client_bio = nullptr;
  REQUIRE(BIO_new_bio_pair(&server_bio, 0, &client_bio, 0) == 1);
  SSL_set_bio(server.get(), server_bio, server_bio);
  SSL_set_bio(client.get(), client_bio, client_bio);
  SSL_set_accept_state(server.get());
  SSL_set_connect_state(client.get());
  if (resume != nullptr) REQUIRE(SSL_set_session(client.get(), resume) == 1);
  bool server_done = false, client_done = false;
  for (int round = 0; round < 20 && !(server_done && client_done); ++round) {
    if (!client_done) client_done = SSL_do_handshake(client.get()) == 1;
    if (!server_done) server_done = SSL_do_handshake(server.get()) == 1;
  }
  ERR_clear_error();
  if (!server_done || !client_done) return {SslPtr(nullptr, &SSL_free), SslPtr(nullptr, &SSL_free)};
  char byte = 0;
  size_t got = 0;
  CHECK(SSL_read_ex(client.get(), &byte, 1, &got) == 0);  // Tickets only; no data.
  ERR_clear_error();
  return {std::move(server), std::move(client)};
}

}  // namespace

TEST_CASE("Go's cipher-suite names translate to OpenSSL's", "[tls]") {
  CHECK(*OpenSslCipherList({"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}) ==
        "ECDHE-RSA-AES128-GCM-SHA256");
  CHECK(*OpenSslCipherList({"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
                            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"}) ==
        "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-CHACHA20-POLY1305");
  // The apiserver's legacy ChaCha20 names, and an insecure suite it still accepts.
  CHECK(*OpenSslCipherList({"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305"}) ==
        "ECDHE-ECDSA-CHACHA20-POLY1305");
  CHECK(*OpenSslCipherList({"TLS_RSA_WITH_AES_128_CBC_SHA"}) == "AES128-SHA");
  CHECK(*OpenSslCipherList({"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"}) == "ECDHE-RSA-AES128-SHA");
  // TLS 1.3 names are accepted and govern nothing (as in Go).
  CHECK(*OpenSslCipherList({"TLS_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}) ==
        "ECDHE-RSA-AES128-GCM-SHA256");
  CHECK(OpenSslCipherList({"TLS_AES_256_GCM_SHA384"})->empty());
}

TEST_CASE("the default cipher list is forward-secret AEAD only", "[tls]") {
  CHECK(*OpenSslCipherList({}) ==
        "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
        "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
        "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305");
}

TEST_CASE("unknown cipher-suite names are refused with the name", "[tls]") {
  for (const char* bad :
       {"TLS_NOPE", "ECDHE-RSA-AES128-GCM-SHA256", "tls_ecdhe_rsa_with_aes_128_gcm_sha256",
        "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", ""}) {
    auto list = OpenSslCipherList({"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", bad});
    REQUIRE_FALSE(list.ok());
    CHECK(list.status().message().find(absl::StrCat("cipher suite ", bad, " not supported")) !=
          std::string::npos);
  }
  // Known to the apiserver, absent from Debian's OpenSSL 3: refused with that reason.
  auto rc4 = OpenSslCipherList({"TLS_RSA_WITH_RC4_128_SHA"});
  REQUIRE_FALSE(rc4.ok());
  CHECK(rc4.status().message().find("not available in this OpenSSL") != std::string::npos);
}

TEST_CASE("TLS versions are named as the apiserver names them", "[tls]") {
  CHECK(*TlsVersion("") == TLS1_2_VERSION);
  CHECK(*TlsVersion("VersionTLS10") == TLS1_VERSION);
  CHECK(*TlsVersion("VersionTLS11") == TLS1_1_VERSION);
  CHECK(*TlsVersion("VersionTLS12") == TLS1_2_VERSION);
  CHECK(*TlsVersion("VersionTLS13") == TLS1_3_VERSION);
  for (const char* bad : {"TLS1.2", "versiontls12", "VersionTLS14", "1.3"}) {
    auto v = TlsVersion(bad);
    REQUIRE_FALSE(v.ok());
    CHECK(v.status().message().find(absl::StrCat("unknown tls version \"", bad, "\"")) !=
          std::string::npos);
  }
}

TEST_CASE("ConfigureServerTls sets the suites and the minimum version", "[tls]") {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  REQUIRE(ConfigureServerTls(ctx, {}, "").ok());
  CHECK(SSL_CTX_get_min_proto_version(ctx) == TLS1_2_VERSION);
  CHECK(Tls12Ciphers(ctx) ==
        std::set<std::string>{"ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256",
                              "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
                              "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305"});
  REQUIRE(ConfigureServerTls(ctx, {"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"}, "VersionTLS13").ok());
  CHECK(SSL_CTX_get_min_proto_version(ctx) == TLS1_3_VERSION);
  CHECK(Tls12Ciphers(ctx) == std::set<std::string>{"ECDHE-RSA-AES256-GCM-SHA384"});
  // Only TLS 1.3 names: no TLS 1.2 suite is left, so TLS 1.2 is off.
  REQUIRE(ConfigureServerTls(ctx, {"TLS_AES_128_GCM_SHA256"}, "VersionTLS12").ok());
  CHECK(SSL_CTX_get_min_proto_version(ctx) == TLS1_3_VERSION);
  CHECK_FALSE(ConfigureServerTls(ctx, {}, "VersionTLS9").ok());
  SSL_CTX_free(ctx);
}

TEST_CASE("the serving certificate is reloaded on change and a bad one is refused", "[tls]") {
  const auto [crt_a, key_a] = test::WriteSelfSigned("kf-tls-config-test-a");
  const auto [crt_b, key_b] = test::WriteSelfSigned("kf-tls-config-test-b");
  const auto dir = std::filesystem::temp_directory_path();
  const std::string serving = absl::StrCat("kf-tls-config-test-serving-", getpid());
  const std::string crt = (dir / (serving + ".crt")).string();
  const std::string key = (dir / (serving + ".key")).string();
  Copy(crt_a, crt);
  Copy(key_a, key);

  ServingCertificate missing(crt + ".absent", key);
  auto status = missing.Load();
  REQUIRE_FALSE(status.ok());
  CHECK(status.message().find(".absent: cannot read") != std::string::npos);

  ServingCertificate cert(crt, key);
  REQUIRE(cert.Load().ok());
  CHECK(cert.reloads() == 0);
  CHECK(cert.not_after() > std::time(nullptr));
  std::string error;
  CHECK(cert.ReloadIfChanged(&error) == ServingCertificate::Change::kNone);

  Copy(crt_b, crt);
  Copy(key_b, key);
  CHECK(cert.ReloadIfChanged(&error) == ServingCertificate::Change::kReloaded);
  CHECK(cert.reloads() == 1);
  CHECK(cert.ReloadIfChanged(&error) == ServingCertificate::Change::kNone);

  // A certificate whose key is another's: refused once, the previous pair kept.
  Copy(crt_a, crt);
  CHECK(cert.ReloadIfChanged(&error) == ServingCertificate::Change::kRejected);
  CHECK(error == "the private key does not match the certificate");
  CHECK(cert.reload_failures() == 1);
  CHECK(cert.ReloadIfChanged(&error) == ServingCertificate::Change::kNone);
  CHECK(cert.reload_failures() == 1);

  std::ofstream(crt, std::ios::trunc) << "not PEM\n";
  CHECK(cert.ReloadIfChanged(&error) == ServingCertificate::Change::kRejected);
  CHECK(error.find("certificate: ") == 0);
  std::filesystem::remove(key);
  CHECK(cert.ReloadIfChanged(&error) == ServingCertificate::Change::kRejected);
  CHECK(error.find("cannot read") != std::string::npos);
  CHECK(cert.reload_failures() == 3);
  CHECK(cert.reloads() == 1);

  Copy(key_a, key);
  Copy(crt_a, crt);
  CHECK(cert.ReloadIfChanged(&error) == ServingCertificate::Change::kReloaded);
  CHECK(cert.reloads() == 2);
  std::filesystem::remove(crt);
  std::filesystem::remove(key);
}

TEST_CASE("a session with a client certificate resumes and keeps its user, in TLS 1.2 and 1.3",
          "[tls]") {
  const auto [serving_crt, serving_key] = test::WriteSelfSigned("kf-resume-serving");
  // The client's certificate is its own CA: --client-ca-file names it.
  const auto [client_crt, client_key] = test::WriteSelfSigned("kf-resume-alice");
  for (const int version : {TLS1_2_VERSION, TLS1_3_VERSION}) {
    INFO("TLS version " << std::hex << version);
    auto [server_ctx, client_ctx] =
        ClientCertContexts(serving_crt, serving_key, client_crt, client_key);
    REQUIRE(SSL_CTX_set_max_proto_version(client_ctx.get(), version) == 1);

    // As before EnableSessionResumption: OpenSSL refuses the resumption outright.
    {
      auto [server, client] = Connect(server_ctx.get(), client_ctx.get(), nullptr);
      REQUIRE(client);
      std::unique_ptr<SSL_SESSION, decltype(&SSL_SESSION_free)> session(
          SSL_get1_session(client.get()), &SSL_SESSION_free);
      REQUIRE(session);
      CHECK_FALSE(Connect(server_ctx.get(), client_ctx.get(), session.get()).first);
    }

    REQUIRE(EnableSessionResumption(server_ctx.get(), {client_crt, ""}, {}).ok());
    auto [server, client] = Connect(server_ctx.get(), client_ctx.get(), nullptr);
    REQUIRE(server);
    CHECK(SSL_version(server.get()) == version);
    CHECK_FALSE(SSL_session_reused(server.get()));
    const ClientCertificate first = ReadClientCertificate(server.get());
    REQUIRE(first.authenticates());
    CHECK(first.user.username == "kf-resume-alice");
    std::unique_ptr<SSL_SESSION, decltype(&SSL_SESSION_free)> session(
        SSL_get1_session(client.get()), &SSL_SESSION_free);
    REQUIRE(session);

    auto [resumed, resumed_client] = Connect(server_ctx.get(), client_ctx.get(), session.get());
    REQUIRE(resumed);
    CHECK(SSL_session_reused(resumed.get()));
    // The resumed connection is the same user, its certificate verified again.
    const ClientCertificate again = ReadClientCertificate(resumed.get());
    CHECK(again.authenticates());
    CHECK(again.user == first.user);

    // Other client-certificate settings: the session is not resumed (a full handshake).
    REQUIRE(EnableSessionResumption(server_ctx.get(), {client_crt, ""}, {"front-proxy"}).ok());
    auto [fresh, fresh_client] = Connect(server_ctx.get(), client_ctx.get(), session.get());
    REQUIRE(fresh);
    CHECK_FALSE(SSL_session_reused(fresh.get()));
    CHECK(ReadClientCertificate(fresh.get()).user == first.user);
  }
  CtxPtr ctx(SSL_CTX_new(TLS_server_method()), &SSL_CTX_free);
  CHECK_FALSE(EnableSessionResumption(ctx.get(), {"/nonexistent"}, {}).ok());
}

TEST_CASE("a full TLS 1.3 handshake gets one session ticket, as from Go's server", "[tls]") {
  const auto [serving_crt, serving_key] = test::WriteSelfSigned("kf-ticket-serving");
  const auto [client_crt, client_key] = test::WriteSelfSigned("kf-ticket-alice");
  auto [server_ctx, client_ctx] =
      ClientCertContexts(serving_crt, serving_key, client_crt, client_key);
  // Each NewSessionTicket the client reads becomes a new session in its cache.
  static int tickets = 0;
  SSL_CTX_set_session_cache_mode(client_ctx.get(), SSL_SESS_CACHE_CLIENT);
  SSL_CTX_sess_set_new_cb(client_ctx.get(), [](SSL*, SSL_SESSION*) {
    ++tickets;
    return 0;  // Not kept: the caller frees it.
  });
  tickets = 0;
  REQUIRE(Connect(server_ctx.get(), client_ctx.get(), nullptr).first);
  CHECK(tickets == 2);  // OpenSSL's default.
  REQUIRE(EnableSessionResumption(server_ctx.get(), {client_crt, ""}, {}).ok());
  tickets = 0;
  auto [server, client] = Connect(server_ctx.get(), client_ctx.get(), nullptr);
  REQUIRE(server);
  CHECK(SSL_version(server.get()) == TLS1_3_VERSION);
  CHECK(tickets == 1);
}

TEST_CASE("a ticket goes only to a client whose ClientHello offers psk_dhe_ke", "[tls]") {
  using namespace std::string_view_literals;
  CHECK_FALSE(ResumableClient(std::nullopt));  // Go's client without a ClientSessionCache.
  CHECK(ResumableClient("\x01\x01"sv));        // psk_dhe_ke: Go's with one, OpenSSL's.
  CHECK(ResumableClient("\x02\x00\x01"sv));    // psk_ke and psk_dhe_ke.
  CHECK_FALSE(ResumableClient("\x01\x00"sv));  // psk_ke alone: no forward secrecy.
  CHECK_FALSE(ResumableClient(""sv));
  CHECK_FALSE(ResumableClient("\x00"sv));
  CHECK_FALSE(ResumableClient("\x00\x01"sv));  // Past the list's own length.
  CHECK(ResumableClient("\x05\x01"sv));        // A list longer than its bytes: what is there.
}

TEST_CASE("the handshake verifies no chain, and the certificate is verified when it is read",
          "[tls]") {
  const auto [serving_crt, serving_key] = test::WriteSelfSigned("kf-lazy-serving");
  const auto [alice_crt, alice_key] = test::WriteSelfSigned("kf-lazy-alice");
  const auto [mallory_crt, mallory_key] = test::WriteSelfSigned("kf-lazy-mallory");
  // The server trusts Alice's certificate (its own CA) and not Mallory's.
  auto [server_ctx, alice_ctx] = ClientCertContexts(serving_crt, serving_key, alice_crt, alice_key);
  CtxPtr mallory_ctx(SSL_CTX_new(TLS_client_method()), &SSL_CTX_free);
  REQUIRE(SSL_CTX_use_certificate_chain_file(mallory_ctx.get(), mallory_crt.c_str()) == 1);
  REQUIRE(SSL_CTX_use_PrivateKey_file(mallory_ctx.get(), mallory_key.c_str(), SSL_FILETYPE_PEM) ==
          1);

  // Mallory's handshake completes and OpenSSL has verified nothing: no chain, no error.
  auto [mallory, mallory_client] = Connect(server_ctx.get(), mallory_ctx.get(), nullptr);
  REQUIRE(mallory);
  CHECK(SSL_get_verify_result(mallory.get()) == X509_V_OK);
  // Reading it verifies it against the users' CA, and says why it fails.
  PeerCertificate peer(mallory.get());
  const ClientCertificate& read = peer.Get();
  CHECK(read.presented);
  CHECK_FALSE(read.verified);
  CHECK(read.rejected());
  CHECK_FALSE(read.authenticates());
  CHECK(read.error == "self-signed certificate");
  CHECK(&peer.Get() == &read);  // Read once, for the connection's life.

  auto [alice, alice_client] = Connect(server_ctx.get(), alice_ctx.get(), nullptr);
  REQUIRE(alice);
  PeerCertificate alice_peer(alice.get());
  CHECK(alice_peer.Get().authenticates());
  CHECK(alice_peer.Get().user.username == "kf-lazy-alice");
  CHECK(alice_peer.Get().error.empty());

  // Plain TCP: nothing presented; a certificate given as read is kept as it is.
  PeerCertificate plain;
  CHECK_FALSE(plain.Get().presented);
  ClientCertificate given;
  given.presented = true;
  given.error = "given";
  PeerCertificate as_read(given);
  CHECK(as_read.Get().error == "given");
}

}  // namespace kf
