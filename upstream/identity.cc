#include "upstream/identity.h"

#include "common/evict.h"
#include "common/json.h"
#include "rapidjson/document.h"
#include "upstream/upstream_client.h"

namespace kf {

std::optional<UserInfo> WhoAmI::ParseReview(std::string_view body) {
  rapidjson::Document doc;
  if (!ParseJson(body, doc).ok() || !doc.IsObject()) return std::nullopt;
  auto status = doc.FindMember("status");
  if (status == doc.MemberEnd() || !status->value.IsObject()) return std::nullopt;
  auto info = status->value.FindMember("userInfo");
  if (info == status->value.MemberEnd() || !info->value.IsObject()) return std::nullopt;
  auto name = info->value.FindMember("username");
  if (name == info->value.MemberEnd() || !name->value.IsString()) return std::nullopt;
  UserInfo u;
  u.username.assign(name->value.GetString(), name->value.GetStringLength());
  if (auto groups = info->value.FindMember("groups");
      groups != info->value.MemberEnd() && groups->value.IsArray()) {
    for (const auto& g : groups->value.GetArray()) {
      if (g.IsString()) u.groups.emplace_back(g.GetString(), g.GetStringLength());
    }
  }
  return u;
}

asio::awaitable<std::optional<UserInfo>> WhoAmI::Lookup(UpstreamPool& pool,
                                                        const std::string& authorization) {
  if (authorization.empty()) co_return std::nullopt;
  const auto now = std::chrono::steady_clock::now();
  // An expired entry stays until replaced: if the apiserver cannot be asked again (overloaded,
  // unreachable), the last answer classifies the request rather than "unknown", which would
  // put every such client into one shared, rate-limited flow.
  if (const auto* e = entries_.Find(authorization); e != nullptr && e->fresh(now)) {
    co_return e->value;
  }
  auto user = co_await flights_.Do(
      authorization, [this, &pool, &authorization] { return Review(pool, authorization); });
  co_return user;
}

asio::awaitable<std::optional<UserInfo>> WhoAmI::Review(UpstreamPool& pool,
                                                        const std::string& authorization) {
  ++reviews_;
  auto res = co_await UpstreamCall(
      pool, http::verb::post, "/apis/authentication.k8s.io/v1/selfsubjectreviews", authorization,
      R"({"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"})",
      std::chrono::seconds(10));
  if (!res.ok() || res->status == 429 || res->status >= 500) {
    // Not cached: the upstream was unreachable or overloaded. The last answer, if any, stands.
    if (const auto* e = entries_.Find(authorization)) co_return e->value;
    co_return std::nullopt;
  }
  std::optional<UserInfo> user;
  if (res->status == 201 || res->status == 200) user = ParseReview(res->body);
  entries_.Put(authorization, user,
               std::chrono::steady_clock::now() + (user ? ttl_ : negative_ttl_));
  co_return user;
}

}  // namespace kf
