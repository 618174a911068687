#include "proxy/upstream/access_review.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/api/json.h"
#include "common/strings.h"
#include "proxy/upstream/node_shape.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace kf {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void Str(JsonWriter& w, std::string_view v) {
  w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
}

void Field(JsonWriter& w, const char* key, std::string_view v) {
  w.Key(key);
  Str(w, v);
}

void StrList(JsonWriter& w, const std::vector<std::string>& v) {
  w.StartArray();
  for (const auto& s : v) Str(w, s);
  w.EndArray();
}

// Everything a review depends on, unambiguously (lengths before values).
void AppendKeyPart(std::string& key, std::string_view part) {
  absl::StrAppend(&key, part.size(), ":", ToAbsl(part));
}

void ResourceAttributes(JsonWriter& w, const AccessAttributes& a) {
  w.Key("resourceAttributes");
  w.StartObject();
  Field(w, "namespace", a.namespace_);
  Field(w, "verb", a.verb);
  Field(w, "group", a.group);
  Field(w, "version", a.version);
  Field(w, "resource", a.resource);
  Field(w, "name", a.name);
  if (!a.field_selector.empty()) {
    w.Key("fieldSelector");
    w.StartObject();
    Field(w, "rawSelector", a.field_selector);
    w.EndObject();
  }
  if (!a.label_selector.empty()) {
    w.Key("labelSelector");
    w.StartObject();
    Field(w, "rawSelector", a.label_selector);
    w.EndObject();
  }
  w.EndObject();
}

}  // namespace

std::string AccessReview::CacheKey(Vouched::By by, const UserInfo& user,
                                   const AccessAttributes& a) {
  std::string key = IdentityKey(by, user);
  key += "a";
  for (const std::string* part : {&a.verb, &a.group, &a.version, &a.resource, &a.namespace_,
                                  &a.name, &a.field_selector, &a.label_selector, &a.path}) {
    AppendKeyPart(key, *part);
  }
  return key;
}

std::string AccessReview::ReviewBody(const UserInfo& user, const AccessAttributes& a) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  Field(w, "apiVersion", "authorization.k8s.io/v1");
  Field(w, "kind", "SubjectAccessReview");
  w.Key("spec");
  w.StartObject();
  if (!a.path.empty()) {
    w.Key("nonResourceAttributes");
    w.StartObject();
    Field(w, "path", a.path);
    Field(w, "verb", a.verb);
    w.EndObject();
  } else {
    ResourceAttributes(w, a);
  }
  Field(w, "user", user.username);
  w.Key("groups");
  StrList(w, user.groups);
  if (!user.extra.empty()) {
    w.Key("extra");
    w.StartObject();
    for (const auto& [k, values] : user.extra) {
      Str(w, k);
      StrList(w, values);
    }
    w.EndObject();
  }
  if (!user.uid.empty()) Field(w, "uid", user.uid);
  w.EndObject();
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

asio::awaitable<Access> AccessReview::Allowed(UpstreamPool& own_pool, Vouched::By by,
                                              const UserInfo& user, const RequestInfo& info) {
  const AccessAttributes attrs = AccessAttributes::Of(info);
  // Who may do this across the whole resource may do it to any object of it, with any
  // selector (a selector only narrows): one review then covers every namespace, name and
  // selector of this user (kubelets each watch their own Node by name).
  // (Plain statements around co_await: GCC 12 miscompiles some awaits inside conditions.)
  // A node's identity is never granted a whole resource it reads narrowly (the Node
  // authorizer allows its own pods, its pods' ConfigMaps): asking would only double its
  // reviews. Skipping the question never changes an answer, only how many are asked.
  const bool node =
      std::find(user.groups.begin(), user.groups.end(), "system:nodes") != user.groups.end();
  if (node) {
    const std::optional<Access> shared = co_await SharedByNodes(own_pool, by, user, attrs);
    if (shared) co_return *shared;
  }
  if (!attrs.IsWholeResource() && !node) {
    const Access whole = co_await Check(own_pool, by, user, attrs.WholeResource());
    // Unavailable: the narrower question would wait as long for no answer.
    if (whole != Access::kDenied) co_return whole;
  }
  const Access access = co_await Check(own_pool, by, user, attrs);
  co_return access;
}

asio::awaitable<std::optional<Access>> AccessReview::SharedByNodes(UpstreamPool& pool,
                                                                   Vouched::By by,
                                                                   const UserInfo& user,
                                                                   const AccessAttributes& attrs) {
  const std::string& probe = answers_.probe_node();
  const std::optional<std::string_view> node = SharableNodeName(user);
  if (probe.empty() || !node) co_return std::nullopt;
  const std::optional<AccessAttributes> shape = NodeShape(attrs, *node, probe);
  if (!shape) co_return std::nullopt;
  const UserInfo probe_user = ProbeNodeUser(probe, user.groups);
  const Access access = co_await Check(pool, by, probe_user, *shape);
  // The probe's no says nothing of this node (the Node authorizer's graph, a grant to its user).
  if (access == Access::kDenied) co_return std::nullopt;
  if (access == Access::kAllowed) stats_.Count(stats_.shared);
  co_return access;
}

asio::awaitable<Access> AccessReview::AllowedPath(UpstreamPool& own_pool, Vouched::By by,
                                                  const UserInfo& user, std::string_view verb,
                                                  std::string_view path) {
  AccessAttributes attrs;
  attrs.verb = std::string(verb);
  attrs.path = std::string(path);
  const Access access = co_await Check(own_pool, by, user, attrs);
  co_return access;
}

asio::awaitable<Access> AccessReview::Check(UpstreamPool& pool, Vouched::By by,
                                            const UserInfo& user, const AccessAttributes& attrs) {
  const std::string key = CacheKey(by, user, attrs);
  if (const std::optional<bool> kept = answers_.Find(key, std::chrono::steady_clock::now())) {
    stats_.Count(stats_.cache_hits);
    co_return *kept ? Access::kAllowed : Access::kDenied;
  }
  const Access access = co_await answers_.Share(
      key, [this, &pool, &user, &attrs, &key] { return Review(pool, user, attrs, key); });
  co_return access;
}

asio::awaitable<Access> AccessReview::Review(UpstreamPool& pool, const UserInfo& user,
                                             const AccessAttributes& attrs,
                                             const std::string& key) {
  const ReviewReply reply =
      co_await PostReview(pool, slots_, "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                          own_authorization_(), ReviewBody(user, attrs));
  std::optional<bool> allowed;
  if (reply.failure == ReviewFailure::kNone) {
    rapidjson::Document doc;
    if (ParseJson(reply.body, doc).ok() && doc.IsObject() && doc.HasMember("status") &&
        doc["status"].IsObject() && doc["status"].HasMember("allowed") &&
        doc["status"]["allowed"].IsBool()) {
      allowed = doc["status"]["allowed"].GetBool();
    }
  }
  if (!allowed) {  // Not cached: unreachable, refused (no system:auth-delegator), unreadable.
    stats_.Count(stats_.errors);
    co_return reply.failure == ReviewFailure::kUnavailable ? Access::kUnavailable : Access::kDenied;
  }
  stats_.Count(*allowed ? stats_.allowed : stats_.denied);
  answers_.Put(
      key, *allowed,
      std::chrono::steady_clock::now() + (*allowed ? settings_.ttl : settings_.negative_ttl));
  co_return *allowed ? Access::kAllowed : Access::kDenied;
}

}  // namespace kf
