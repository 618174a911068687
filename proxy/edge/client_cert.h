// Client certificates on the TLS listener, read as the apiserver reads them: the listener asks
// for a certificate but accepts a connection without one or with one it cannot verify (Go's
// tls.RequestClientCert), and the request decides. Each role verifies the certificate against
// its own CA only, as the apiserver's authenticators do:
//   - a front proxy (request-header authentication): chains to --requestheader-client-ca-file
//     and its CommonName is in --requestheader-allowed-names (any, when that list is empty);
//     the user is then in the request's header fields (proxy/upstream/request_header.h);
//   - a user (the x509 authenticator): chains to --client-ca-file; the user is the subject's
//     CommonName, the groups its Organization values. A subject whose CommonName or any
//     Organization holds a byte an HTTP field value forbids, or leading or trailing blanks, is
//     refused (ClientCertificate::subject_refused): no such identity can be carried upstream.
// Both also need the certificate within its validity and usable for client auth.
#ifndef KUBE_FANOUT_EDGE_CLIENT_CERT_H_
#define KUBE_FANOUT_EDGE_CLIENT_CERT_H_

#include <openssl/ssl.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proxy/edge/request.h"

namespace kf {

struct ClientCertConfig {
  std::string client_ca_file;         // Users; empty: none.
  std::string requestheader_ca_file;  // Front proxies; empty: none.
  std::vector<std::string> requestheader_allowed_names;
};

// Makes the server context request client certificates from the CAs of `config` (their names
// sent to clients as the acceptable ones), without failing the handshake over them.
absl::Status RequestClientCertificates(SSL_CTX* ctx, const ClientCertConfig& config);

// The store users' certificates are verified against (--client-ca-file), as
// RequestClientCertificates loaded it into `ctx`; null when there is none.
X509_STORE* UsersStore(SSL_CTX* ctx);

// What the connection's peer presented, after the handshake: each role's verification runs here
// (the handshake itself verifies no chain).
ClientCertificate ReadClientCertificate(SSL* ssl);

// A connection's client certificate, read when its first request asks for it. A connection that
// ends before its first request verifies nothing: client-go dials one TLS connection per request
// waiting for one and keeps only the first, so most of an agent's handshakes carry no request.
// One connection's, used on its own executor.
class PeerCertificate {
 public:
  PeerCertificate() : cert_(ClientCertificate{}) {}  // None presented: plain TCP.
  explicit PeerCertificate(SSL* ssl) : ssl_(ssl) {}  // Read from `ssl` on first Get().
  PeerCertificate(ClientCertificate cert) : cert_(std::move(cert)) {}  // NOLINT: a value as is.

  const ClientCertificate& Get() {
    if (!cert_) cert_ = ReadClientCertificate(ssl_);
    return *cert_;
  }

 private:
  SSL* ssl_ = nullptr;
  std::optional<ClientCertificate> cert_;
};

// The user of a verified certificate's `subject` into `out`: the last CommonName, every
// Organization; subject_refused (and error, bytes escaped) when they cannot be an identity.
void ReadSubjectUser(X509_NAME* subject, ClientCertificate& out);

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_CLIENT_CERT_H_
