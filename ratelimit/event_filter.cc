#include "ratelimit/event_filter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "rapidjson/document.h"

namespace kf::ratelimit {
namespace {

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
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) return std::nullopt;
  const std::string api_version = Field(doc, "apiVersion");
  if (Field(doc, "kind") != "Event") return std::nullopt;
  if (api_version == "events.k8s.io/v1") {
    return absl::StrCat(Field(doc, "reportingController"), "\x1f",
                        Field(doc, "reportingInstance"), "\x1f",
                        ObjectKey(Member(doc, "regarding")));
  }
  const rapidjson::Value& source = Member(doc, "source");
  return absl::StrCat(Field(source, "component"), "\x1f", Field(source, "host"), "\x1f",
                      ObjectKey(Member(doc, "involvedObject")));
}

bool EventSpamFilter::Allow(std::string_view json, Clock::time_point now) {
  const auto key = SpamKey(json);
  absl::MutexLock lock(&mu_);
  if (!key) {
    ++allowed_;
    return true;
  }
  if (buckets_.size() >= options_.max_keys) {
    absl::erase_if(buckets_, [&](const auto& kv) {
      return kv.second.tokens + std::chrono::duration<double>(now - kv.second.last).count() *
                                    options_.qps >=
             options_.burst;
    });
    if (buckets_.size() >= options_.max_keys) buckets_.clear();  // Still full: start over.
  }
  auto [it, fresh] = buckets_.try_emplace(*key, Bucket{options_.burst, now});
  Bucket& b = it->second;
  b.tokens = std::min(options_.burst,
                      b.tokens + std::chrono::duration<double>(now - b.last).count() * options_.qps);
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
