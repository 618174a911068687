#include "upstream/access_review.h"

#include "absl/strings/str_cat.h"
#include "common/evict.h"
#include "common/json.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "upstream/upstream_client.h"

namespace kf {

std::string AccessReview::ReviewBody(const RequestInfo& info, const std::string& ns,
                                     const std::string& name) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  auto str = [&w](const char* k, const std::string& v) {
    w.Key(k);
    w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
  };
  w.StartObject();
  str("apiVersion", "authorization.k8s.io/v1");
  str("kind", "SelfSubjectAccessReview");
  w.Key("spec");
  w.StartObject();
  w.Key("resourceAttributes");
  w.StartObject();
  str("namespace", ns);
  str("verb", info.verb);
  str("group", info.api_group);
  str("version", info.api_version);
  str("resource", info.resource);
  str("name", name);
  w.EndObject();
  w.EndObject();
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

asio::awaitable<bool> AccessReview::Allowed(UpstreamPool& pool, const std::string& authorization,
                                            const RequestInfo& info) {
  if (authorization.empty()) co_return false;
  // Who may do this across the whole resource may do it to any object of it: one review then
  // covers every namespace and name (kubelets each watch their own Node by name, and each
  // would otherwise cost a review of its own).
  // (Plain statements around co_await: GCC 12 miscompiles some awaits inside conditions.)
  if (!info.namespace_.empty() || !info.name.empty()) {
    const bool whole = co_await Check(pool, authorization, info, true);
    if (whole) co_return true;
  }
  const bool allowed = co_await Check(pool, authorization, info, false);
  co_return allowed;
}

asio::awaitable<bool> AccessReview::Check(UpstreamPool& pool, const std::string& authorization,
                                          const RequestInfo& info, bool whole_resource) {
  std::string ns, name;
  if (!whole_resource) {
    ns = info.namespace_;
    name = info.name;
  }
  // Everything the review body asks about (ReviewBody), and the credentials it is asked with.
  const std::string key = absl::StrCat(authorization, "\n", info.verb, "\n", info.api_group, "\n",
                                       info.api_version, "\n", info.resource, "\n", ns, "\n", name);
  if (const auto* e = entries_.Find(key)) {
    if (e->fresh(std::chrono::steady_clock::now())) co_return e->value;
    entries_.Erase(key);
  }
  const bool allowed =
      co_await flights_.Do(key, [this, &pool, &authorization, &info, &ns, &name, &key] {
        return Review(pool, authorization, info, ns, name, key);
      });
  co_return allowed;
}

asio::awaitable<bool> AccessReview::Review(UpstreamPool& pool, const std::string& authorization,
                                           const RequestInfo& info, const std::string& ns,
                                           const std::string& name, const std::string& key) {
  ++reviews_;
  auto res = co_await UpstreamCall(
      pool, http::verb::post, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
      authorization, ReviewBody(info, ns, name), std::chrono::seconds(10));
  bool allowed = false;
  if (res.ok() && res->status == 201) {
    rapidjson::Document doc;
    if (ParseJson(res->body, doc).ok() && doc.IsObject() && doc.HasMember("status") &&
        doc["status"].IsObject() && doc["status"].HasMember("allowed") &&
        doc["status"]["allowed"].IsBool()) {
      allowed = doc["status"]["allowed"].GetBool();
    }
  }
  if (!res.ok()) co_return false;  // Not cached: the upstream was unreachable.
  entries_.Put(key, allowed,
               std::chrono::steady_clock::now() + (allowed ? allowed_ttl_ : denied_ttl_));
  co_return allowed;
}

}  // namespace kf
