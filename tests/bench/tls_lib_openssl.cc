// OpenSSL as kf_tls_server_bench's server library, set up as kube-fanout sets it up where it
// matters for memory: SSL_MODE_RELEASE_BUFFERS (record buffers freed between reads and writes).
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <unistd.h>

#include "tests/bench/tls_libs.h"

namespace kf::bench {
namespace {

std::string Errors(std::string_view what) {
  std::string out(what);
  while (unsigned long e = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(e, text, sizeof text);
    out += ": ";
    out += text;
  }
  return out;
}

class OpenSslConnection : public TlsConnection {
 public:
  OpenSslConnection(SSL* ssl, int fd) : ssl_(ssl), fd_(fd) {}
  ~OpenSslConnection() override {
    SSL_free(ssl_);
    ::close(fd_);
  }
  OpenSslConnection(const OpenSslConnection&) = delete;
  OpenSslConnection& operator=(const OpenSslConnection&) = delete;

  long Read(char* out, size_t size) override {
    size_t got = 0;
    if (SSL_read_ex(ssl_, out, size, &got) == 1) return static_cast<long>(got);
    return SSL_get_error(ssl_, 0) == SSL_ERROR_ZERO_RETURN ? 0 : -1;
  }
  bool Write(std::string_view bytes) override {
    size_t put = 0;
    return SSL_write_ex(ssl_, bytes.data(), bytes.size(), &put) == 1 && put == bytes.size();
  }

 private:
  SSL* ssl_;
  int fd_;
};

class OpenSsl : public TlsLibrary {
 public:
  explicit OpenSsl(SSL_CTX* ctx) : ctx_(ctx) {}
  ~OpenSsl() override { SSL_CTX_free(ctx_); }
  OpenSsl(const OpenSsl&) = delete;
  OpenSsl& operator=(const OpenSsl&) = delete;

  std::string Version() const override { return OpenSSL_version(OPENSSL_VERSION); }

  std::unique_ptr<TlsConnection> Accept(int fd, std::string* error) override {
    SSL* ssl = SSL_new(ctx_);
    if (ssl == nullptr || SSL_set_fd(ssl, fd) != 1) {
      SSL_free(ssl);
      ::close(fd);
      *error = Errors("SSL_new");
      return nullptr;
    }
    auto conn = std::make_unique<OpenSslConnection>(ssl, fd);
    if (SSL_accept(ssl) != 1) {
      *error = Errors("SSL_accept");
      return nullptr;
    }
    return conn;
  }

 private:
  SSL_CTX* ctx_;
};

}  // namespace

std::unique_ptr<TlsLibrary> MakeOpenSsl(const TlsFiles& files, std::string* error) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) {
    *error = Errors("SSL_CTX_new");
    return nullptr;
  }
  auto lib = std::make_unique<OpenSsl>(ctx);
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
      SSL_CTX_use_certificate_chain_file(ctx, files.cert.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx, files.key.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_load_verify_locations(ctx, files.ca.c_str(), nullptr) != 1 ||
      SSL_CTX_set_num_tickets(ctx, 0) != 1) {
    *error = Errors("OpenSSL setup");
    return nullptr;
  }
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return lib;
}

}  // namespace kf::bench
