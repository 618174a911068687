// Representation: which encoding a client gets, and what the apiserver itself must render. The
// cache holds each object as the apiserver's compact JSON and, for built-in resources, as its
// protobuf message, and derives the PartialObjectMetadata conversion from either; anything
// else (YAML, the Table conversion, pretty-printed JSON, another user's view through
// impersonation) only the apiserver can answer exactly. The one place this is decided.
// Stateless.
#ifndef KUBE_FANOUT_EDGE_REPRESENTATION_H_
#define KUBE_FANOUT_EDGE_REPRESENTATION_H_

#include <boost/beast/http/fields.hpp>
#include <string_view>

#include "common/api/request_info.h"

namespace kf {

// The apiserver pretty-prints JSON for these user agents (curl, Wget, browsers) and on ?pretty.
bool PrettyUserAgent(std::string_view ua);

// True when the answer must come from the apiserver's own encoders whatever the media type:
// impersonation (another user's view). Conversions are NegotiateRepresentation's.
bool ApiserverRendersAnswer(const RequestInfo& info, const boost::beast::http::fields& headers);

enum class MediaChoice {
  kJson,
  kProtobuf,
  kCbor,       // application/cbor (its watches application/cbor-seq), where the cache serves it.
  kApiserver,  // YAML, pretty JSON, nothing acceptable, ...: the apiserver's own answer.
};
// The media type the apiserver's negotiation (NegotiateOutputMediaType) would pick for this
// Accept header, among the serializers of a resource that has protobuf (`has_protobuf`: the
// built-in ones) or not: clauses by q (highest first, ties in header order, wildcards after
// concrete types), the first one a serializer matches wins. No Accept, */* and application/*
// mean JSON. JSON is then only the cache's when not pretty-printed (curl, browsers, ?pretty).
// As NegotiateRepresentation, kApiserver for any conversion.
MediaChoice NegotiateMedia(const RequestInfo& info, const boost::beast::http::fields& headers,
                           bool has_protobuf);

// What the object is converted to (the clause's as=, g=, v= parameters, apiserver
// AllowsConversion): none; meta.k8s.io/v1 PartialObjectMetadata or PartialObjectMetadataList;
// anything else the apiserver renders (Table, meta.k8s.io/v1beta1).
enum class Conversion { kNone, kPartialMetadata, kPartialMetadataList, kApiserver };
struct Representation {
  MediaChoice media = MediaChoice::kJson;
  Conversion conversion = Conversion::kNone;
  // The clause's drop=metadata.managedFields, where the upstream reads drop= (Drop::kRead): the
  // objects without managedFields.
  bool drop_managed_fields = false;
  // The clause has drop= and what the upstream does with it is not known (Drop::kUnknown): the
  // apiserver's answer, and worth asking the upstream (Reflector::AskDrop).
  bool asks_drop = false;
};
// What the upstream does with a clause's drop= parameter (the managedFields opt-out, 1.38's
// alpha ManagedFieldsOptOut): not known yet; reads it (drop=metadata.managedFields leaves them
// out, drop= with nothing asks for nothing, any other target the upstream answers, 406 where
// it reads it); ignores it (the answer as without it).
enum class Drop { kUnknown, kRead, kIgnored };
// NegotiateMedia's rules, with the clauses' parameters read as NegotiateMediaTypeOptions reads
// them: a conversion the endpoint does not allow (Table in protobuf, an unknown kind or group)
// skips the clause; `pretty=1` and `sv=` are the apiserver's; `drop=` as `drop` says (its last
// value, as goautoneg keeps the last of a repeated parameter); other parameters are ignored.
// `allow_conversion` false: as the apiserver negotiates an error's Status (its default endpoint
// restrictions), every clause asking for a conversion skipped. `has_cbor`: the cache can answer
// application/cbor (the upstream serves it: its CBORServingAndStorage gate); otherwise a CBOR
// clause is the apiserver's.
Representation NegotiateRepresentation(const RequestInfo& info,
                                       const boost::beast::http::fields& headers, bool has_protobuf,
                                       bool allow_conversion = true, bool has_cbor = false,
                                       Drop drop = Drop::kUnknown);

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_REPRESENTATION_H_
