#include "common/api/kube_proto.h"

#include "common/api/protowire.h"
#include "common/strings.h"

namespace kf {

std::string UnknownHead(std::string_view api_version, std::string_view kind, size_t raw_size) {
  std::string type_meta;
  AppendBytesField(&type_meta, 1, api_version);
  AppendBytesField(&type_meta, 2, kind);
  std::string out(kProtobufMagic);
  AppendBytesField(&out, 1, type_meta);
  AppendTag(&out, 2, WireType::kBytes);
  AppendVarint(&out, raw_size);
  return out;
}

std::string WrapUnknown(std::string_view api_version, std::string_view kind, std::string_view raw) {
  std::string out = UnknownHead(api_version, kind, raw.size());
  out.append(raw);
  out.append(kUnknownTail);
  return out;
}

bool ParseUnknown(std::string_view bytes, UnknownView* out) {
  if (!bytes.starts_with(kProtobufMagic)) return false;
  ProtoReader r(bytes.substr(kProtobufMagic.size()));
  ProtoField f;
  bool have_raw = false;
  *out = UnknownView{};
  while (r.Next(&f)) {
    if (f.type != WireType::kBytes) continue;
    if (f.number == 1) {
      ProtoReader tm(f.bytes);
      ProtoField t;
      while (tm.Next(&t)) {
        if (t.type != WireType::kBytes) continue;
        if (t.number == 1) out->api_version = t.bytes;
        if (t.number == 2) out->kind = t.bytes;
      }
      if (!tm.ok()) return false;
    } else if (f.number == 2) {
      out->raw = f.bytes;
      have_raw = true;
    }
  }
  return r.ok() && have_raw;
}

std::string WatchFramePrefix(std::string_view type, size_t envelope_size) {
  const size_t raw_ext = 1 + VarintSize(envelope_size) + envelope_size;
  const size_t event =
      1 + VarintSize(type.size()) + type.size() + 1 + VarintSize(raw_ext) + raw_ext;
  std::string out;
  out.reserve(4 + 24 + type.size());
  out.push_back(static_cast<char>((event >> 24) & 0xff));
  out.push_back(static_cast<char>((event >> 16) & 0xff));
  out.push_back(static_cast<char>((event >> 8) & 0xff));
  out.push_back(static_cast<char>(event & 0xff));
  AppendBytesField(&out, 1, type);
  AppendTag(&out, 2, WireType::kBytes);
  AppendVarint(&out, raw_ext);
  AppendTag(&out, 1, WireType::kBytes);
  AppendVarint(&out, envelope_size);
  return out;
}

std::string WatchFrame(std::string_view type, std::string_view envelope) {
  std::string out = WatchFramePrefix(type, envelope.size());
  out.append(envelope);
  return out;
}

std::string EncodeListMeta(std::string_view resource_version, std::string_view continue_token,
                           std::optional<int64_t> remaining_item_count,
                           std::string_view shard_selector) {
  std::string out;
  AppendBytesField(&out, 1, "");
  AppendBytesField(&out, 2, resource_version);
  AppendBytesField(&out, 3, continue_token);
  if (remaining_item_count) {
    AppendVarintField(&out, 4, static_cast<uint64_t>(*remaining_item_count));
  }
  if (!shard_selector.empty()) {
    std::string shard_info;
    AppendBytesField(&shard_info, 1, shard_selector);
    AppendBytesField(&out, 5, shard_info);
  }
  return out;
}

int ProtoStatusCode(std::string_view status_message) {
  ProtoReader r(status_message);
  ProtoField f;
  while (r.Next(&f)) {
    if (f.number == 6 && f.type == WireType::kVarint) return static_cast<int>(f.varint);
  }
  return 0;
}

}  // namespace kf
