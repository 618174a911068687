#include "ratelimit/event_filter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/evict.h"
#include "common/json.h"
#include "common/strings.h"

namespace kf::ratelimit {
namespace {

// The apiserver's MaxRequestBodyBytes; the proxy reads no more of an Event body than this.
constexpr size_t kMaxBody = 3u << 20;

std::string Field(const rapidjson::Value& obj, const char* name) {
  if (!obj.IsObject()) return "";
  auto it = obj.FindMember(name);
  if (it == obj.MemberEnd() || !it->value.IsString()) return "";
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

const rapidjson::Value& Member(const rapidjson::Value& obj, const char* name) {
  static const rapidjson::Value kNull;
  if (!obj.IsObject()) return kNull;
  auto it = obj.FindMember(name);
  return it == obj.MemberEnd() ? kNull : it->value;
}

std::string ObjectKey(const rapidjson::Value& ref) {
  // Separated (client-go joins without a separator; a separator cannot merge two keys).
  return absl::StrCat(Field(ref, "kind"), "\x1f", Field(ref, "namespace"), "\x1f",
                      Field(ref, "name"), "\x1f", Field(ref, "uid"), "\x1f",
                      Field(ref, "apiVersion"));
}

}  // namespace

std::optional<std::string> EventSpamFilter::SpamKey(std::string_view json) {
  rapidjson::Document doc;
  if (!ParseJson(json, doc, JsonLimits{kMaxBody}).ok() || !doc.IsObject()) return std::nullopt;
  const std::string api_version = Field(doc, "apiVersion");
  if (Field(doc, "kind") != "Event") return std::nullopt;
  if (api_version == "events.k8s.io/v1") {
    return absl::StrCat(Field(doc, "reportingController"), "\x1f", Field(doc, "reportingInstance"),
                        "\x1f", ObjectKey(Member(doc, "regarding")));
  }
  const rapidjson::Value& source = Member(doc, "source");
  return absl::StrCat(Field(source, "component"), "\x1f", Field(source, "host"), "\x1f",
                      ObjectKey(Member(doc, "involvedObject")));
}

double EventSpamFilter::TokensAt(const Bucket& b, Clock::time_point now) const {
  return std::min(options_.burst,
                  b.tokens + std::chrono::duration<double>(now - b.last).count() * options_.qps);
}

void EventSpamFilter::MakeRoomLocked(Clock::time_point now) {
  absl::erase_if(buckets_,
                 [&](const auto& kv) { return TokensAt(kv.second, now) >= options_.burst; });
  if (buckets_.size() < options_.max_keys) return;
  // Still full: forget the fullest eighth. Buckets holding a source back (few tokens) stay.
  EvictLowest(buckets_, std::max<size_t>(1, buckets_.size() / 8),
              [&](const Bucket& b) { return -TokensAt(b, now); });
}

bool EventSpamFilter::Allow(std::string_view user, std::string_view json, Clock::time_point now) {
  const auto spam_key = SpamKey(json);
  absl::MutexLock lock(&mu_);
  if (!spam_key) {
    ++allowed_;
    return true;
  }
  if (buckets_.size() >= options_.max_keys) MakeRoomLocked(now);
  auto [it, fresh] = buckets_.try_emplace(absl::StrCat(ToAbsl(user), "\x1e", *spam_key),
                                          Bucket{options_.burst, now});
  Bucket& b = it->second;
  b.tokens = TokensAt(b, now);
  b.last = now;
  if (b.tokens < 1) {
    ++rejected_;
    return false;
  }
  b.tokens -= 1;
  ++allowed_;
  return true;
}

uint64_t EventSpamFilter::allowed() const {
  absl::MutexLock lock(&mu_);
  return allowed_;
}

uint64_t EventSpamFilter::rejected() const {
  absl::MutexLock lock(&mu_);
  return rejected_;
}

}  // namespace kf::ratelimit
