#include "ratelimit/event_filter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/api/json.h"
#include "common/api/kube_proto.h"
#include "common/api/protowire.h"
#include "common/evict.h"
#include "common/strings.h"

namespace kf::ratelimit {
namespace {

// The apiserver's MaxRequestBodyBytes; the proxy reads no more of an Event body than this.
constexpr size_t kMaxBody = 3u << 20;

const rapidjson::Value& Member(const rapidjson::Value& obj, const char* name) {
  static const rapidjson::Value kNull;
  if (!obj.IsObject()) return kNull;
  auto it = obj.FindMember(name);
  return it == obj.MemberEnd() ? kNull : it->value;
}

// What the key is made of, from either encoding.
struct ObjectRef {
  std::string_view kind, namespace_, name, uid, api_version;
};
struct SpamFields {
  bool events_v1 = false;             // events.k8s.io/v1; else core/v1.
  std::string_view source, instance;  // component + host, or controller + instance.
  ObjectRef object;                   // involvedObject, or regarding.
};

std::string KeyOf(const SpamFields& f) {
  const ObjectRef& o = f.object;
  // Separated (client-go joins without a separator; a separator cannot merge two keys).
  return absl::StrCat(ToAbsl(f.source), "\x1f", ToAbsl(f.instance), "\x1f", ToAbsl(o.kind), "\x1f",
                      ToAbsl(o.namespace_), "\x1f", ToAbsl(o.name), "\x1f", ToAbsl(o.uid), "\x1f",
                      ToAbsl(o.api_version));
}

std::string_view FieldView(const rapidjson::Value& obj, const char* name) {
  if (!obj.IsObject()) return {};
  auto it = obj.FindMember(name);
  if (it == obj.MemberEnd() || !it->value.IsString()) return {};
  return std::string_view(it->value.GetString(), it->value.GetStringLength());
}

ObjectRef JsonRef(const rapidjson::Value& ref) {
  return ObjectRef{FieldView(ref, "kind"), FieldView(ref, "namespace"), FieldView(ref, "name"),
                   FieldView(ref, "uid"), FieldView(ref, "apiVersion")};
}

std::optional<std::string> JsonSpamKey(std::string_view json) {
  rapidjson::Document doc;
  if (!ParseJson(json, doc, JsonLimits{kMaxBody}).ok() || !doc.IsObject()) return std::nullopt;
  if (FieldView(doc, "kind") != "Event") return std::nullopt;
  SpamFields f;
  f.events_v1 = FieldView(doc, "apiVersion") == "events.k8s.io/v1";
  if (f.events_v1) {
    f.source = FieldView(doc, "reportingController");
    f.instance = FieldView(doc, "reportingInstance");
    f.object = JsonRef(Member(doc, "regarding"));
  } else {
    const rapidjson::Value& source = Member(doc, "source");
    f.source = FieldView(source, "component");
    f.instance = FieldView(source, "host");
    f.object = JsonRef(Member(doc, "involvedObject"));
  }
  return KeyOf(f);
}

// Field numbers of k8s.io/api's generated.proto.
constexpr int kRefKind = 1, kRefNamespace = 2, kRefName = 3, kRefUid = 4, kRefApiVersion = 5;
constexpr int kSourceComponent = 1, kSourceHost = 2;
constexpr int kCoreInvolvedObject = 2, kCoreSource = 5;
constexpr int kEventsReportingController = 4, kEventsReportingInstance = 5, kEventsRegarding = 8;

// Calls `on(number, payload)` for each field of `message` of wire type bytes, in wire order:
// the fields read here are all strings or messages, and one of another wire type is skipped
// (Go's decoder refuses it, and the apiserver with it). False when malformed or `on` is.
template <class On>
bool ForEachBytesField(std::string_view message, On on) {
  ProtoReader r(message);
  ProtoField field;
  while (r.Next(&field)) {
    if (field.type == WireType::kBytes && !on(field.number, field.bytes)) return false;
  }
  return r.ok();
}

// Merges one occurrence of an ObjectReference message into `ref`: later values win, as in Go's
// decoder, which merges a message field that comes more than once.
bool MergeRef(std::string_view message, ObjectRef* ref) {
  return ForEachBytesField(message, [ref](int number, std::string_view value) {
    std::string_view* const fields[] = {nullptr,    &ref->kind, &ref->namespace_,
                                        &ref->name, &ref->uid,  &ref->api_version};
    static_assert(
        kRefKind == 1 && kRefNamespace == 2 && kRefName == 3 && kRefUid == 4 && kRefApiVersion == 5,
        "fields[] is indexed by number");
    if (number >= kRefKind && number <= kRefApiVersion) *fields[number] = value;
    return true;
  });
}

// Reads the Event's own message (and its EventSource) into `f`; false when malformed.
bool ReadProtoEvent(std::string_view message, SpamFields* f) {
  return ForEachBytesField(message, [f](int number, std::string_view value) {
    if (f->events_v1) {
      if (number == kEventsReportingController) f->source = value;
      if (number == kEventsReportingInstance) f->instance = value;
      return number != kEventsRegarding || MergeRef(value, &f->object);
    }
    if (number == kCoreInvolvedObject) return MergeRef(value, &f->object);
    if (number != kCoreSource) return true;
    return ForEachBytesField(value, [f](int source_number, std::string_view source_value) {
      if (source_number == kSourceComponent) f->source = source_value;
      if (source_number == kSourceHost) f->instance = source_value;
      return true;
    });
  });
}

std::optional<std::string> ProtoSpamKey(std::string_view body) {
  UnknownView envelope;
  if (body.size() > kMaxBody || !ParseUnknown(body, &envelope) || envelope.kind != "Event") {
    return std::nullopt;
  }
  SpamFields f;
  f.events_v1 = envelope.api_version == "events.k8s.io/v1";
  if (!ReadProtoEvent(envelope.raw, &f)) return std::nullopt;
  return KeyOf(f);
}

}  // namespace

std::optional<std::string> EventSpamFilter::SpamKey(std::string_view body, Encoding encoding) {
  return encoding == Encoding::kProtobuf ? ProtoSpamKey(body) : JsonSpamKey(body);
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

bool EventSpamFilter::Allow(std::string_view user, std::string_view body, Clock::time_point now,
                            Encoding encoding) {
  const auto spam_key = SpamKey(body, encoding);
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
