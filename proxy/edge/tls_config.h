// The serving listener's TLS as the apiserver configures it:
//   - --tls-cipher-suites: the names Go's crypto/tls gives (IANA names, as the apiserver's
//     flag accepts them, insecure ones included), translated to OpenSSL's. As in Go, the list
//     governs TLS 1.2 and below; the TLS 1.3 names are accepted and TLS 1.3 always offers its
//     three AEAD suites. Default: the forward-secret AEAD suites only (ECDHE with AES-GCM or
//     ChaCha20-Poly1305), i.e. the secure part of Go's default list.
//   - --tls-min-version: VersionTLS10 … VersionTLS13, default VersionTLS12.
//   - The serving certificate and key, re-read when their files change (ServingCertificate):
//     new handshakes get the new pair, established connections keep theirs, and a new pair
//     that does not load (unreadable, not PEM, key not matching) leaves the old one in place.
#ifndef KUBE_FANOUT_EDGE_TLS_CONFIG_H_
#define KUBE_FANOUT_EDGE_TLS_CONFIG_H_

#include <openssl/ssl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace kf {

// The OpenSSL cipher list ("A:B:C") for Go cipher-suite names, TLS 1.3 names left out (an empty
// result: only TLS 1.3 names were given). Empty `names`: the default. InvalidArgument naming
// the first unknown suite, as the apiserver's "Cipher suite X not supported or doesn't exist".
absl::StatusOr<std::string> OpenSslCipherList(const std::vector<std::string>& names);

// TLS1_2_VERSION and so on for "VersionTLS12"; empty: the default (TLS 1.2).
absl::StatusOr<int> TlsVersion(std::string_view name);

// Applies both flags to a server context.
absl::Status ConfigureServerTls(SSL_CTX* ctx, const std::vector<std::string>& cipher_suites,
                                std::string_view min_version);

// Lets clients resume their TLS sessions (TLS 1.2 session IDs and tickets, TLS 1.3 tickets),
// as the apiserver's Go server does, also when client certificates are asked for: OpenSSL
// refuses to resume on a context that verifies peers without a session ID context, with an
// "internal error" alert. The context is a SHA-256 of the client-certificate configuration (the
// bytes of `ca_files`, then `allowed_names`), so sessions vouched for by other CAs are not
// resumed. A resumed session keeps its client certificate; proxy/edge/client_cert.h verifies it
// again on every connection. One TLS 1.3 ticket per full handshake, as Go's server sends, and
// only to a client that can resume with it (ResumableClient).
absl::Status EnableSessionResumption(SSL_CTX* ctx, const std::vector<std::string>& ca_files,
                                     const std::vector<std::string>& allowed_names);

// Whether a TLS 1.3 ClientHello's psk_key_exchange_modes (`modes`: the extension's payload, its
// length byte first; nullopt: the extension is absent) list psk_dhe_ke, the mode a ticket can be
// used with (RFC 8446 4.2.9: a server SHOULD NOT send tickets the client's modes cannot use).
// Go's server sends tickets only then (crypto/tls, shouldSendSessionTickets); Go's client offers
// the extension only with a ClientSessionCache, which client-go does not set, so a client-go
// agent's seven handshakes each skip making a ticket (a quarter of a full handshake's CPU with
// OpenSSL 3.0, which sends one regardless).
bool ResumableClient(std::optional<std::string_view> modes);

// The serving certificate chain and key, read from files and swapped in on change.
class ServingCertificate {
 public:
  ServingCertificate(std::string cert_file, std::string key_file);
  ~ServingCertificate();
  ServingCertificate(const ServingCertificate&) = delete;
  ServingCertificate& operator=(const ServingCertificate&) = delete;

  // Reads the files; the first load's error is a start-up error.
  absl::Status Load();
  // Every new handshake on `ctx` takes the current pair (SSL_CTX_set_cert_cb).
  void Install(SSL_CTX* ctx);

  enum class Change { kNone, kReloaded, kRejected };
  // Re-reads the files; kReloaded when their bytes changed and the new pair loaded, kRejected
  // (with the reason in *error) when they changed and did not: the old pair stays. A rejected
  // pair is reported once, until the files change again.
  Change ReloadIfChanged(std::string* error);

  uint64_t reloads() const { return reloads_.load(std::memory_order_relaxed); }
  uint64_t reload_failures() const { return failures_.load(std::memory_order_relaxed); }
  // The served certificate's notAfter, Unix seconds.
  int64_t not_after() const { return not_after_.load(std::memory_order_relaxed); }

  struct Pair;

 private:
  static int SelectCertificate(SSL* ssl, void* self);

  const std::string cert_file_, key_file_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const Pair> current_ ABSL_GUARDED_BY(mu_);
  std::string seen_cert_, seen_key_;  // The files' bytes last read (reload thread only).
  std::atomic<uint64_t> reloads_{0}, failures_{0};
  std::atomic<int64_t> not_after_{0};
};

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_TLS_CONFIG_H_
