#include "io/file_util.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "io/tensor_file.hpp"

namespace ymlopt::io::file_util {

void fail(const std::string& path, const std::string& why) { throw IoError(path + ": " + why); }

std::string errno_text(int err) { return std::strerror(err); }

MappedFile::MappedFile(const std::string& path, bool writable) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, "cannot open: " + errno_text(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(path, "cannot stat: " + errno_text(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      fail(path, "cannot map: " + errno_text(err));
    }
    data_ = static_cast<const std::byte*>(p);
  }
  fd_ = fd;  // kept for read_at
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
}

void MappedFile::read_at(const std::byte* at, void* dst, std::size_t n) const {
  if (at < data_ || std::size_t(at - data_) > size_ || n > size_ - std::size_t(at - data_))
    fail(path_, "read past the end of the file");
  auto* out = static_cast<char*>(dst);
  off_t off = off_t(at - data_);
  while (n > 0) {
    const ssize_t got = ::pread(fd_, out, n, off);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) fail(path_, got < 0 ? "cannot read: " + errno_text(errno) : "the file shrank while it was read");
    out += got, off += got, n -= std::size_t(got);
  }
}

AtomicWriter::AtomicWriter(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp." + std::to_string(::getpid())) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd_ < 0) fail(path_, "cannot create temporary file: " + errno_text(errno));
  buf_.reserve(kBuf);
}

AtomicWriter::~AtomicWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicWriter::write(const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  if (buf_.size() + n <= kBuf) {
    buf_.insert(buf_.end(), c, c + n);
    return;
  }
  flush();
  if (n >= kBuf) {
    write_all(c, n);
  } else {
    buf_.insert(buf_.end(), c, c + n);
  }
}

void AtomicWriter::commit() {
  flush();
  if (::fsync(fd_) != 0) fail(path_, "cannot sync: " + errno_text(errno));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(path_, "cannot close: " + errno_text(errno));
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail(path_, "cannot rename temporary file: " + errno_text(errno));
  committed_ = true;
  // Best effort: make the rename durable.
  const std::string parent = std::filesystem::path(path_).parent_path().string();
  const std::string dir = parent.empty() ? std::string(1, '.') : parent;
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

void AtomicWriter::flush() {
  if (!buf_.empty()) write_all(buf_.data(), buf_.size());
  buf_.clear();
}

void AtomicWriter::write_all(const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, std::min<std::size_t>(n, std::size_t(1) << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      fail(path_, "cannot write: " + errno_text(errno));
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

}  // namespace ymlopt::io::file_util
