// PartialObjectMetadata: an object as the apiserver answers a client that asks for its metadata
// only (Accept `...;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`, client-go's metadata
// informers). The apiserver's transformObject (endpoints/handlers/response.go,
// asPartialObjectMetadata) copies the object's ObjectMeta whole (managedFields kept) into a
// meta.k8s.io/v1 PartialObjectMetadata and encodes that: the same ObjectMeta struct, so the same
// bytes as the object's own `metadata`. Built here from those bytes, never re-encoded:
//
//   JSON:     {"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":<the
//             object's metadata value>}
//   protobuf: PartialObjectMetadata{1: the object's field 1 (ObjectMeta)}, in the same Unknown
//             envelope, with that TypeMeta
//
// Lists are PartialObjectMetadataList (items with their TypeMeta in JSON; `"items":null` when
// empty, as Go encodes the nil slice the conversion leaves). Stateless.
#ifndef KUBE_FANOUT_CACHE_PARTIAL_METADATA_H_
#define KUBE_FANOUT_CACHE_PARTIAL_METADATA_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace kf {

inline constexpr std::string_view kPartialMetadataApiVersion = "meta.k8s.io/v1";
inline constexpr std::string_view kPartialMetadataKind = "PartialObjectMetadata";
inline constexpr std::string_view kPartialMetadataListKind = "PartialObjectMetadataList";

// The JSON form of an object in event form ({"kind":..,"apiVersion":..,"metadata":{..},..}).
absl::StatusOr<std::string> PartialMetadataJson(std::string_view object);

// The protobuf message of the form, from an object's own message (its field 1 kept as is).
absl::StatusOr<std::string> PartialMetadataProto(std::string_view message);

}  // namespace kf

#endif  // KUBE_FANOUT_CACHE_PARTIAL_METADATA_H_
