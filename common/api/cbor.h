// CBOR (RFC 8949) as the apiserver writes it (KEP-4222, the CBORServingAndStorage gate; the
// encoder options of k8s.io/apimachinery/pkg/runtime/serializer/cbor/internal/modes): written
// here from an object's JSON, which the cache holds, so a CBOR answer is the apiserver's value.
//
// The apiserver's encoder writes every Go string (struct field names and map keys included) as
// a byte string (major type 2), []byte as a byte string under tag 22 ("expected base64"),
// integers as integers, floats in the shortest width that keeps their value, nil slices and
// maps as null, definite lengths only; bodies and watch events begin with the self-described
// CBOR tag 55799, and so does the object inside each watch event. It writes a struct's fields
// and a map's keys in an order that varies between calls; JsonToCbor keeps the JSON's order.
//
// JsonToCbor never recurses (RapidJSON's iterative parser, two passes: counts, then bytes) and
// refuses what ParseJson refuses. Free functions; thread-safe.
#ifndef KUBE_FANOUT_COMMON_API_CBOR_H_
#define KUBE_FANOUT_COMMON_API_CBOR_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/api/json.h"

namespace kf {

// The self-described CBOR tag 55799 (RFC 8949 3.4.6), first in every body the apiserver writes.
inline constexpr std::string_view kCborSelfDescribed = "\xd9\xd9\xf7";
inline constexpr std::string_view kCborContentType = "application/cbor";
inline constexpr std::string_view kCborSeqContentType = "application/cbor-seq";

// A CBOR head: major type `major` (0..7) with argument `n`, in its shortest form.
void AppendCborHead(std::string* out, uint8_t major, uint64_t n);
// A Go string as the apiserver writes it: a byte string.
void AppendCborString(std::string* out, std::string_view s);

struct CborTranscoded {
  std::string bytes;  // The value, without the self-described tag.
  // A top-level object whose first two members are "kind" and "apiVersion" (a built-in object in
  // event form): where its members after them start, and how many there are, so the LIST item
  // form (no type fields) is a new map head and the rest of these bytes. 0/0 otherwise.
  size_t after_type_meta = 0;
  uint64_t members_after_type_meta = 0;
};

// The JSON value `json` in CBOR. `bytes_map`: the top-level member whose object's string values
// are Go []byte (base64 in JSON): ConfigMap "binaryData", Secret "data"; empty for none.
// InvalidArgument for what is not JSON, too large or too deep (JsonLimits), or a []byte that is
// not base64.
absl::StatusOr<CborTranscoded> JsonToCbor(std::string_view json, std::string_view bytes_map = {},
                                          JsonLimits limits = {});

}  // namespace kf

#endif  // KUBE_FANOUT_COMMON_API_CBOR_H_
