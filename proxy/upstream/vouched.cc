#include "proxy/upstream/vouched.h"

#include <openssl/sha.h>

#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "proxy/edge/field_syntax.h"

namespace kf {
namespace {

void AppendPart(std::string& key, std::string_view part) {
  absl::StrAppend(&key, part.size(), ":", ToAbsl(part));
}

Vouched Refused(std::string why) {
  Vouched v;
  v.by = Vouched::By::kRejectedCertificate;
  v.why = std::move(why);
  return v;
}

}  // namespace

std::string IdentityKey(Vouched::By by, const Identity& user) {
  std::string key = absl::StrCat("by", static_cast<int>(by), ";");
  AppendPart(key, user.username);
  AppendPart(key, user.uid);
  absl::StrAppend(&key, "g", user.groups.size(), ";");
  for (const auto& g : user.groups) AppendPart(key, g);
  absl::StrAppend(&key, "x", user.extra.size(), ";");
  for (const auto& [k, values] : user.extra) {
    AppendPart(key, k);
    absl::StrAppend(&key, "v", values.size(), ";");
    for (const auto& v : values) AppendPart(key, v);
  }
  return key;
}

std::string Vouched::Key() const {
  std::string key = IdentityKey(by, user);
  AppendPart(key, credential);
  return key;
}

std::string TokenDigest(std::string_view token) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

Vouched Vouch(const Request& r, const RequestHeaderNames& names) {
  const ClientCertificate* cert = r.client_cert;
  // Request-header first: a trusted front proxy's fields name the user.
  if (cert != nullptr && cert->front_proxy) {
    if (auto user = names.Read(r.headers)) {
      if (absl::Status s = CheckIdentity(*user); !s.ok()) {
        return Refused(absl::StrCat("front proxy's fields refused: ", s.message()));
      }
      return Vouched{Vouched::By::kFrontProxy, *std::move(user), {}, {}};
    }
  }
  // Then x509. A verified certificate whose subject cannot be carried is refused outright: the
  // apiserver would have taken its user over any token, and that user cannot be named upstream.
  if (cert != nullptr && cert->verified) {
    if (cert->subject_refused) return Refused(absl::StrCat("client certificate: ", cert->error));
    if (cert->authenticates()) {
      if (absl::Status s = CheckIdentity(cert->user); !s.ok()) {
        return Refused(absl::StrCat("client certificate: subject refused: ", s.message()));
      }
      return Vouched{Vouched::By::kCertificate, cert->user, {}, {}};
    }
  }
  // Then tokens: a certificate that does not verify is an error the apiserver's chain passes
  // over when a token authenticates.
  if (const std::string_view token = BearerToken(r.headers); !token.empty()) {
    return Vouched{Vouched::By::kToken, {}, TokenDigest(token), {}};
  }
  if (cert != nullptr && cert->rejected()) {
    // Not verifiable as a user's, no front proxy's user, no token: the apiserver's 401. (A
    // verified certificate without a CommonName is no error there: anonymous.)
    return Refused(absl::StrCat("client certificate: ", cert->error));
  }
  return Vouched{Vouched::By::kAnonymous, {}, {}, {}};
}

std::string_view ByName(Vouched::By by) {
  switch (by) {
    case Vouched::By::kNone:
      return "none";
    case Vouched::By::kAnonymous:
      return "anonymous";
    case Vouched::By::kToken:
      return "token";
    case Vouched::By::kCertificate:
      return "certificate";
    case Vouched::By::kFrontProxy:
      return "front proxy";
    case Vouched::By::kRejectedCertificate:
      return "rejected certificate";
  }
  return "none";
}

}  // namespace kf
