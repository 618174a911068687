#include "tests/tools/response_reader.h"

#include <algorithm>
#include <cctype>

namespace kf::tools {
namespace {

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool IContains(std::string_view haystack, std::string_view needle) {
  return std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end(),
                     [](char x, char y) {
                       return std::tolower(static_cast<unsigned char>(x)) ==
                              std::tolower(static_cast<unsigned char>(y));
                     }) != haystack.end();
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

bool ResponseReader::Fail(std::string message) {
  state_ = State::kError;
  error_ = std::move(message);
  return false;
}

size_t ResponseReader::FeedHead(std::string_view data) {
  if (state_ != State::kHead) return 0;
  // The end of the head may straddle reads: look for it across what was kept and what came.
  const size_t kept = head_.size();
  head_.append(data.substr(0, std::min(data.size(), kMaxHead + 4)));
  const size_t end = head_.find("\r\n\r\n", kept >= 3 ? kept - 3 : 0);
  if (end == std::string::npos) {
    if (head_.size() > kMaxHead) Fail("response head too long");
    return data.size();
  }
  const size_t consumed = end + 4 - kept;
  head_.resize(end);
  ParseHead();
  return consumed;
}

bool ResponseReader::ParseHead() {
  std::string_view head(head_);
  // HTTP/1.1 200 OK
  const size_t sp = head.find(' ');
  if (head.substr(0, 5) != "HTTP/" || sp == std::string_view::npos || head.size() < sp + 4) {
    return Fail("bad status line");
  }
  if (head.substr(0, sp) == "HTTP/1.0") keep_alive_ = false;
  status_ = 0;
  for (size_t i = sp + 1; i < sp + 4; ++i) {
    if (head[i] < '0' || head[i] > '9') return Fail("bad status code");
    status_ = status_ * 10 + (head[i] - '0');
  }
  bool has_length = false;
  uint64_t length = 0;
  size_t pos = head.find("\r\n");
  while (pos != std::string_view::npos) {
    const size_t next = head.find("\r\n", pos + 2);
    const std::string_view field = head.substr(
        pos + 2, next == std::string_view::npos ? std::string_view::npos : next - pos - 2);
    pos = next;
    const size_t colon = field.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = Trim(field.substr(0, colon));
    const std::string_view value = Trim(field.substr(colon + 1));
    if (IEquals(name, "transfer-encoding")) {
      chunked_ = IContains(value, "chunked");
    } else if (IEquals(name, "content-length")) {
      has_length = !value.empty();
      length = 0;
      for (const char c : value) {
        if (c < '0' || c > '9' || length > (uint64_t{1} << 50)) return Fail("bad content-length");
        length = length * 10 + static_cast<uint64_t>(c - '0');
      }
    } else if (IEquals(name, "connection")) {
      if (IContains(value, "close")) keep_alive_ = false;
      if (IContains(value, "keep-alive")) keep_alive_ = true;
    }
  }
  if (status_ == 204 || status_ == 304 || (status_ >= 100 && status_ < 200)) {
    if (status_ < 200) return Fail("informational responses are not expected");
    state_ = State::kDone;
  } else if (chunked_) {
    state_ = State::kChunkSize;
  } else if (has_length) {
    left_ = length;
    state_ = length == 0 ? State::kDone : State::kLength;
  } else {
    framed_ = false;
    state_ = State::kUntilClose;
  }
  return true;
}

bool ResponseReader::FeedChunkFraming(std::string_view* data) {
  switch (state_) {
    case State::kChunkSize: {
      const char c = data->front();
      int digit = -1;
      if (c >= '0' && c <= '9') digit = c - '0';
      if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
      if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
      if (digit >= 0) {
        if (++size_digits_ > 15) return Fail("chunk size too long");
        left_ = left_ * 16 + static_cast<uint64_t>(digit);
      } else if (size_digits_ > 0 && (c == ';' || c == ' ' || c == '\t')) {
        state_ = State::kChunkExt;
      } else if (size_digits_ > 0 && c == '\r') {
        state_ = State::kChunkSizeLf;
      } else {
        return Fail("bad chunk size");
      }
      data->remove_prefix(1);
      return true;
    }
    case State::kChunkExt: {
      // Extensions are of no interest: skip to the end of the line, which may be in a later read.
      const size_t cr = data->find('\r');
      if (cr == std::string_view::npos) {
        *data = {};
        return true;
      }
      state_ = State::kChunkSizeLf;
      data->remove_prefix(cr + 1);
      return true;
    }
    case State::kChunkSizeLf:
      if (data->front() != '\n') return Fail("chunk size line without LF");
      data->remove_prefix(1);
      size_digits_ = 0;
      state_ = left_ == 0 ? State::kTrailer : State::kChunkData;
      return true;
    case State::kChunkDataCr:
    case State::kChunkDataLf: {
      const char want = state_ == State::kChunkDataCr ? '\r' : '\n';
      if (data->front() != want) return Fail("chunk data without CRLF");
      data->remove_prefix(1);
      state_ = state_ == State::kChunkDataCr ? State::kChunkDataLf : State::kChunkSize;
      return true;
    }
    case State::kTrailer: {
      // Lines up to an empty one.
      const size_t lf = data->find('\n');
      if (lf == std::string_view::npos) {
        if (trailer_.size() + data->size() > kMaxHead) return Fail("trailer too long");
        trailer_.append(*data);
        *data = {};
        return true;
      }
      trailer_.append(data->substr(0, lf));
      data->remove_prefix(lf + 1);
      if (trailer_ == "\r" || trailer_.empty()) state_ = State::kDone;
      trailer_.clear();
      return true;
    }
    default:
      return Fail("not in the chunked coding's framing");
  }
}

void ResponseReader::OnEof() {
  if (state_ == State::kUntilClose) {
    state_ = State::kDone;
  } else if (state_ != State::kDone && state_ != State::kError) {
    Fail("connection closed before the end of the response");
  }
}

}  // namespace kf::tools
