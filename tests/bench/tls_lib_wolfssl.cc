// wolfSSL (Debian's build) as kf_tls_server_bench's server library: TLS 1.2 and 1.3, a client
// certificate required and verified in the handshake, no TLS 1.3 tickets.
// clang-format off
#include <wolfssl/options.h>  // First: the build's settings the other headers depend on.
#include <wolfssl/ssl.h>
// clang-format on
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <utility>

#include "tests/bench/tls_libs.h"

namespace kf::bench {
namespace {

std::string Error(std::string_view what, int code) {
  char text[WOLFSSL_MAX_ERROR_SZ];
  wolfSSL_ERR_error_string_n(static_cast<unsigned long>(code), text, sizeof text);
  return std::string(what) + ": " + text;
}

class WolfSslConnection : public TlsConnection {
 public:
  WolfSslConnection(WOLFSSL* ssl, int fd) : ssl_(ssl), fd_(fd) {}
  ~WolfSslConnection() override {
    wolfSSL_free(ssl_);
    ::close(fd_);
  }
  WolfSslConnection(const WolfSslConnection&) = delete;
  WolfSslConnection& operator=(const WolfSslConnection&) = delete;

  long Read(char* out, size_t size) override {
    int got = wolfSSL_read(ssl_, out, static_cast<int>(std::min<size_t>(size, INT_MAX)));
    if (got > 0) return got;
    return wolfSSL_get_error(ssl_, got) == WOLFSSL_ERROR_ZERO_RETURN ? 0 : -1;
  }
  bool Write(std::string_view bytes) override {
    return wolfSSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size())) ==
           static_cast<int>(bytes.size());
  }

 private:
  WOLFSSL* ssl_;
  int fd_;
};

class WolfSsl : public TlsLibrary {
 public:
  WolfSsl() { wolfSSL_Init(); }
  ~WolfSsl() override {
    if (ctx_ != nullptr) wolfSSL_CTX_free(ctx_);
    wolfSSL_Cleanup();
  }
  WolfSsl(const WolfSsl&) = delete;
  WolfSsl& operator=(const WolfSsl&) = delete;

  bool Setup(const TlsFiles& files, std::string* error) {
    ctx_ = wolfSSL_CTX_new(wolfSSLv23_server_method());
    if (ctx_ == nullptr) {
      *error = "wolfSSL_CTX_new failed";
      return false;
    }
    // Each step's name and whether it succeeded: its result is not an error code, so a
    // failure is named by the step (with the library's queued error when there is one).
    const std::pair<const char*, bool> steps[] = {
        {"wolfSSL_CTX_SetMinVersion",
         wolfSSL_CTX_SetMinVersion(ctx_, WOLFSSL_TLSV1_2) == WOLFSSL_SUCCESS},
        {"wolfSSL_CTX_use_certificate_chain_file",
         wolfSSL_CTX_use_certificate_chain_file(ctx_, files.cert.c_str()) == WOLFSSL_SUCCESS},
        {"wolfSSL_CTX_use_PrivateKey_file",
         wolfSSL_CTX_use_PrivateKey_file(ctx_, files.key.c_str(), WOLFSSL_FILETYPE_PEM) ==
             WOLFSSL_SUCCESS},
        {"wolfSSL_CTX_load_verify_locations",
         wolfSSL_CTX_load_verify_locations(ctx_, files.ca.c_str(), nullptr) == WOLFSSL_SUCCESS},
        {"wolfSSL_CTX_no_ticket_TLSv13", wolfSSL_CTX_no_ticket_TLSv13(ctx_) == 0},
    };
    for (const auto& [step, ok] : steps) {
      if (!ok) {
        const auto code = static_cast<int>(wolfSSL_ERR_get_error());
        *error = code != 0 ? Error(step, code) : std::string(step) + " failed";
        return false;
      }
    }
    wolfSSL_CTX_set_verify(ctx_, WOLFSSL_VERIFY_PEER | WOLFSSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                           nullptr);
    return true;
  }

  std::string Version() const override { return std::string("wolfSSL ") + wolfSSL_lib_version(); }

  std::unique_ptr<TlsConnection> Accept(int fd, std::string* error) override {
    WOLFSSL* ssl = wolfSSL_new(ctx_);
    if (ssl == nullptr) {
      ::close(fd);
      *error = "wolfSSL_new failed";
      return nullptr;
    }
    auto conn = std::make_unique<WolfSslConnection>(ssl, fd);
    if (wolfSSL_set_fd(ssl, fd) != WOLFSSL_SUCCESS) {
      *error = "wolfSSL_set_fd failed";
      return nullptr;
    }
    if (int rc = wolfSSL_accept(ssl); rc != WOLFSSL_SUCCESS) {
      *error = Error("wolfSSL_accept", wolfSSL_get_error(ssl, rc));
      return nullptr;
    }
    // What the handshake kept (its hashes, key shares, arrays) goes now, not with the object.
    wolfSSL_FreeHandshakeResources(ssl);
    return conn;
  }

 private:
  WOLFSSL_CTX* ctx_ = nullptr;
};

}  // namespace

std::unique_ptr<TlsLibrary> MakeWolfSsl(const TlsFiles& files, std::string* error) {
  auto lib = std::make_unique<WolfSsl>();
  if (!lib->Setup(files, error)) return nullptr;
  return lib;
}

}  // namespace kf::bench
