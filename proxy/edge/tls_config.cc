#include "proxy/edge/tls_config.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <ctime>
#include <fstream>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/strings.h"

namespace kf {
namespace {

// Go's crypto/tls names, as the apiserver's --tls-cipher-suites accepts them
// (k8s.io/component-base/cli/flag: tls.CipherSuites(), tls.InsecureCipherSuites() and two
// legacy ChaCha20 names). `tls13`: TLS 1.3 suites, accepted and not configurable, as in Go.
struct GoSuite {
  std::string_view name;
  std::string_view iana;  // The standard name OpenSSL knows it by; empty: `name`.
  bool tls13 = false;
  bool default_suite = false;  // Forward-secret AEAD: in kube-fanout's default list.
};
constexpr GoSuite kGoSuites[] = {
    {"TLS_AES_128_GCM_SHA256", "", true},
    {"TLS_AES_256_GCM_SHA384", "", true},
    {"TLS_CHACHA20_POLY1305_SHA256", "", true},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "", false, true},
    {"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "", false, true},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "", false, true},
    {"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "", false, true},
    {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "", false, true},
    {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "", false, true},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA"},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA"},
    {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"},
    {"TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA"},
    // Legacy names the apiserver keeps.
    {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"},
    {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"},
    // tls.InsecureCipherSuites(): accepted as the apiserver accepts them. RC4 and 3DES are not
    // in Debian's OpenSSL 3 and are refused with that reason.
    {"TLS_RSA_WITH_RC4_128_SHA"},
    {"TLS_RSA_WITH_3DES_EDE_CBC_SHA"},
    {"TLS_RSA_WITH_AES_128_CBC_SHA"},
    {"TLS_RSA_WITH_AES_256_CBC_SHA"},
    {"TLS_RSA_WITH_AES_128_CBC_SHA256"},
    {"TLS_RSA_WITH_AES_128_GCM_SHA256"},
    {"TLS_RSA_WITH_AES_256_GCM_SHA384"},
    {"TLS_ECDHE_ECDSA_WITH_RC4_128_SHA"},
    {"TLS_ECDHE_RSA_WITH_RC4_128_SHA"},
    {"TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA"},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256"},
    {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256"},
};

constexpr std::pair<std::string_view, int> kVersions[] = {
    {"VersionTLS10", TLS1_VERSION},
    {"VersionTLS11", TLS1_1_VERSION},
    {"VersionTLS12", TLS1_2_VERSION},
    {"VersionTLS13", TLS1_3_VERSION},
};

// A file's bytes, at most 1 MiB (a certificate chain is a few KiB).
absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  constexpr size_t kMax = 1 << 20;
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  std::string out;
  char buf[8192];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    out.append(buf, static_cast<size_t>(in.gcount()));
    if (out.size() > kMax) return absl::InvalidArgumentError(absl::StrCat(path, ": over 1 MiB"));
  }
  return out;
}

std::string OpenSslError() {
  const unsigned long code = ERR_peek_last_error();  // NOLINT(runtime/int): OpenSSL's type.
  ERR_clear_error();
  if (code == 0) return "no PEM data";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  return buf;
}

int NoPassphrase(char* /*buf*/, int /*size*/, int /*rwflag*/, void* /*u*/) { return 0; }

}  // namespace

struct ServingCertificate::Pair {
  Pair() = default;
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;
  ~Pair() {
    X509_free(cert);
    EVP_PKEY_free(key);
    sk_X509_pop_free(chain, X509_free);
  }
  X509* cert = nullptr;
  EVP_PKEY* key = nullptr;
  STACK_OF(X509) * chain = nullptr;  // The certificates after the first, in file order.
};

namespace {

absl::StatusOr<std::shared_ptr<const ServingCertificate::Pair>> ParsePair(
    const std::string& cert_pem, const std::string& key_pem) {
  auto pair = std::make_shared<ServingCertificate::Pair>();
  ERR_clear_error();
  std::unique_ptr<BIO, decltype(&BIO_free)> certs(
      BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size())), &BIO_free);
  pair->cert = PEM_read_bio_X509_AUX(certs.get(), nullptr, &NoPassphrase, nullptr);
  if (pair->cert == nullptr) return absl::InvalidArgumentError("certificate: " + OpenSslError());
  pair->chain = sk_X509_new_null();
  while (X509* next = PEM_read_bio_X509(certs.get(), nullptr, &NoPassphrase, nullptr)) {
    sk_X509_push(pair->chain, next);
  }
  ERR_clear_error();  // The end of the PEM data.
  std::unique_ptr<BIO, decltype(&BIO_free)> key(
      BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())), &BIO_free);
  pair->key = PEM_read_bio_PrivateKey(key.get(), nullptr, &NoPassphrase, nullptr);
  if (pair->key == nullptr) return absl::InvalidArgumentError("private key: " + OpenSslError());
  if (X509_check_private_key(pair->cert, pair->key) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError("the private key does not match the certificate");
  }
  return std::shared_ptr<const ServingCertificate::Pair>(std::move(pair));
}

