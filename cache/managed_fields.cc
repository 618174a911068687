#include "cache/managed_fields.h"

#include "common/api/json.h"
#include "common/api/protowire.h"

namespace kf {
namespace {

constexpr int kObjectMetaField = 1;
constexpr int kManagedFieldsField = 17;

size_t SkipSpace(std::string_view json, size_t i) {
  while (i < json.size() &&
         (json[i] == ' ' || json[i] == '\t' || json[i] == '\n' || json[i] == '\r')) {
    ++i;
  }
  return i;
}

// One past the end of the JSON value at `i` (the text parsed as JSON once already); npos when
// it does not end.
size_t ValueEnd(std::string_view json, size_t i) {
  if (i >= json.size()) return std::string_view::npos;
  if (json[i] == '{' || json[i] == '[') return JsonValueEnd(json, i);
  if (json[i] == '"') {
    for (size_t j = i + 1; j < json.size(); ++j) {
      if (json[j] == '\\') {
        ++j;
      } else if (json[j] == '"') {
        return j + 1;
      }
    }
    return std::string_view::npos;
  }
  while (i < json.size() && json[i] != ',' && json[i] != '}' && json[i] != ']' && json[i] != ' ' &&
         json[i] != '\n' && json[i] != '\r' && json[i] != '\t') {
    ++i;
  }
  return i;
}

// A member of an object: from its key's quote (or the comma before it, `separator`, npos for
// the first member) to the end of its value.
struct Member {
  size_t separator = std::string_view::npos;
  size_t begin = 0;
  size_t value_begin = 0;
  size_t value_end = 0;
};

// The member `key` of the object that starts at `open` ('{'), walking its members only.
std::optional<Member> FindMember(std::string_view json, size_t open, std::string_view key) {
  if (open >= json.size() || json[open] != '{') return std::nullopt;
  size_t i = SkipSpace(json, open + 1);
  size_t separator = std::string_view::npos;
  while (i < json.size() && json[i] == '"') {
    Member m{separator, i, 0, 0};
    const size_t key_end = ValueEnd(json, i);
    if (key_end == std::string_view::npos) return std::nullopt;
    const std::string_view k = json.substr(i + 1, key_end - i - 2);
    i = SkipSpace(json, key_end);
    if (i >= json.size() || json[i] != ':') return std::nullopt;
    m.value_begin = SkipSpace(json, i + 1);
    m.value_end = ValueEnd(json, m.value_begin);
    if (m.value_end == std::string_view::npos) return std::nullopt;
    if (k == key) return m;
    i = SkipSpace(json, m.value_end);
    if (i >= json.size() || json[i] != ',') return std::nullopt;
    separator = i;
    i = SkipSpace(json, i + 1);
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> JsonWithoutManagedFields(std::string_view object) {
  const std::optional<Member> meta = FindMember(object, SkipSpace(object, 0), "metadata");
  if (!meta) return std::nullopt;
  const std::optional<Member> mf = FindMember(object, meta->value_begin, "managedFields");
  if (!mf) return std::nullopt;
  size_t from = mf->begin, to = mf->value_end;
  if (mf->separator != std::string_view::npos) {
    from = mf->separator;  // `,"managedFields":[...]`
  } else if (const size_t next = SkipSpace(object, to);
             next < object.size() && object[next] == ',') {
    to = SkipSpace(object, next + 1);  // The first member: `"managedFields":[...],`
  }
  std::string out(object.substr(0, from));
  out.append(object.substr(to));
  return out;
}

std::optional<std::string> ProtoWithoutManagedFields(std::string_view message) {
  ProtoReader top(message);
  ProtoField field;
  while (top.Next(&field)) {
    if (field.number != kObjectMetaField || field.type != WireType::kBytes) continue;
    std::string meta;
    bool dropped = false;
    ProtoReader r(field.bytes);
    ProtoField f;
    while (r.Next(&f)) {
      if (f.number == kManagedFieldsField) {
        dropped = true;
        continue;
      }
      meta.append(field.bytes.substr(f.begin, f.end - f.begin));
    }
    if (!r.ok() || !dropped) return std::nullopt;
    std::string out(message.substr(0, field.begin));
    AppendBytesField(&out, kObjectMetaField, meta);
    out.append(message.substr(field.end));
    return out;
  }
  return std::nullopt;
}

}  // namespace kf
