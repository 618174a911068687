#include "proxy/upstream/identity.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "common/api/json.h"
#include "proxy/edge/field_syntax.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace kf {
namespace {

constexpr std::string_view kAuthenticated = "system:authenticated";

std::string StringOf(const rapidjson::Value& v) {
  return std::string(v.GetString(), v.GetStringLength());
}

std::vector<std::string> Strings(const rapidjson::Value& v) {
  std::vector<std::string> out;
  if (!v.IsArray()) return out;
  for (const auto& s : v.GetArray()) {
    if (s.IsString()) out.push_back(StringOf(s));
  }
  return out;
}

}  // namespace

UserInfo AuthenticatedUser(UserInfo u) {
  if (std::find(u.groups.begin(), u.groups.end(), kAuthenticated) == u.groups.end()) {
    u.groups.emplace_back(kAuthenticated);
  }
  return u;
}

std::string Authenticator::ReviewBody(std::string_view token) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("apiVersion");
  w.String("authentication.k8s.io/v1");
  w.Key("kind");
  w.String("TokenReview");
  w.Key("spec");
  w.StartObject();
  w.Key("token");
  w.String(token.data(), static_cast<rapidjson::SizeType>(token.size()));
  w.EndObject();
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

std::optional<UserInfo> Authenticator::ParseReview(std::string_view body) {
  rapidjson::Document doc;
  if (!ParseJson(body, doc).ok() || !doc.IsObject()) return std::nullopt;
  auto status = doc.FindMember("status");
  if (status == doc.MemberEnd() || !status->value.IsObject()) return std::nullopt;
  const auto& st = status->value;
  auto ok = st.FindMember("authenticated");
  if (ok == st.MemberEnd() || !ok->value.IsBool() || !ok->value.GetBool()) return std::nullopt;
  auto info = st.FindMember("user");
  if (info == st.MemberEnd() || !info->value.IsObject()) return std::nullopt;
  const auto& user = info->value;
  auto name = user.FindMember("username");
  if (name == user.MemberEnd() || !name->value.IsString()) return std::nullopt;
  UserInfo u;
  u.username = StringOf(name->value);
  if (auto uid = user.FindMember("uid"); uid != user.MemberEnd() && uid->value.IsString()) {
    u.uid = StringOf(uid->value);
  }
  if (auto groups = user.FindMember("groups"); groups != user.MemberEnd()) {
    u.groups = Strings(groups->value);
  }
  if (auto extra = user.FindMember("extra"); extra != user.MemberEnd() && extra->value.IsObject()) {
    for (const auto& m : extra->value.GetObject()) {
      u.extra.emplace_back(StringOf(m.name), Strings(m.value));
    }
    std::sort(u.extra.begin(), u.extra.end());
  }
  // A user no header field could carry as it is never becomes anyone's identity here: the
  // request goes on as unauthenticated (passed through with its token, for the apiserver's own
  // answer), never asserted or keyed under a name that is not the apiserver's.
  if (!CheckIdentity(u).ok()) return std::nullopt;
  return u;
}

asio::awaitable<Authentication> Authenticator::Authenticate(UpstreamPool& own_pool,
                                                            const Request& request,
                                                            bool allow_stale) {
  Authentication out;
  Vouched vouched = Vouch(request, names_);
  out.by = vouched.by;
  if (vouched.asserted()) {
    out.user = AuthenticatedUser(std::move(vouched.user));
    co_return out;
  }
  if (vouched.by != Vouched::By::kToken) {
    out.unauthenticated = true;  // Anonymous, or a refused certificate.
    co_return out;
  }
  const std::string_view token = BearerToken(request.headers);
  const std::string& key = vouched.credential;
  const auto now = std::chrono::steady_clock::now();
  if (const auto* e = entries_.Find(key); e != nullptr && e->fresh(now)) {
    stats_.Count(stats_.cache_hits);
    out.user = e->value;
    out.unauthenticated = !e->value.has_value();
    co_return out;
  }
  const std::string tok(token);
  const Reviewed answer = co_await flights_.Do(
      key, [this, &own_pool, &tok, &key] { return Review(own_pool, tok, key); });
  if (answer.failure == ReviewFailure::kNone) {
    out.user = answer.user;
    out.unauthenticated = !answer.user.has_value();
    co_return out;
  }
  out.unavailable = answer.failure == ReviewFailure::kUnavailable;
  out.throttled = answer.throttled;
  // No answer (the apiserver overloaded, unreachable): an expired entry stays until replaced,
  // so the last answer can still classify the request for admission rather than "unknown"
  // (its user agent and address). Never for cached reads (allow_stale false).
  if (const auto* e = entries_.Find(key); allow_stale && e != nullptr) {
    out.user = e->value;
    out.unauthenticated = !e->value.has_value();
  }
  co_return out;
}

bool Authenticator::TakeReviewToken() {
  if (settings_.reviews_per_second <= 0) return true;
  const auto now = std::chrono::steady_clock::now();
  review_tokens_ =
      std::min(settings_.review_burst,
               review_tokens_ + std::chrono::duration<double>(now - review_tokens_at_).count() *
                                    settings_.reviews_per_second);
  review_tokens_at_ = now;
  if (review_tokens_ < 1) return false;
  review_tokens_ -= 1;
  return true;
}

asio::awaitable<Authenticator::Reviewed> Authenticator::Review(UpstreamPool& pool,
                                                               const std::string& token,
                                                               const std::string& key) {
  if (!TakeReviewToken()) {
    stats_.Count(stats_.throttled);
    co_return Reviewed{ReviewFailure::kRefused, std::nullopt, /*throttled=*/true};
  }
  const ReviewReply reply =
      co_await PostReview(pool, slots_, "/apis/authentication.k8s.io/v1/tokenreviews",
                          own_authorization_(), ReviewBody(token));
  if (reply.failure != ReviewFailure::kNone) {
    // Not cached: the upstream was unreachable, overloaded, or refused kube-fanout the review
    // (no system:auth-delegator).
    stats_.Count(stats_.errors);
    co_return Reviewed{reply.failure, std::nullopt};
  }
  std::optional<UserInfo> user = ParseReview(reply.body);
  stats_.Count(user ? stats_.allowed : stats_.denied);
  entries_.Put(key, user,
               std::chrono::steady_clock::now() + (user ? settings_.ttl : settings_.negative_ttl));
  co_return Reviewed{ReviewFailure::kNone, std::move(user)};
}

}  // namespace kf