int64_t NotAfter(const X509* cert) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) != 1) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

}  // namespace

absl::StatusOr<std::string> OpenSslCipherList(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  if (names.empty()) {
    for (const GoSuite& s : kGoSuites) {
      if (s.default_suite) out.emplace_back(OPENSSL_cipher_name(std::string(s.name).c_str()));
    }
    return absl::StrJoin(out, ":");
  }
  for (const std::string& name : names) {
    const GoSuite* found = nullptr;
    for (const GoSuite& s : kGoSuites) {
      if (s.name == name) found = &s;
    }
    if (found == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tls-cipher-suites: cipher suite ", name,
                       " not supported or doesn't exist (names as Go's crypto/tls gives them, "
                       "e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)"));
    }
    if (found->tls13) continue;
    const std::string iana(found->iana.empty() ? found->name : found->iana);
    const std::string openssl = OPENSSL_cipher_name(iana.c_str());
    if (openssl == "(NONE)") {
      return absl::InvalidArgumentError(absl::StrCat("--tls-cipher-suites: cipher suite ", name,
                                                     " is not available in this OpenSSL"));
    }
    out.push_back(openssl);
  }
  return absl::StrJoin(out, ":");
}

absl::StatusOr<int> TlsVersion(std::string_view name) {
  if (name.empty()) return TLS1_2_VERSION;
  for (const auto& [n, v] : kVersions) {
    if (n == name) return v;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--tls-min-version: unknown tls version \"", ToAbsl(name),
                   "\" (one of VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13)"));
}

