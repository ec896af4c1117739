// File helpers of the tensor-file readers and writers: a whole-file memory
// map and an atomic writer (PATH.tmp.<pid>, fsync, rename), both throwing
// IoError("PATH: reason").
//
//   file_util::AtomicWriter w(path);
//   w.write(bytes, n);
//   w.commit();  // nothing at PATH until here; a writer destroyed uncommitted leaves nothing
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ymlopt::io::file_util {

[[noreturn]] void fail(const std::string& path, const std::string& why);
std::string errno_text(int err);

/// A read-only (or private copy-on-write) memory map of a whole regular file.
class MappedFile {
 public:
  // writable: a private copy-on-write mapping (writes never reach the file)
  explicit MappedFile(const std::string& path, bool writable = false);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  /// Copies the n file bytes that the mapping shows at `at` into `dst` with
  /// pread: the mapping's pages are not touched, so they never count in this
  /// process's resident memory. Throws IoError on a read error or past the end.
  void read_at(const std::byte* at, void* dst, std::size_t n) const;

 private:
  std::string path_;
  int fd_ = -1;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

/// Atomic, buffered writer: PATH.tmp.<pid>, fsync, rename on commit().
class AtomicWriter {
 public:
  explicit AtomicWriter(std::string path);
  ~AtomicWriter();
  AtomicWriter(const AtomicWriter&) = delete;
  AtomicWriter& operator=(const AtomicWriter&) = delete;

  void write(const void* p, std::size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  void commit();

 private:
  static constexpr std::size_t kBuf = std::size_t(1) << 20;
  void flush();
  void write_all(const char* p, std::size_t n);

  std::string path_;
  std::string tmp_;
  int fd_ = -1;
  bool committed_ = false;
  std::vector<char> buf_;
};

}  // namespace ymlopt::io::file_util
