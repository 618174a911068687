#include "edge/client_cert.h"

#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

#include "absl/strings/str_cat.h"

namespace kf {
namespace {

// Verification runs in full and its result is kept (SSL_get_verify_result), but never ends the
// handshake: an unverifiable certificate is the request's to refuse, as in the apiserver.
int KeepGoing(int /*preverified*/, X509_STORE_CTX* /*ctx*/) { return 1; }

// Every value of `nid` in `name`, in order.
std::vector<std::string> Values(X509_NAME* name, int nid) {
  std::vector<std::string> out;
  for (int i = X509_NAME_get_index_by_NID(name, nid, -1); i >= 0;
       i = X509_NAME_get_index_by_NID(name, nid, i)) {
    ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i));
    unsigned char* utf8 = nullptr;
    const int n = ASN1_STRING_to_UTF8(&utf8, data);
    if (n >= 0) out.emplace_back(reinterpret_cast<const char*>(utf8), static_cast<size_t>(n));
    OPENSSL_free(utf8);
  }
  return out;
}

}  // namespace

absl::Status RequestClientCertificates(SSL_CTX* ctx, const std::string& ca_file) {
  if (SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("--client-ca-file ", ca_file, ": cannot load the CA bundle"));
  }
  STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(ca_file.c_str());
  if (names == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("--client-ca-file ", ca_file, ": no certificates in it"));
  }
  SSL_CTX_set_client_CA_list(ctx, names);  // Takes ownership.
  // The purpose checked is the peer's role: a client certificate (extended key usage clientAuth
  // when the certificate restricts it), as Go's x509 verification with ExtKeyUsageClientAuth.
  SSL_CTX_set_purpose(ctx, X509_PURPOSE_SSL_CLIENT);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, &KeepGoing);
  return absl::OkStatus();
}

ClientCertificate ReadClientCertificate(SSL* ssl) {
  ClientCertificate out;
  std::unique_ptr<X509, decltype(&X509_free)> cert(SSL_get1_peer_certificate(ssl), &X509_free);
  if (!cert) return out;
  out.presented = true;
  const long result = SSL_get_verify_result(ssl);  // NOLINT(runtime/int): OpenSSL's type.
  if (result != X509_V_OK) {
    out.error = X509_verify_cert_error_string(result);
    return out;
  }
  out.verified = true;
  X509_NAME* subject = X509_get_subject_name(cert.get());
  std::vector<std::string> cn = Values(subject, NID_commonName);
  // Go's pkix.Name keeps the last CommonName of the subject.
  if (!cn.empty()) out.user.username = cn.back();
  out.user.groups = Values(subject, NID_organizationName);
  return out;
}

}  // namespace kf
