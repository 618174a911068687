// NodeCertificates: client certificates for simulated kubelets, issued in-process the way a
// cluster's CA issues kubelets theirs: CN=system:node:<node>, O=system:nodes, extended key usage
// clientAuth, a fresh P-256 key each. So a load run can carry thousands of distinct node
// identities (the Node authorizer then decides per node) without thousands of openssl runs.
// Thread-safe.
#ifndef KUBE_FANOUT_TESTS_LOAD_NODE_CERTS_H_
#define KUBE_FANOUT_TESTS_LOAD_NODE_CERTS_H_

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"

namespace kf::load {

struct NodeCredential {
  NodeCredential() = default;
  ~NodeCredential();
  NodeCredential(const NodeCredential&) = delete;
  NodeCredential& operator=(const NodeCredential&) = delete;
  X509* cert = nullptr;
  EVP_PKEY* key = nullptr;
};

class NodeCertificates {
 public:
  // The CA's PEM certificate and private key.
  static absl::StatusOr<std::unique_ptr<NodeCertificates>> Load(const std::string& cert_file,
                                                                const std::string& key_file);
  ~NodeCertificates();

  absl::StatusOr<std::shared_ptr<const NodeCredential>> Issue(const std::string& node) const;

 private:
  NodeCertificates(X509* ca, EVP_PKEY* key) : ca_(ca), ca_key_(key) {}
  X509* ca_;
  EVP_PKEY* ca_key_;
  mutable std::mutex mu_;  // Signing with the CA key, one at a time.
};

}  // namespace kf::load

#endif  // KUBE_FANOUT_TESTS_LOAD_NODE_CERTS_H_
