// The byte format of what co-methods on different ranks send each other
// (exchange messages, records). Both ends are the same binary: values are
// copied as they are in memory, strings and byte arrays with their size first.
//
//   WireOut w;  w.put(std::int32_t(3));  w.put_string("x");
//   auto bytes = w.take();
//   WireIn r(bytes);  auto i = r.get<std::int32_t>();  auto s = r.get_string();
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace ymlopt::unite {

class WireOut {
 public:
  WireOut() { b_.reserve(64); }
  template <class T> void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    b_.insert(b_.end(), p, p + sizeof v);
  }
  void put_bytes(const void* p, std::size_t n) {
    put(std::uint64_t(n));
    const auto* q = static_cast<const std::byte*>(p);
    b_.insert(b_.end(), q, q + n);
  }
  void put_string(const std::string& s) { put_bytes(s.data(), s.size()); }
  std::vector<std::byte> take() { return std::move(b_); }

 private:
  std::vector<std::byte> b_;
};

/// Reads what a WireOut wrote; a read past the end throws std::runtime_error.
class WireIn {
 public:
  explicit WireIn(const std::vector<std::byte>& b) : b_(b) {}
  template <class T> T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T v;
    need(sizeof v);
    std::memcpy(&v, b_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  std::vector<std::byte> get_bytes() {
    const auto n = std::size_t(get<std::uint64_t>());
    need(n);
    std::vector<std::byte> v(b_.begin() + std::ptrdiff_t(at_), b_.begin() + std::ptrdiff_t(at_ + n));
    at_ += n;
    return v;
  }
  std::string get_string() {
    const auto v = get_bytes();
    return std::string(reinterpret_cast<const char*>(v.data()), v.size());
  }
  bool done() const { return at_ == b_.size(); }

 private:
  void need(std::size_t n) const {
    if (b_.size() - at_ < n) throw std::runtime_error("co-method exchange: truncated message from another rank");
  }
  const std::vector<std::byte>& b_;
  std::size_t at_ = 0;
};

}  // namespace ymlopt::unite
