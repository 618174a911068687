#include "proxy/edge/client_cert.h"

#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <memory>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "proxy/edge/field_syntax.h"
#include "proxy/edge/x509_cache.h"

namespace kf {
namespace {

// The handshake verifies no chain and never ends over one: an unverifiable certificate is the
// request's to refuse, as in the apiserver, and each role verifies against its own CA
// (ReadClientCertificate). Verifying once more here against every CA together cost about a tenth
// of a full handshake's CPU, for a result nothing used. The client still proves it holds the
// certificate's key (TLS CertificateVerify), which OpenSSL checks apart from this.
int NoChainCheck(X509_STORE_CTX* /*ctx*/, void* /*arg*/) { return 1; }

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

// The CAs of each role, kept with the SSL_CTX (ex_data) for ReadClientCertificate.
struct Roles {
  Roles() = default;
  Roles(const Roles&) = delete;
  Roles& operator=(const Roles&) = delete;
  ~Roles() {
    X509_STORE_free(users);
    X509_STORE_free(front_proxies);
  }
  X509_STORE* users = nullptr;
  X509_STORE* front_proxies = nullptr;
  std::vector<std::string> allowed_names;
};

// OpenSSL calls this when the SSL_CTX holding the Roles is freed.
void FreeRoles(void* /*parent*/, void* roles, CRYPTO_EX_DATA* /*ad*/, int /*idx*/,
               long /*argl*/,  // NOLINT(runtime/int): OpenSSL's type.
               void* /*argp*/) {
  delete static_cast<Roles*>(roles);
}

int RolesIndex() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, &FreeRoles);
  return index;
}

// A store of the certificates in `file` alone; null when it holds none.
X509_STORE* StoreOf(const std::string& file) {
  X509_STORE* store = X509_STORE_new();
  if (store == nullptr || X509_STORE_load_file(store, file.c_str()) != 1) {
    X509_STORE_free(store);
    ERR_clear_error();
    return nullptr;
  }
  return store;
}

// The peer's certificate chains to `store` and may authenticate a client, now: the purpose checked
// is a client certificate's (extended key usage clientAuth when the certificate restricts it), as
// Go's x509 verification with ExtKeyUsageClientAuth. Else false, and why in *why when given.
bool VerifiesAgainst(X509_STORE* store, X509* leaf, STACK_OF(X509) * untrusted,
                     std::string* why = nullptr) {
  if (store == nullptr) return false;
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  bool ok = ctx != nullptr && X509_STORE_CTX_init(ctx, store, leaf, untrusted) == 1 &&
            X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_CLIENT) == 1 &&
            X509_verify_cert(ctx) == 1;
  if (!ok && why != nullptr) {
    const int error = ctx != nullptr ? X509_STORE_CTX_get_error(ctx) : X509_V_ERR_OUT_OF_MEM;
    *why = error != X509_V_OK ? X509_verify_cert_error_string(error) : "cannot verify";
  }
  X509_STORE_CTX_free(ctx);
  ERR_clear_error();
  return ok;
}

}  // namespace

absl::Status RequestClientCertificates(SSL_CTX* ctx, const ClientCertConfig& config) {
  auto roles = std::make_unique<Roles>();
  STACK_OF(X509_NAME)* names = sk_X509_NAME_new_null();
  for (const auto& [file, flag, store] :
       {std::tuple{config.client_ca_file, "--client-ca-file", &roles->users},
        std::tuple{config.requestheader_ca_file, "--requestheader-client-ca-file",
                   &roles->front_proxies}}) {
    if (file.empty()) continue;
    // Clients are told every role's CA names; each role then verifies against its own.
    if (SSL_add_file_cert_subjects_to_stack(names, file.c_str()) != 1 ||
        (*store = StoreOf(file)) == nullptr) {
      ERR_clear_error();
      sk_X509_NAME_pop_free(names, X509_NAME_free);
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " ", file, ": cannot load the CA bundle"));
    }
  }
  // Every worker's ReadClientCertificate verifies against these.
  for (X509_STORE* store : {roles->users, roles->front_proxies}) CacheCertificateExtensions(store);
  roles->allowed_names = config.requestheader_allowed_names;
  SSL_CTX_set_client_CA_list(ctx, names);  // Takes ownership.
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  SSL_CTX_set_cert_verify_callback(ctx, &NoChainCheck, nullptr);
  // Owned by the SSL_CTX from here (FreeRoles); a context configured again drops its old one.
  delete static_cast<Roles*>(SSL_CTX_get_ex_data(ctx, RolesIndex()));
  SSL_CTX_set_ex_data(ctx, RolesIndex(), roles.release());
  return absl::OkStatus();
}

X509_STORE* UsersStore(SSL_CTX* ctx) {
  const auto* roles = static_cast<const Roles*>(SSL_CTX_get_ex_data(ctx, RolesIndex()));
  return roles != nullptr ? roles->users : nullptr;
}

void ReadSubjectUser(X509_NAME* subject, ClientCertificate& out) {
  std::vector<std::string> cn = Values(subject, NID_commonName);
  // Go's pkix.Name keeps the last CommonName of the subject.
  out.user.username = cn.empty() ? std::string() : cn.back();
  out.user.groups = Values(subject, NID_organizationName);
  // A subject the CA signed may still name no one kube-fanout can vouch for upstream: a CR or
  // LF would start a field of its own, blanks would be trimmed into someone else's name.
  if (absl::Status s = CheckIdentity(out.user); !s.ok()) {
    out.subject_refused = true;
    out.error = absl::StrCat("subject refused: ", s.message());
  }
}

ClientCertificate ReadClientCertificate(SSL* ssl) {
  ClientCertificate out;
  std::unique_ptr<X509, decltype(&X509_free)> cert(SSL_get1_peer_certificate(ssl), &X509_free);
  if (!cert) return out;
  out.presented = true;
  const auto* roles =
      static_cast<const Roles*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), RolesIndex()));
  if (roles == nullptr) {
    out.error = "no client CA configured";
    return out;
  }
  STACK_OF(X509)* untrusted = SSL_get_peer_cert_chain(ssl);  // Without the leaf on a server.
  X509_NAME* subject = X509_get_subject_name(cert.get());
  std::vector<std::string> cn = Values(subject, NID_commonName);
  // Go's pkix.Name keeps the last CommonName of the subject.
  const std::string common_name = cn.empty() ? std::string() : cn.back();
  if (VerifiesAgainst(roles->front_proxies, cert.get(), untrusted)) {
    const auto& allowed = roles->allowed_names;
    out.front_proxy =
        allowed.empty() || std::find(allowed.begin(), allowed.end(), common_name) != allowed.end();
  }
  if (roles->users == nullptr) {
    out.error = "not signed by --client-ca-file";
    return out;
  }
  if (!VerifiesAgainst(roles->users, cert.get(), untrusted, &out.error)) return out;
  out.verified = true;
  ReadSubjectUser(subject, out);
  return out;
}

}  // namespace kf
