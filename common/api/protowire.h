// Protocol-buffer wire format: reading the fields of a message and appending fields, without a
// schema. kube-fanout never decodes whole Kubernetes objects: it reads the few fields it needs
// (metadata, selectable fields, list and watch envelopes) and writes envelopes around the
// apiserver's own bytes. Reading uses protobuf's CodedInputStream (libprotobuf-dev), which
// bounds every length by the bytes that are there.
#ifndef KUBE_FANOUT_COMMON_API_PROTOWIRE_H_
#define KUBE_FANOUT_COMMON_API_PROTOWIRE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace google::protobuf::io {
class CodedInputStream;
}  // namespace google::protobuf::io

namespace kf {

enum class WireType { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

struct ProtoField {
  int number = 0;
  WireType type = WireType::kVarint;
  uint64_t varint = 0;     // kVarint (and the fixed types' value).
  std::string_view bytes;  // kBytes: the payload.
  size_t begin = 0;        // Offsets of the whole field (tag included) in the message.
  size_t end = 0;
};

// The fields of one message, in wire order. Next is false at the end and on malformed input
// (then ok() is false): truncated lengths, groups, tag 0.
class ProtoReader {
 public:
  explicit ProtoReader(std::string_view message);
  ~ProtoReader();
  ProtoReader(const ProtoReader&) = delete;
  ProtoReader& operator=(const ProtoReader&) = delete;

  bool Next(ProtoField* field);
  bool ok() const { return ok_; }

 private:
  std::string_view message_;
  std::unique_ptr<google::protobuf::io::CodedInputStream> in_;
  bool ok_ = true;
};

// The payload of the first field `number` of wire type bytes; nullopt-like "" with found=false.
bool FindBytesField(std::string_view message, int number, std::string_view* out);

size_t VarintSize(uint64_t v);
void AppendVarint(std::string* out, uint64_t v);
void AppendTag(std::string* out, int number, WireType type);
// Tag, length and payload of a bytes (string or message) field.
void AppendBytesField(std::string* out, int number, std::string_view payload);
void AppendVarintField(std::string* out, int number, uint64_t v);

}  // namespace kf

#endif  // KUBE_FANOUT_COMMON_API_PROTOWIRE_H_
