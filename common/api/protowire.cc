#include "common/api/protowire.h"

#include <google/protobuf/io/coded_stream.h>

namespace kf {

namespace pbio = google::protobuf::io;

ProtoReader::ProtoReader(std::string_view message)
    : message_(message),
      in_(std::make_unique<pbio::CodedInputStream>(reinterpret_cast<const uint8_t*>(message.data()),
                                                   static_cast<int>(message.size()))) {
  if (message.size() > static_cast<size_t>(INT32_MAX)) ok_ = false;
}

ProtoReader::~ProtoReader() = default;

bool ProtoReader::Next(ProtoField* f) {
  if (!ok_) return false;
  const size_t begin = static_cast<size_t>(in_->CurrentPosition());
  const uint32_t tag = in_->ReadTag();
  if (tag == 0) {
    // End of the message, or a tag that does not parse.
    ok_ = begin == message_.size();
    return false;
  }
  f->number = static_cast<int>(tag >> 3);
  f->begin = begin;
  f->bytes = {};
  f->varint = 0;
  bool good = true;
  switch (tag & 7) {
    case 0:
      f->type = WireType::kVarint;
      good = in_->ReadVarint64(&f->varint);
      break;
    case 1: {
      f->type = WireType::kFixed64;
      good = in_->ReadLittleEndian64(&f->varint);
      break;
    }
    case 5: {
      f->type = WireType::kFixed32;
      uint32_t v = 0;
      good = in_->ReadLittleEndian32(&v);
      f->varint = v;
      break;
    }
    case 2: {
      f->type = WireType::kBytes;
      uint32_t len = 0;
      good = in_->ReadVarint32(&len);
      const size_t at = static_cast<size_t>(in_->CurrentPosition());
      good = good && len <= message_.size() - at && in_->Skip(static_cast<int>(len));
      if (good) f->bytes = message_.substr(at, len);
      break;
    }
    default:  // Groups (3, 4) and the reserved types: nothing Kubernetes writes.
      good = false;
  }
  if (!good || f->number == 0) {
    ok_ = false;
    return false;
  }
  f->end = static_cast<size_t>(in_->CurrentPosition());
  return true;
}

bool FindBytesField(std::string_view message, int number, std::string_view* out) {
  ProtoReader r(message);
  ProtoField f;
  while (r.Next(&f)) {
    if (f.number == number && f.type == WireType::kBytes) {
      *out = f.bytes;
      return true;
    }
  }
  return false;
}

size_t VarintSize(uint64_t v) { return pbio::CodedOutputStream::VarintSize64(v); }

void AppendVarint(std::string* out, uint64_t v) {
  uint8_t buf[10];
  const uint8_t* end = pbio::CodedOutputStream::WriteVarint64ToArray(v, buf);
  out->append(reinterpret_cast<const char*>(buf), static_cast<size_t>(end - buf));
}

void AppendTag(std::string* out, int number, WireType type) {
  AppendVarint(out, (static_cast<uint64_t>(number) << 3) | static_cast<uint64_t>(type));
}

void AppendBytesField(std::string* out, int number, std::string_view payload) {
  AppendTag(out, number, WireType::kBytes);
  AppendVarint(out, payload.size());
  out->append(payload);
}

void AppendVarintField(std::string* out, int number, uint64_t v) {
  AppendTag(out, number, WireType::kVarint);
  AppendVarint(out, v);
}

}  // namespace kf
