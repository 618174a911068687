// Client certificates on the TLS listener, read as the apiserver reads them: the listener asks
// for a certificate but accepts a connection without one or with one it cannot verify (Go's
// tls.RequestClientCert), and the request decides (its x509 authenticator): a certificate that
// chains to --client-ca-file, is within its validity and allows client auth names the user
// (its subject's CommonName) and groups (its Organization values).
#ifndef KUBE_FANOUT_EDGE_CLIENT_CERT_H_
#define KUBE_FANOUT_EDGE_CLIENT_CERT_H_

#include <openssl/ssl.h>

#include <string>

#include "absl/status/status.h"
#include "edge/request.h"

namespace kf {

// Makes the server context request client certificates and verify them against the PEM bundle
// at `ca_file` (also sent to clients as the acceptable CA names), without failing the handshake.
absl::Status RequestClientCertificates(SSL_CTX* ctx, const std::string& ca_file);

// What the connection's peer presented, after the handshake.
ClientCertificate ReadClientCertificate(SSL* ssl);

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_CLIENT_CERT_H_
