// The apiserver's protobuf envelopes (apimachinery runtime/serializer/protobuf): what wraps an
// object's own message on the wire. kube-fanout keeps each object as the apiserver's message
// bytes and writes the envelopes around them, never re-encoding an object:
//
//   object (GET, watch event object):  "k8s\0" Unknown{1: TypeMeta{1: apiVersion, 2: kind},
//                                                     2: raw, 3: contentEncoding "", 4: contentType
//                                                     ""}
//   list: the same envelope around XList{1: ListMeta{1: selfLink, 2: resourceVersion,
//                                                     3: continue, 4: remainingItemCount?},
//                                        2: item messages...}
//   watch stream: 4-byte big-endian length, then WatchEvent{1: type, 2: RawExtension{1: the
//                 object envelope}} (no magic of its own)
//
// Go's generated marshalers write every non-pointer field, empty strings included, in field
// order; the helpers here do the same so the bytes match.
#ifndef KUBE_FANOUT_COMMON_API_KUBE_PROTO_H_
#define KUBE_FANOUT_COMMON_API_KUBE_PROTO_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kf {

inline constexpr std::string_view kProtobufMagic{"k8s\0", 4};
// Unknown's contentEncoding and contentType, both empty: what follows `raw`.
inline constexpr std::string_view kUnknownTail{"\x1a\x00\x22\x00", 4};
inline constexpr std::string_view kProtobufContentType = "application/vnd.kubernetes.protobuf";
inline constexpr std::string_view kProtobufWatchContentType =
    "application/vnd.kubernetes.protobuf;stream=watch";

// Magic, TypeMeta and raw's tag and length: what precedes an object's message of `raw_size`
// bytes in its envelope (followed by the message and kUnknownTail).
std::string UnknownHead(std::string_view api_version, std::string_view kind, size_t raw_size);
// The whole envelope, for small objects built here (Status, bookmarks).
std::string WrapUnknown(std::string_view api_version, std::string_view kind, std::string_view raw);

struct UnknownView {
  std::string_view api_version;
  std::string_view kind;
  std::string_view raw;
};
// Reads an envelope (magic included); false when it is not one.
bool ParseUnknown(std::string_view bytes, UnknownView* out);

// What precedes an object envelope of `envelope_size` bytes in a watch frame of `type`
// ("ADDED", ...): the frame length, the type and the RawExtension's tags and lengths.
std::string WatchFramePrefix(std::string_view type, size_t envelope_size);

// An ERROR or BOOKMARK frame whole.
std::string WatchFrame(std::string_view type, std::string_view envelope);

// ListMeta's message: selfLink "", resourceVersion, continue, remainingItemCount when set, and
// shardInfo {selector} when `shard_selector` is not empty.
std::string EncodeListMeta(std::string_view resource_version, std::string_view continue_token,
                           std::optional<int64_t> remaining_item_count,
                           std::string_view shard_selector = {});

// metav1.Status's code (field 6) from its message; 0 when absent.
int ProtoStatusCode(std::string_view status_message);

}  // namespace kf

#endif  // KUBE_FANOUT_COMMON_API_KUBE_PROTO_H_
