// SelectableFields: what the apiserver does with a fieldSelector for one resource.
//
// Two halves, as in the apiserver:
//  - Convert mirrors the handler's Selector.Transform(scheme.ConvertFieldLabel): a request may
//    only name the fields the kind's field-label conversion function accepts (the 400 message for
//    the others differs by kind), and some names are renamed before matching (pods' legacy
//    spec.host → spec.nodeName; events.k8s.io's regarding.kind → involvedObject.kind, ...).
//  - Extract mirrors the registry strategy's GetAttrs: the object's field set, values rendered as
//    the apiserver renders them (bools "true"/"false", integers in decimal, "" for missing).
// Matching a converted selector against an extracted set is then FieldSelector::Matches.
//
// Sources (kubernetes v1.36.3): pkg/apis/core/v1/conversion.go, pkg/apis/events/v1/conversion.go,
// pkg/apis/{batch,certificates,resource}/v1/conversion.go, pkg/registry/*/*/strategy.go,
// apimachinery runtime.DefaultMetaV1FieldSelectorConversion, apiserver storage.Default*Attr and
// apiextensions-apiserver conversion/converter.go and registry/customresource/strategy.go.
//
// Value type; immutable, safe to share between threads.
#ifndef KUBE_FANOUT_CACHE_SELECTABLE_FIELDS_H_
#define KUBE_FANOUT_CACHE_SELECTABLE_FIELDS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/field_selector.h"
#include "cache/labels.h"
#include "rapidjson/document.h"

namespace kf {

namespace internal {
struct BuiltinFieldRules;
}  // namespace internal

class SelectableFields {
 public:
  // A built-in resource of kube-apiserver v1.36 by API group ("" for core) and resource (plural,
  // "pods"). Resources without rules of their own get the apiserver's default: metadata.name and
  // metadata.namespace, with the `"x" is not a known field selector: ...` message. Custom
  // resources must use ForCustomResource: their messages and fields differ from the default.
  static SelectableFields ForResource(std::string_view group, std::string_view resource);

  // A custom resource: metadata.name, metadata.namespace when `namespaced`, and the JSON paths
  // of the served version's spec.versions[].selectableFields (".spec.color", simple paths only,
  // as the CRD validation requires). Unsupported fields give `field label not supported: x`.
  static SelectableFields ForCustomResource(bool namespaced,
                                            const std::vector<std::string>& selectable_json_paths);

  // The field names a request may use.
  std::vector<std::string> FieldLabels() const;

  // Checks every term's field and renames it to the name objects are matched on. The first
  // unsupported field (in the selector's term order) gives InvalidArgument whose message is
  // exactly the message of the apiserver's 400 BadRequest Status.
  absl::StatusOr<FieldSelector> Convert(const FieldSelector& selector) const;

  // The selectable fields of `object` (a whole object as the apiserver serves it, in the
  // resource's own group version).
  FieldSet Extract(const rapidjson::Value& object) const;
  // The same from the object's protobuf message (built-in resources only: custom resources have
  // no protobuf form). Reads the fields by their numbers in k8s.io/api v0.36's generated.proto.
  FieldSet ExtractProto(std::string_view message) const;
  // Every field this resource's set is made of has a known protobuf field path.
  bool ProtoPathsKnown() const;

 private:
  SelectableFields() = default;

  // Converts one field name: the name to match on, or the apiserver's message.
  absl::StatusOr<std::string> ConvertLabel(std::string_view label) const;

  // A built-in resource: a row of the constant table in the .cc file. Otherwise a custom
  // resource, described by the two members after it.
  const internal::BuiltinFieldRules* builtin_ = nullptr;
  bool namespaced_ = false;
  std::vector<std::string> custom_fields_;  // "spec.color" for the JSON path ".spec.color".
};

// Shorthands for SelectableFields::ForResource(group, resource).
absl::StatusOr<FieldSelector> ConvertFieldSelector(std::string_view group,
                                                   std::string_view resource,
                                                   const FieldSelector& selector);
FieldSet ExtractFields(std::string_view group, std::string_view resource,
                       const rapidjson::Value& object);

}  // namespace kf

#endif  // KUBE_FANOUT_CACHE_SELECTABLE_FIELDS_H_
