#include "cache/selectable_fields.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <optional>
#include <span>

#include "absl/status/status.h"
#include "common/api/protowire.h"
#include "common/strings.h"

namespace kf {

namespace {

// How the apiserver words an unsupported field label for a kind.
enum class ErrorStyle {
  kNotSupported,   // "field label not supported: x" (core/v1 and most hand-written kinds, CRDs)
  kDefault,        // runtime.DefaultMetaV1FieldSelectorConversion
  kJob,            // batch/v1 Job
  kResourceSlice,  // resource.k8s.io/v1 ResourceSlice
};

// Whether GetAttrs puts metadata.namespace in the field set.
enum class Scope {
  kNamespaced,  // Always, "" if absent.
  kCluster,     // Never.
  kAsObject,    // Default kinds: storage.DefaultNamespaceScopedAttr has it, the cluster-scoped
                // one does not; namespaced objects always carry it and cluster-scoped ones never
                // do, so "when the object has one" is the same thing.
};

enum class Render {
  kString,  // Go string field: "" when absent.
  kBool,    // strconv.FormatBool / fmt.Sprint(bool): "false" when absent.
  kInt,     // strconv.Itoa: "0" when absent.
  kAny,     // fmt.Sprint of an unstructured value (custom resources): "" when absent or null.
};

// A field label a request may use, and the field set name it converts to ("" = unchanged).
struct LabelRule {
  std::string_view label;
  std::string_view field = {};
};

// A field of the set besides metadata.name and metadata.namespace. `path` is dotted JSON in the
// served version (numeric segments index arrays); `fallback` is read when `path` gives "".
struct SourceRule {
  std::string_view field;
  std::string_view path;
  std::string_view fallback = {};
  Render render = Render::kString;
};

}  // namespace

namespace internal {

struct BuiltinFieldRules {
  std::string_view group;
  std::string_view resource;
  ErrorStyle style;
  Scope scope;
  std::span<const LabelRule> labels;
  std::span<const SourceRule> sources;
};

}  // namespace internal

namespace {

using internal::BuiltinFieldRules;

// core/v1 Pod: pkg/apis/core/v1/conversion.go and pkg/registry/core/pod/strategy.go. Quirks:
// "spec.host" is accepted and renamed to spec.nodeName (pre-1.0 clients); "status.podIPs" is
// accepted but not in the field set, so it compares as "" (matches only `status.podIPs=`).
constexpr LabelRule kPodLabels[] = {
    {"metadata.name"},
    {"metadata.namespace"},
    {"spec.nodeName"},
    {"spec.restartPolicy"},
    {"spec.schedulerName"},
    {"spec.serviceAccountName"},
    {"spec.hostNetwork"},
    {"status.phase"},
    {"status.podIP"},
    {"status.podIPs"},
    {"status.nominatedNodeName"},
    {"spec.host", "spec.nodeName"},
};
// serviceAccountName falls back to the deprecated serviceAccount (Convert_v1_PodSpec_To_core);
// status.podIP is internal PodIPs[0], i.e. podIP, else podIPs[0].ip (Convert_v1_PodStatus_To_core).
constexpr SourceRule kPodSources[] = {
    {"spec.nodeName", "spec.nodeName"},
    {"spec.restartPolicy", "spec.restartPolicy"},
    {"spec.schedulerName", "spec.schedulerName"},
    {"spec.serviceAccountName", "spec.serviceAccountName", "spec.serviceAccount"},
    {"spec.hostNetwork", "spec.hostNetwork", {}, Render::kBool},
    {"status.phase", "status.phase"},
    {"status.podIP", "status.podIP", "status.podIPs.0.ip"},
    {"status.nominatedNodeName", "status.nominatedNodeName"},
};

// core/v1 Node (cluster-scoped: metadata.namespace is rejected, unlike on default kinds).
constexpr LabelRule kNodeLabels[] = {{"metadata.name"}, {"spec.unschedulable"}};
constexpr SourceRule kNodeSources[] = {
    {"spec.unschedulable", "spec.unschedulable", {}, Render::kBool}};

// core/v1 Namespace. The strategy also sets a field "name" (a kept bug), but the conversion
// function rejects "name", so no selector can reach it.
constexpr LabelRule kNamespaceLabels[] = {{"status.phase"}, {"metadata.name"}};
constexpr SourceRule kNamespaceSources[] = {{"status.phase", "status.phase"}};

constexpr LabelRule kSecretLabels[] = {{"type"}, {"metadata.namespace"}, {"metadata.name"}};
constexpr SourceRule kSecretSources[] = {{"type", "type"}};

constexpr LabelRule kServiceLabels[] = {
    {"metadata.namespace"}, {"metadata.name"}, {"spec.clusterIP"}, {"spec.type"}};
constexpr SourceRule kServiceSources[] = {{"spec.clusterIP", "spec.clusterIP"},
                                          {"spec.type", "spec.type"}};

constexpr LabelRule kReplicationControllerLabels[] = {
    {"metadata.name"}, {"metadata.namespace"}, {"status.replicas"}};
constexpr SourceRule kReplicationControllerSources[] = {
    {"status.replicas", "status.replicas", {}, Render::kInt}};

// core/v1 Event. "source" is source.component, else reportingComponent (the v1 JSON name of
// the internal ReportingController); pkg/registry/core/event/strategy.go ToSelectableFields.
constexpr LabelRule kCoreEventLabels[] = {
    {"involvedObject.kind"},
    {"involvedObject.namespace"},
    {"involvedObject.name"},
    {"involvedObject.uid"},
    {"involvedObject.apiVersion"},
    {"involvedObject.resourceVersion"},
    {"involvedObject.fieldPath"},
    {"reason"},
    {"reportingComponent"},
    {"source"},
    {"type"},
    {"metadata.namespace"},
    {"metadata.name"},
};
constexpr SourceRule kCoreEventSources[] = {
    {"involvedObject.kind", "involvedObject.kind"},
    {"involvedObject.namespace", "involvedObject.namespace"},
    {"involvedObject.name", "involvedObject.name"},
    {"involvedObject.uid", "involvedObject.uid"},
    {"involvedObject.apiVersion", "involvedObject.apiVersion"},
    {"involvedObject.resourceVersion", "involvedObject.resourceVersion"},
    {"involvedObject.fieldPath", "involvedObject.fieldPath"},
    {"reason", "reason"},
    {"reportingComponent", "reportingComponent"},
    {"source", "source.component", "reportingComponent"},
    {"type", "type"},
};

// events.k8s.io/v1 Event: the same storage and field set as core events, reached through the
// events.k8s.io names (pkg/apis/events/v1/conversion.go); the core names ("source",
// "involvedObject.kind", "reportingComponent") are rejected here.
constexpr LabelRule kEventsEventLabels[] = {
    {"reason"},
    {"regarding.kind", "involvedObject.kind"},
    {"regarding.namespace", "involvedObject.namespace"},
    {"regarding.name", "involvedObject.name"},
    {"regarding.uid", "involvedObject.uid"},
    {"regarding.apiVersion", "involvedObject.apiVersion"},
    {"regarding.resourceVersion", "involvedObject.resourceVersion"},
    {"regarding.fieldPath", "involvedObject.fieldPath"},
    {"reportingController", "reportingComponent"},
    {"type"},
    {"metadata.namespace"},
    {"metadata.name"},
};
constexpr SourceRule kEventsEventSources[] = {
    {"involvedObject.kind", "regarding.kind"},
    {"involvedObject.namespace", "regarding.namespace"},
    {"involvedObject.name", "regarding.name"},
    {"involvedObject.uid", "regarding.uid"},
    {"involvedObject.apiVersion", "regarding.apiVersion"},
    {"involvedObject.resourceVersion", "regarding.resourceVersion"},
    {"involvedObject.fieldPath", "regarding.fieldPath"},
    {"reason", "reason"},
    {"reportingComponent", "reportingController"},
    {"source", "deprecatedSource.component", "reportingController"},
    {"type", "type"},
};

// batch/v1 Job: status.successful is the Job's status.succeeded count.
constexpr LabelRule kJobLabels[] = {
    {"metadata.name"}, {"metadata.namespace"}, {"status.successful"}};
constexpr SourceRule kJobSources[] = {{"status.successful", "status.succeeded", {}, Render::kInt}};

constexpr LabelRule kCsrLabels[] = {{"metadata.name"}, {"spec.signerName"}};
constexpr SourceRule kCsrSources[] = {{"spec.signerName", "spec.signerName"}};

constexpr LabelRule kResourceSliceLabels[] = {
    {"metadata.name"}, {"spec.nodeName"}, {"spec.driver"}};
constexpr SourceRule kResourceSliceSources[] = {{"spec.nodeName", "spec.nodeName"},
                                                {"spec.driver", "spec.driver"}};

// Every other kind, including those whose strategy computes more fields than the default
// conversion lets a request name (ReplicaSet status.replicas, PersistentVolume "name", ...).
constexpr LabelRule kDefaultLabels[] = {{"metadata.name"}, {"metadata.namespace"}};

constexpr BuiltinFieldRules kDefaultRules{
    "", "", ErrorStyle::kDefault, Scope::kAsObject, kDefaultLabels, {}};

constexpr BuiltinFieldRules kBuiltinRules[] = {
    {"", "pods", ErrorStyle::kNotSupported, Scope::kNamespaced, kPodLabels, kPodSources},
    {"", "nodes", ErrorStyle::kNotSupported, Scope::kCluster, kNodeLabels, kNodeSources},
    {"", "namespaces", ErrorStyle::kNotSupported, Scope::kCluster, kNamespaceLabels,
     kNamespaceSources},
    {"", "secrets", ErrorStyle::kNotSupported, Scope::kNamespaced, kSecretLabels, kSecretSources},
    {"", "services", ErrorStyle::kNotSupported, Scope::kNamespaced, kServiceLabels,
     kServiceSources},
    {"", "replicationcontrollers", ErrorStyle::kNotSupported, Scope::kNamespaced,
     kReplicationControllerLabels, kReplicationControllerSources},
    {"", "events", ErrorStyle::kNotSupported, Scope::kNamespaced, kCoreEventLabels,
     kCoreEventSources},
    {"events.k8s.io", "events", ErrorStyle::kNotSupported, Scope::kNamespaced, kEventsEventLabels,
     kEventsEventSources},
    {"batch", "jobs", ErrorStyle::kJob, Scope::kNamespaced, kJobLabels, kJobSources},
    {"certificates.k8s.io", "certificatesigningrequests", ErrorStyle::kNotSupported,
     Scope::kCluster, kCsrLabels, kCsrSources},
    {"resource.k8s.io", "resourceslices", ErrorStyle::kResourceSlice, Scope::kCluster,
     kResourceSliceLabels, kResourceSliceSources},
};

std::string UnsupportedMessage(ErrorStyle style, std::string_view label) {
  const std::string l(label);
  switch (style) {
    case ErrorStyle::kNotSupported:
      return "field label not supported: " + l;
    case ErrorStyle::kDefault:
      return GoQuote(label) +
             " is not a known field selector: only \"metadata.name\", \"metadata.namespace\"";
    case ErrorStyle::kJob:
      return "field label " + GoQuote(label) + " not supported for Job";
    case ErrorStyle::kResourceSlice:
      // The apiserver names the requested version; v1 is the one served by default in v1.36.
      return "field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: " + l;
  }
  return "field label not supported: " + l;
}

// --- Reading the object -----------------------------------------------------------------------

const rapidjson::Value* FindPath(const rapidjson::Value& root, std::string_view path) {
  const rapidjson::Value* v = &root;
  while (v != nullptr && !path.empty()) {
    const size_t dot = path.find('.');
    const std::string_view segment = path.substr(0, dot);
    path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
    if (v->IsObject()) {
      const rapidjson::Value key(
          rapidjson::StringRef(segment.data(), static_cast<rapidjson::SizeType>(segment.size())));
      auto it = v->FindMember(key);
      v = it == v->MemberEnd() ? nullptr : &it->value;
    } else if (v->IsArray()) {
      size_t index = 0;
      auto [end, ec] = std::from_chars(segment.data(), segment.data() + segment.size(), index);
      const bool ok = ec == std::errc() && end == segment.data() + segment.size();
      v = ok && index < v->Size() ? &(*v)[static_cast<rapidjson::SizeType>(index)] : nullptr;
    } else {
      v = nullptr;
    }
  }
  return v;
}

std::string Str(const rapidjson::Value& v) {
  return std::string(v.GetString(), v.GetStringLength());
}

// fmt.Sprint of what the unstructured decoder makes of a JSON value. Not reproduced: floats use
// C++'s shortest form rather than Go's %v (CRD validation only allows string, integer and boolean
// selectable fields), and objects and arrays (not allowed at all) render as "".
std::string RenderAny(const rapidjson::Value& v) {
  if (v.IsString()) return Str(v);
  if (v.IsBool()) return v.GetBool() ? "true" : "false";
  if (v.IsInt64()) return std::to_string(v.GetInt64());
  if (v.IsUint64()) return std::to_string(v.GetUint64());
  if (v.IsDouble()) {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v.GetDouble());
    return ec == std::errc() ? std::string(buf, end) : std::string();
  }
  return std::string();
}

std::string RenderValue(const rapidjson::Value* v, Render render) {
  switch (render) {
    case Render::kString:
      return v != nullptr && v->IsString() ? Str(*v) : std::string();
    case Render::kBool:
      return v != nullptr && v->IsBool() && v->GetBool() ? "true" : "false";
    case Render::kInt:
      return v != nullptr && v->IsInt64() ? std::to_string(v->GetInt64()) : "0";
    case Render::kAny:
      return v != nullptr ? RenderAny(*v) : std::string();
  }
  return std::string();
}

std::string FieldValue(const rapidjson::Value& object, const SourceRule& rule) {
  std::string value = RenderValue(FindPath(object, rule.path), rule.render);
  if (value.empty() && !rule.fallback.empty()) {
    value = RenderValue(FindPath(object, rule.fallback), rule.render);
  }
  return value;
}

void AppendMetadata(const rapidjson::Value& object, Scope scope, std::vector<FieldSet::Pair>* out) {
  out->emplace_back("metadata.name",
                    RenderValue(FindPath(object, "metadata.name"), Render::kString));
  const rapidjson::Value* ns = FindPath(object, "metadata.namespace");
  if (scope == Scope::kNamespaced || (scope == Scope::kAsObject && ns != nullptr)) {
    out->emplace_back("metadata.namespace", RenderValue(ns, Render::kString));
  }
}

// --- Reading the protobuf message --------------------------------------------------------------

// A JSON path of a SourceRule as protobuf field numbers (k8s.io/api v0.36.3 generated.proto; a
// repeated field's first element is its index 0).
struct ProtoPath {
  std::string_view group;
  std::string_view resource;
  std::string_view path;
  std::array<int, 3> numbers;  // 0-terminated.
};

constexpr ProtoPath kProtoPaths[] = {
    {"", "pods", "spec.nodeName", {2, 10}},
    {"", "pods", "spec.restartPolicy", {2, 3}},
    {"", "pods", "spec.schedulerName", {2, 19}},
    {"", "pods", "spec.serviceAccountName", {2, 8}},
    {"", "pods", "spec.serviceAccount", {2, 9}},
    {"", "pods", "spec.hostNetwork", {2, 11}},
    {"", "pods", "status.phase", {3, 1}},
    {"", "pods", "status.podIP", {3, 6}},
    {"", "pods", "status.podIPs.0.ip", {3, 12, 1}},
    {"", "pods", "status.nominatedNodeName", {3, 11}},
    {"", "nodes", "spec.unschedulable", {2, 4}},
    {"", "namespaces", "status.phase", {3, 1}},
    {"", "secrets", "type", {3}},
    {"", "services", "spec.clusterIP", {2, 3}},
    {"", "services", "spec.type", {2, 4}},
    {"", "replicationcontrollers", "status.replicas", {3, 1}},
    {"", "events", "involvedObject.kind", {2, 1}},
    {"", "events", "involvedObject.namespace", {2, 2}},
    {"", "events", "involvedObject.name", {2, 3}},
    {"", "events", "involvedObject.uid", {2, 4}},
    {"", "events", "involvedObject.apiVersion", {2, 5}},
    {"", "events", "involvedObject.resourceVersion", {2, 6}},
    {"", "events", "involvedObject.fieldPath", {2, 7}},
    {"", "events", "reason", {3}},
    {"", "events", "reportingComponent", {14}},
    {"", "events", "source.component", {5, 1}},
    {"", "events", "type", {9}},
    {"events.k8s.io", "events", "regarding.kind", {8, 1}},
    {"events.k8s.io", "events", "regarding.namespace", {8, 2}},
    {"events.k8s.io", "events", "regarding.name", {8, 3}},
    {"events.k8s.io", "events", "regarding.uid", {8, 4}},
    {"events.k8s.io", "events", "regarding.apiVersion", {8, 5}},
    {"events.k8s.io", "events", "regarding.resourceVersion", {8, 6}},
    {"events.k8s.io", "events", "regarding.fieldPath", {8, 7}},
    {"events.k8s.io", "events", "reason", {7}},
    {"events.k8s.io", "events", "reportingController", {4}},
    {"events.k8s.io", "events", "deprecatedSource.component", {12, 1}},
    {"events.k8s.io", "events", "type", {11}},
    {"batch", "jobs", "status.succeeded", {3, 5}},
    {"certificates.k8s.io", "certificatesigningrequests", "spec.signerName", {2, 7}},
    {"resource.k8s.io", "resourceslices", "spec.nodeName", {2, 3}},
    {"resource.k8s.io", "resourceslices", "spec.driver", {2, 1}},
};

const ProtoPath* FindProtoPath(const BuiltinFieldRules& rules, std::string_view path) {
  for (const ProtoPath& p : kProtoPaths) {
    if (p.group == rules.group && p.resource == rules.resource && p.path == path) return &p;
  }
  return nullptr;
}

// The first field with each number in turn; nullopt when a level is absent.
std::optional<ProtoField> FindProtoField(std::string_view message, const std::array<int, 3>& path) {
  std::optional<ProtoField> found;
  for (int number : path) {
    if (number == 0) break;
    ProtoReader r(message);
    ProtoField f;
    found.reset();
    while (r.Next(&f)) {
      if (f.number == number) {
        found = f;
        break;
      }
    }
    if (!found) return std::nullopt;
    message = found->bytes;
  }
  return found;
}

std::string RenderProto(const std::optional<ProtoField>& f, Render render) {
  const bool varint = f && f->type == WireType::kVarint;
  switch (render) {
    case Render::kString:
    case Render::kAny:
      return f && f->type == WireType::kBytes ? std::string(f->bytes) : std::string();
    case Render::kBool:
      return varint && f->varint != 0 ? "true" : "false";
    case Render::kInt:
      // int32 fields: negative values travel as 64-bit two's complement.
      return varint ? std::to_string(static_cast<int32_t>(f->varint)) : "0";
  }
  return std::string();
}

std::string ProtoFieldValue(std::string_view message, const BuiltinFieldRules& rules,
                            const SourceRule& rule) {
  auto read = [&](std::string_view path) {
    const ProtoPath* p = FindProtoPath(rules, path);
    return p ? RenderProto(FindProtoField(message, p->numbers), rule.render) : std::string();
  };
  std::string value = read(rule.path);
  if (value.empty() && !rule.fallback.empty()) value = read(rule.fallback);
  return value;
}

const BuiltinFieldRules& RulesFor(std::string_view group, std::string_view resource) {
  for (const BuiltinFieldRules& rules : kBuiltinRules) {
    if (rules.group == group && rules.resource == resource) return rules;
  }
  return kDefaultRules;
}

}  // namespace