absl::Status ConfigureServerTls(SSL_CTX* ctx, const std::vector<std::string>& cipher_suites,
                                std::string_view min_version) {
  auto version = TlsVersion(min_version);
  if (!version.ok()) return version.status();
  auto list = OpenSslCipherList(cipher_suites);
  if (!list.ok()) return list.status();
  // Only TLS 1.3 names: no TLS 1.2 suite is allowed, so no TLS 1.2 handshake can succeed (as in
  // Go); OpenSSL takes no empty list, so TLS 1.2 is switched off instead.
  if (list->empty()) *version = TLS1_3_VERSION;
  if (SSL_CTX_set_min_proto_version(ctx, *version) != 1 ||
      (!list->empty() && SSL_CTX_set_cipher_list(ctx, list->c_str()) != 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-cipher-suites/--tls-min-version: ", OpenSslError()));
  }
  return absl::OkStatus();
}

bool ResumableClient(std::optional<std::string_view> modes) {
  constexpr unsigned char kPskDheKe = 1;
  if (!modes || modes->empty()) return false;
  const size_t n = static_cast<unsigned char>((*modes)[0]);
  for (size_t i = 1; i <= n && i < modes->size(); ++i) {
    if (static_cast<unsigned char>((*modes)[i]) == kPskDheKe) return true;
  }
  return false;
}

namespace {

// No TLS 1.3 ticket for a client that cannot use it (ResumableClient).
int TicketsOnlyForResumers(SSL* ssl, int* /*alert*/, void* /*arg*/) {
  constexpr unsigned int kPskKeyExchangeModes = 45;  // RFC 8446 4.2.9.
  const unsigned char* data = nullptr;
  size_t length = 0;
  std::optional<std::string_view> modes;
  if (SSL_client_hello_get0_ext(ssl, kPskKeyExchangeModes, &data, &length) == 1) {
    modes = std::string_view(reinterpret_cast<const char*>(data), length);
  }
  if (!ResumableClient(modes)) (void)SSL_set_num_tickets(ssl, 0);
  return SSL_CLIENT_HELLO_SUCCESS;
}

}  // namespace

absl::Status EnableSessionResumption(SSL_CTX* ctx, const std::vector<std::string>& ca_files,
                                     const std::vector<std::string>& allowed_names) {
  std::string config;
  for (const std::string& file : ca_files) {
    if (file.empty()) continue;
    auto bytes = ReadSmallFile(file);
    if (!bytes.ok()) return bytes.status();
    // Each part with its length: no two configurations read as the same bytes.
    absl::StrAppend(&config, "ca:", bytes->size(), ":", *bytes);
  }
  for (const std::string& name : allowed_names) {
    absl::StrAppend(&config, "name:", name.size(), ":", name);
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  static_assert(SSL_MAX_SID_CTX_LENGTH >= 32, "a SHA-256 fits a session ID context");
  if (EVP_Digest(config.data(), config.size(), digest, &length, EVP_sha256(), nullptr) != 1 ||
      SSL_CTX_set_session_id_context(ctx, digest, length) != 1) {
    return absl::InternalError(absl::StrCat("TLS session ID context: ", OpenSslError()));
  }
  // One TLS 1.3 ticket per handshake, as Go's server sends (crypto/tls, sendSessionTickets).
  // OpenSSL's default is two, and OpenSSL 3.0 makes each ticket after the first from a copy of
  // the session that re-encodes and re-parses it, the client's certificate included: a fifth of
  // a full handshake's CPU (docs/load.md, CPU per connect).
  if (SSL_CTX_set_num_tickets(ctx, 1) != 1) {
    return absl::InternalError(absl::StrCat("TLS session tickets: ", OpenSslError()));
  }
  SSL_CTX_set_client_hello_cb(ctx, TicketsOnlyForResumers, nullptr);
  return absl::OkStatus();
}

ServingCertificate::ServingCertificate(std::string cert_file, std::string key_file)
    : cert_file_(std::move(cert_file)), key_file_(std::move(key_file)) {}

ServingCertificate::~ServingCertificate() = default;

absl::Status ServingCertificate::Load() {
  std::string error;
  if (ReloadIfChanged(&error) == Change::kRejected) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-cert-file/--tls-private-key-file: ", error));
  }
  reloads_.store(0, std::memory_order_relaxed);  // The first load is not a reload.
  return absl::OkStatus();
}

void ServingCertificate::Install(SSL_CTX* ctx) {
  SSL_CTX_set_cert_cb(ctx, &ServingCertificate::SelectCertificate, this);
}

int ServingCertificate::SelectCertificate(SSL* ssl, void* self) {
  std::shared_ptr<const Pair> pair;
  {
    auto* me = static_cast<ServingCertificate*>(self);
    absl::MutexLock lock(&me->mu_);
    pair = me->current_;
  }
  if (pair == nullptr) return 0;
  // Takes its own references: the pair may be replaced while the connection lives.
  return SSL_use_cert_and_key(ssl, pair->cert, pair->key, pair->chain, 1) == 1 ? 1 : 0;
}

ServingCertificate::Change ServingCertificate::ReloadIfChanged(std::string* error) {
  auto cert = ReadSmallFile(cert_file_);
  auto key = ReadSmallFile(key_file_);
  // An unreadable file is a state of its own, compared like its bytes.
  std::string cert_seen = cert.ok() ? *cert : absl::StrCat("\n", cert.status().message());
  std::string key_seen = key.ok() ? *key : absl::StrCat("\n", key.status().message());
  if (cert_seen == seen_cert_ && key_seen == seen_key_) return Change::kNone;
  seen_cert_ = std::move(cert_seen);
  seen_key_ = std::move(key_seen);
  absl::StatusOr<std::shared_ptr<const Pair>> pair = !cert.ok()  ? cert.status()
                                                     : !key.ok() ? key.status()
                                                                 : ParsePair(*cert, *key);
  if (!pair.ok()) {
    *error = std::string(pair.status().message());
    failures_.fetch_add(1, std::memory_order_relaxed);
    return Change::kRejected;
  }
  not_after_.store(NotAfter((*pair)->cert), std::memory_order_relaxed);
  {
    absl::MutexLock lock(&mu_);
    current_ = *std::move(pair);
  }
  reloads_.fetch_add(1, std::memory_order_relaxed);
  return Change::kReloaded;
}

}  // namespace kf
