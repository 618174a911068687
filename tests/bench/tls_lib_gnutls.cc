// GnuTLS as kf_tls_server_bench's server library: its default priorities (TLS 1.3 and 1.2),
// a certificate required and verified in the handshake (gnutls_session_set_verify_cert), no
// tickets (GNUTLS_NO_TICKETS).
#include <gnutls/gnutls.h>
#include <unistd.h>

#include "tests/bench/tls_libs.h"

namespace kf::bench {
namespace {

std::string Error(std::string_view what, int code) {
  return std::string(what) + ": " + gnutls_strerror(code);
}

class GnuTlsConnection : public TlsConnection {
 public:
  GnuTlsConnection(gnutls_session_t session, int fd) : session_(session), fd_(fd) {}
  ~GnuTlsConnection() override {
    gnutls_deinit(session_);
    ::close(fd_);
  }
  GnuTlsConnection(const GnuTlsConnection&) = delete;
  GnuTlsConnection& operator=(const GnuTlsConnection&) = delete;

  long Read(char* out, size_t size) override {
    for (;;) {
      ssize_t got = gnutls_record_recv(session_, out, size);
      if (got >= 0) return static_cast<long>(got);
      if (got == GNUTLS_E_PREMATURE_TERMINATION) return 0;
      if (got != GNUTLS_E_AGAIN && got != GNUTLS_E_INTERRUPTED) return -1;
    }
  }
  bool Write(std::string_view bytes) override {
    while (!bytes.empty()) {
      ssize_t put = gnutls_record_send(session_, bytes.data(), bytes.size());
      if (put == GNUTLS_E_AGAIN || put == GNUTLS_E_INTERRUPTED) continue;
      if (put <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(put));
    }
    return true;
  }

 private:
  gnutls_session_t session_;
  int fd_;
};

class GnuTls : public TlsLibrary {
 public:
  GnuTls() = default;
  ~GnuTls() override {
    if (priority_ != nullptr) gnutls_priority_deinit(priority_);
    if (credentials_ != nullptr) gnutls_certificate_free_credentials(credentials_);
  }
  GnuTls(const GnuTls&) = delete;
  GnuTls& operator=(const GnuTls&) = delete;

  bool Setup(const TlsFiles& files, std::string* error) {
    int rc = gnutls_certificate_allocate_credentials(&credentials_);
    if (rc < 0) {
      *error = Error("gnutls_certificate_allocate_credentials", rc);
      return false;
    }
    rc =
        gnutls_certificate_set_x509_trust_file(credentials_, files.ca.c_str(), GNUTLS_X509_FMT_PEM);
    if (rc <= 0) {
      *error = Error("gnutls_certificate_set_x509_trust_file", rc);
      return false;
    }
    rc = gnutls_certificate_set_x509_key_file(credentials_, files.cert.c_str(), files.key.c_str(),
                                              GNUTLS_X509_FMT_PEM);
    if (rc < 0) {
      *error = Error("gnutls_certificate_set_x509_key_file", rc);
      return false;
    }
    rc = gnutls_priority_init(&priority_, nullptr, nullptr);
    if (rc < 0) {
      *error = Error("gnutls_priority_init", rc);
      return false;
    }
    return true;
  }

  std::string Version() const override {
    return std::string("GnuTLS ") + gnutls_check_version(nullptr);
  }

  std::unique_ptr<TlsConnection> Accept(int fd, std::string* error) override {
    gnutls_session_t session = nullptr;
    int rc = gnutls_init(&session, GNUTLS_SERVER | GNUTLS_NO_TICKETS);
    if (rc < 0) {
      ::close(fd);
      *error = Error("gnutls_init", rc);
      return nullptr;
    }
    auto conn = std::make_unique<GnuTlsConnection>(session, fd);
    if ((rc = gnutls_priority_set(session, priority_)) < 0 ||
        (rc = gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, credentials_)) < 0) {
      *error = Error("gnutls session setup", rc);
      return nullptr;
    }
    gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUIRE);
    gnutls_session_set_verify_cert(session, nullptr, 0);
    gnutls_transport_set_int(session, fd);
    do {
      rc = gnutls_handshake(session);
    } while (rc < 0 && gnutls_error_is_fatal(rc) == 0);
    if (rc < 0) {
      *error = Error("gnutls_handshake", rc);
      return nullptr;
    }
    return conn;
  }

 private:
  gnutls_certificate_credentials_t credentials_ = nullptr;
  gnutls_priority_t priority_ = nullptr;
};

}  // namespace

std::unique_ptr<TlsLibrary> MakeGnuTls(const TlsFiles& files, std::string* error) {
  auto lib = std::make_unique<GnuTls>();
  if (!lib->Setup(files, error)) return nullptr;
  return lib;
}

}  // namespace kf::bench