SelectableFields SelectableFields::ForResource(std::string_view group, std::string_view resource) {
  SelectableFields f;
  f.builtin_ = &RulesFor(group, resource);
  return f;
}

SelectableFields SelectableFields::ForCustomResource(
    bool namespaced, const std::vector<std::string>& selectable_json_paths) {
  SelectableFields f;
  f.namespaced_ = namespaced;
  for (const std::string& path : selectable_json_paths) {
    std::string_view p = path;
    if (p.starts_with('.')) p.remove_prefix(1);
    f.custom_fields_.emplace_back(p);
  }
  return f;
}

std::vector<std::string> SelectableFields::FieldLabels() const {
  std::vector<std::string> labels;
  if (builtin_ != nullptr) {
    for (const LabelRule& rule : builtin_->labels) labels.emplace_back(rule.label);
    return labels;
  }
  labels.emplace_back("metadata.name");
  if (namespaced_) labels.emplace_back("metadata.namespace");
  labels.insert(labels.end(), custom_fields_.begin(), custom_fields_.end());
  return labels;
}

// apiextensions-apiserver crConverter.ConvertFieldLabel for custom resources.
absl::StatusOr<std::string> SelectableFields::ConvertLabel(std::string_view label) const {
  if (builtin_ != nullptr) {
    for (const LabelRule& rule : builtin_->labels) {
      if (rule.label == label) return std::string(rule.field.empty() ? rule.label : rule.field);
    }
    return absl::InvalidArgumentError(UnsupportedMessage(builtin_->style, label));
  }
  const bool known =
      label == "metadata.name" || (namespaced_ && label == "metadata.namespace") ||
      std::find(custom_fields_.begin(), custom_fields_.end(), label) != custom_fields_.end();
  if (known) return std::string(label);
  return absl::InvalidArgumentError(UnsupportedMessage(ErrorStyle::kNotSupported, label));
}

