// Certificates shared between threads, made ready before they are shared.
#ifndef KUBE_FANOUT_EDGE_X509_CACHE_H_
#define KUBE_FANOUT_EDGE_X509_CACHE_H_

#include <openssl/x509.h>

namespace kf {

// Fills, on the calling thread, what OpenSSL otherwise works out from each certificate of
// `store` the first time a verification uses it: its extensions (key identifiers, basic
// constraints, key usage) and its digest, cached in the X509 object. Call it on every store a
// TLS context verifies with before the workers share the context: then no handshake writes to a
// CA certificate. OpenSSL fills that cache under the certificate's lock but reads it through a
// lock-free flag (an acquire load in libcrypto), which ThreadSanitizer cannot see, libcrypto not
// being instrumented: two workers' first handshakes showed as a data race on the upstream CA's
// subject key identifier (tests/sanitize tsan, docs/sanitizers.md). Null is ignored.
void CacheCertificateExtensions(X509_STORE* store);

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_X509_CACHE_H_
