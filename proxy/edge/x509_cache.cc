#include "proxy/edge/x509_cache.h"

#include <openssl/x509v3.h>

namespace kf {

void CacheCertificateExtensions(X509_STORE* store) {
  if (store == nullptr) return;
  STACK_OF(X509)* certs = X509_STORE_get1_all_certs(store);
  // X509_check_purpose with purpose -1 only caches the extensions (and says whether they parse;
  // an invalid one is still the verification's to refuse).
  for (int i = 0; i < sk_X509_num(certs); ++i) X509_check_purpose(sk_X509_value(certs, i), -1, 0);
  sk_X509_pop_free(certs, X509_free);
}

}  // namespace kf
