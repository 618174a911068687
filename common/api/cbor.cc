#include "common/api/cbor.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/escaping.h"
#include "rapidjson/encodedstream.h"
#include "rapidjson/memorystream.h"

namespace kf {

void AppendCborHead(std::string* out, uint8_t major, uint64_t n) {
  const char m = static_cast<char>(major << 5);
  if (n < 24) {
    out->push_back(static_cast<char>(m | static_cast<char>(n)));
    return;
  }
  int bytes = 8;
  char info = 27;
  if (n <= 0xff) {
    bytes = 1;
    info = 24;
  } else if (n <= 0xffff) {
    bytes = 2;
    info = 25;
  } else if (n <= 0xffffffffu) {
    bytes = 4;
    info = 26;
  }
  out->push_back(static_cast<char>(m | info));
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>((n >> (8 * i)) & 0xff));
}

void AppendCborString(std::string* out, std::string_view s) {
  AppendCborHead(out, 2, s.size());
  out->append(s);
}

namespace {

// The half-precision bits of `f` when it converts exactly (normal or subnormal), else -1.
int32_t ExactHalf(float f) {
  uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  const uint32_t sign = (bits >> 16) & 0x8000;
  const int exponent = static_cast<int>((bits >> 23) & 0xff) - 127;
  const uint32_t mantissa = bits & 0x7fffff;
  if ((bits & 0x7fffffff) == 0) return static_cast<int32_t>(sign);
  if (exponent >= -14 && exponent <= 15) {
    if (mantissa & 0x1fff) return -1;
    return static_cast<int32_t>(sign | static_cast<uint32_t>(exponent + 15) << 10 | mantissa >> 13);
  }
  if (exponent >= -24 && exponent < -14) {
    const uint32_t full = 0x800000 | mantissa;
    const int shift = -exponent - 1;  // value = full * 2^(exponent-23) = h * 2^-24.
    if (full & ((1u << shift) - 1)) return -1;
    return static_cast<int32_t>(sign | full >> shift);
  }
  return -1;
}

// A float in the shortest of half, single and double precision that keeps its value (the
// apiserver's ShortestFloat16).
void AppendCborFloat(std::string* out, double d) {
  const float f = static_cast<float>(d);
  if (static_cast<double>(f) == d) {
    if (const int32_t half = ExactHalf(f); half >= 0) {
      out->push_back('\xf9');
      out->push_back(static_cast<char>(half >> 8));
      out->push_back(static_cast<char>(half & 0xff));
      return;
    }
    uint32_t bits = 0;
    std::memcpy(&bits, &f, sizeof bits);
    out->push_back('\xfa');
    for (int i = 3; i >= 0; --i) out->push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
    return;
  }
  uint64_t bits = 0;
  std::memcpy(&bits, &d, sizeof bits);
  out->push_back('\xfb');
  for (int i = 7; i >= 0; --i) out->push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

// The handler both passes share: containers' nesting and, in the second pass, the bytes.
struct Transcoder {
  // Pass 1 fills `counts` (members or elements of each container, in the order they open);
  // pass 2 writes, reading them.
  bool counting = true;
  size_t max_depth = 0;
  std::vector<uint64_t> counts;
  std::vector<size_t> open;  // Pass 1: the index in `counts` of each open container.
  size_t next = 0;           // Pass 2: the next container's index in `counts`.
  size_t depth = 0;
  std::string_view bytes_map;
  size_t bytes_depth = 0;    // The depth of the []byte map while inside it, else 0.
  std::string last_key;      // The last key at depth 1 (the parser's strings are transient).
  uint64_t top_members = 0;  // Keys seen at depth 1.
  bool type_meta_first = false;
  CborTranscoded out;
  bool bad_bytes = false;

  bool Start(uint8_t major) {
    if (++depth > max_depth) return false;
    if (counting) {
      open.push_back(counts.size());
      counts.push_back(0);
      return true;
    }
    if (next >= counts.size()) return false;
    if (depth == 2 && major == 5 && !bytes_map.empty() && last_key == bytes_map) bytes_depth = 2;
    AppendCborHead(&out.bytes, major, counts[next++]);
    return true;
  }
  bool End(rapidjson::SizeType n) {
    if (counting) {
      counts[open.back()] = n;
      open.pop_back();
    } else if (depth == 1 && type_meta_first && top_members == 2) {
      out.after_type_meta = out.bytes.size();
    }
    if (depth == bytes_depth) bytes_depth = 0;
    --depth;
    return true;
  }
  bool Scalar(auto write) {
    if (!counting) write();
    return true;
  }

  bool Null() {
    return Scalar([&] { out.bytes.push_back('\xf6'); });
  }
  bool Bool(bool b) {
    return Scalar([&] { out.bytes.push_back(b ? '\xf5' : '\xf4'); });
  }
  bool Int(int i) { return Int64(i); }
  bool Uint(unsigned u) { return Uint64(u); }
  bool Int64(int64_t i) {
    return Scalar([&] {
      if (i >= 0) {
        AppendCborHead(&out.bytes, 0, static_cast<uint64_t>(i));
      } else {
        AppendCborHead(&out.bytes, 1, static_cast<uint64_t>(-(i + 1)));
      }
    });
  }
  bool Uint64(uint64_t u) {
    return Scalar([&] { AppendCborHead(&out.bytes, 0, u); });
  }
  bool Double(double d) {
    return Scalar([&] { AppendCborFloat(&out.bytes, d); });
  }
  bool RawNumber(const char*, rapidjson::SizeType, bool) { return false; }
  bool String(const char* s, rapidjson::SizeType n, bool) {
    if (counting) return true;
    if (bytes_depth != 0 && depth == bytes_depth) {
      std::string raw;
      if (!absl::Base64Unescape(absl::string_view(s, n), &raw)) {
        bad_bytes = true;
        return false;
      }
      out.bytes.append("\xd6");  // Tag 22: expected conversion to base64.
      AppendCborString(&out.bytes, raw);
      return true;
    }
    AppendCborString(&out.bytes, std::string_view(s, n));
    return true;
  }
  bool Key(const char* s, rapidjson::SizeType n, bool) {
    if (counting) return true;
    const std::string_view key(s, n);
    if (depth == 1) {
      last_key.assign(key);
      if (top_members == 0) type_meta_first = key == "kind";
      if (top_members == 1) type_meta_first = type_meta_first && key == "apiVersion";
      if (top_members == 2 && type_meta_first) out.after_type_meta = out.bytes.size();
      ++top_members;
    }
    AppendCborString(&out.bytes, key);
    return true;
  }
  bool StartObject() { return Start(5); }
  bool EndObject(rapidjson::SizeType n) { return End(n); }
  bool StartArray() { return Start(4); }
  bool EndArray(rapidjson::SizeType n) { return End(n); }
};

bool Pass(std::string_view json, Transcoder& t) {
  rapidjson::Reader reader;
  // The stream Document::Parse reads (ParseJson), so both take the same documents.
  rapidjson::MemoryStream memory(json.data(), json.size());
  rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> stream(memory);
  t.depth = 0;
  t.bytes_depth = 0;
  return !reader.Parse<kJsonParseFlags | rapidjson::kParseFullPrecisionFlag>(stream, t).IsError();
}

}  // namespace

absl::StatusOr<CborTranscoded> JsonToCbor(std::string_view json, std::string_view bytes_map,
                                          JsonLimits limits) {
  if (json.size() > limits.max_bytes) return absl::InvalidArgumentError("JSON too large");
  // RapidJSON takes a NUL byte for the end of the input (as ParseJson guards against).
  if (json.find('\0') != std::string_view::npos) return absl::InvalidArgumentError("not JSON");
  Transcoder t;
  t.max_depth = limits.max_depth;
  t.bytes_map = bytes_map;
  if (!Pass(json, t)) return absl::InvalidArgumentError("not JSON, or too deep");
  t.counting = false;
  t.out.bytes.reserve(json.size());
  if (!Pass(json, t)) {
    return absl::InvalidArgumentError(t.bad_bytes ? "a []byte value is not base64" : "not JSON");
  }
  if (t.type_meta_first && t.top_members >= 2) {
    t.out.members_after_type_meta = t.top_members - 2;
  } else {
    t.out.after_type_meta = 0;
  }
  return std::move(t.out);
}

}  // namespace kf
