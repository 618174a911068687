#include "tests/load/node_certs.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace kf::load {
namespace {

std::string OpenSslError(const std::string& what) {
  char buf[256] = "unknown error";
  if (const unsigned long e = ERR_get_error(); e != 0) ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return absl::StrCat(what, ": ", buf);
}

bool AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return false;
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

}  // namespace

NodeCredential::~NodeCredential() {
  X509_free(cert);
  EVP_PKEY_free(key);
}

NodeCertificates::~NodeCertificates() {
  X509_free(ca_);
  EVP_PKEY_free(ca_key_);
}

absl::StatusOr<std::unique_ptr<NodeCertificates>> NodeCertificates::Load(
    const std::string& cert_file, const std::string& key_file) {
  FILE* f = std::fopen(cert_file.c_str(), "r");
  if (f == nullptr) return absl::NotFoundError(absl::StrCat("cannot read ", cert_file));
  X509* ca = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  if (ca == nullptr) return absl::InvalidArgumentError(OpenSslError(cert_file));
  f = std::fopen(key_file.c_str(), "r");
  if (f == nullptr) {
    X509_free(ca);
    return absl::NotFoundError(absl::StrCat("cannot read ", key_file));
  }
  EVP_PKEY* key = PEM_read_PrivateKey(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  if (key == nullptr) {
    X509_free(ca);
    return absl::InvalidArgumentError(OpenSslError(key_file));
  }
  return std::unique_ptr<NodeCertificates>(new NodeCertificates(ca, key));
}

absl::StatusOr<std::shared_ptr<const NodeCredential>> NodeCertificates::Issue(
    const std::string& node) const {
  auto out = std::make_shared<NodeCredential>();
  out->key = EVP_EC_gen("P-256");
  if (out->key == nullptr) return absl::InternalError(OpenSslError("EC key"));
  X509* cert = out->cert = X509_new();
  uint64_t serial = 0;
  RAND_bytes(reinterpret_cast<unsigned char*>(&serial), sizeof(serial));
  const std::string cn = absl::StrCat("system:node:", node);
  X509_NAME* name = X509_get_subject_name(cert);
  const bool built = cert != nullptr && X509_set_version(cert, 2) == 1 &&
                     ASN1_INTEGER_set_uint64(X509_get_serialNumber(cert), serial >> 1) == 1 &&
                     X509_gmtime_adj(X509_getm_notBefore(cert), -3600) != nullptr &&
                     X509_gmtime_adj(X509_getm_notAfter(cert), 2 * 86400) != nullptr &&
                     X509_set_pubkey(cert, out->key) == 1 &&
                     X509_NAME_add_entry_by_txt(
                         name, "O", MBSTRING_ASC,
                         reinterpret_cast<const unsigned char*>("system:nodes"), -1, -1, 0) == 1 &&
                     X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                                reinterpret_cast<const unsigned char*>(cn.c_str()),
                                                -1, -1, 0) == 1 &&
                     X509_set_issuer_name(cert, X509_get_subject_name(ca_)) == 1 &&
                     AddExtension(cert, ca_, NID_basic_constraints, "critical,CA:FALSE") &&
                     AddExtension(cert, ca_, NID_key_usage, "critical,digitalSignature") &&
                     AddExtension(cert, ca_, NID_ext_key_usage, "clientAuth");
  if (!built) return absl::InternalError(OpenSslError("certificate"));
  std::lock_guard lock(mu_);
  if (X509_sign(cert, ca_key_, EVP_sha256()) == 0) {
    return absl::InternalError(OpenSslError("signing"));
  }
  return std::shared_ptr<const NodeCredential>(std::move(out));
}

}  // namespace kf::load