absl::StatusOr<FieldSelector> SelectableFields::Convert(const FieldSelector& selector) const {
  std::vector<FieldTerm> terms;
  terms.reserve(selector.Terms().size());
  for (const FieldTerm& term : selector.Terms()) {
    absl::StatusOr<std::string> field = ConvertLabel(term.field);
    if (!field.ok()) return StatusMessageError(ToStd(field.status().message()));
    terms.push_back(FieldTerm{*std::move(field), term.op, term.value});
  }
  return FieldSelector::FromTerms(std::move(terms));
}

FieldSet SelectableFields::Extract(const rapidjson::Value& object) const {
  std::vector<FieldSet::Pair> pairs;
  if (builtin_ != nullptr) {
    AppendMetadata(object, builtin_->scope, &pairs);
    for (const SourceRule& rule : builtin_->sources) {
      pairs.emplace_back(std::string(rule.field), FieldValue(object, rule));
    }
  } else {
    AppendMetadata(object, namespaced_ ? Scope::kNamespaced : Scope::kCluster, &pairs);
    for (const std::string& field : custom_fields_) {
      pairs.emplace_back(field, RenderValue(FindPath(object, field), Render::kAny));
    }
  }
  return FieldSet(std::move(pairs));
}

FieldSet SelectableFields::ExtractProto(std::string_view message) const {
  std::vector<FieldSet::Pair> pairs;
  const BuiltinFieldRules& rules = builtin_ != nullptr ? *builtin_ : kDefaultRules;
  const Scope scope =
      builtin_ != nullptr ? rules.scope : (namespaced_ ? Scope::kNamespaced : Scope::kCluster);
  std::string_view meta;
  (void)FindBytesField(message, 1, &meta);
  std::string_view name, ns;
  (void)FindBytesField(meta, 1, &name);
  (void)FindBytesField(meta, 3, &ns);
  pairs.emplace_back("metadata.name", std::string(name));
  // Protobuf writes an empty namespace where JSON omits it: empty is absent.
  if (scope == Scope::kNamespaced || (scope == Scope::kAsObject && !ns.empty())) {
    pairs.emplace_back("metadata.namespace", std::string(ns));
  }
  if (builtin_ != nullptr) {
    for (const SourceRule& rule : builtin_->sources) {
      pairs.emplace_back(std::string(rule.field), ProtoFieldValue(message, rules, rule));
    }
  }
  return FieldSet(std::move(pairs));
}

bool SelectableFields::ProtoPathsKnown() const {
  if (builtin_ == nullptr) return custom_fields_.empty();
  for (const SourceRule& rule : builtin_->sources) {
    if (FindProtoPath(*builtin_, rule.path) == nullptr) return false;
    if (!rule.fallback.empty() && FindProtoPath(*builtin_, rule.fallback) == nullptr) return false;
  }
  return true;
}

absl::StatusOr<FieldSelector> ConvertFieldSelector(std::string_view group,
                                                   std::string_view resource,
                                                   const FieldSelector& selector) {
  return SelectableFields::ForResource(group, resource).Convert(selector);
}

FieldSet ExtractFields(std::string_view group, std::string_view resource,
                       const rapidjson::Value& object) {
  return SelectableFields::ForResource(group, resource).Extract(object);
}

}  // namespace kf
