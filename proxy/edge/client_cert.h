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

// What the connection's peer presented, after the handshake.
ClientCertificate ReadClientCertificate(SSL* ssl);

// The user of a verified certificate's `subject` into `out`: the last CommonName, every
// Organization; subject_refused (and error, bytes escaped) when they cannot be an identity.
void ReadSubjectUser(X509_NAME* subject, ClientCertificate& out);

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_CLIENT_CERT_H_
