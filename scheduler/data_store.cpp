#include "ymlopt/scheduler/data_store.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <set>
#include <cstring>
#include <stdexcept>

#include <ymlopt/half.hpp>

#include "io/tensor_file.hpp"

namespace ymlopt {

void DataStore::Free::operator()(void* p) const { std::free(p); }

double random_value(std::uint64_t seed, std::uint64_t index) {
  // splitmix64 of (seed, index): counter-based, so tiling and order do not matter
  std::uint64_t z = seed * 0x9e3779b97f4a7c15ull + index + 0x632be59bd9b4e019ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return double(z >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

namespace {

void store_value(void* base, DType t, std::int64_t i, double v) {
  switch (t) {
    case DType::f32: static_cast<float*>(base)[i] = float(v); break;
    case DType::f64: static_cast<double*>(base)[i] = v; break;
    case DType::f16: static_cast<std::uint16_t*>(base)[i] = half::f16_bits_from_double(v); break;
    case DType::bf16: static_cast<std::uint16_t*>(base)[i] = half::bf16_bits_from_double(v); break;
    case DType::i8: static_cast<std::int8_t*>(base)[i] = std::int8_t(v); break;
    case DType::i32: static_cast<std::int32_t*>(base)[i] = std::int32_t(v); break;
  }
}

// Element (r, c) is written at r * ld + c; values depend on the logical
// index r * cols + c only, so padding never changes them.
void initialise(const DataDecl& d, void* p) {
  const bool integral = d.dtype == DType::i8 || d.dtype == DType::i32;
  std::memset(p, 0, size_t(d.storage_bytes()));  // zeros, and the padding
  auto each = [&](auto&& value) {
    for (std::int64_t r = 0; r < d.rows; ++r)
      for (std::int64_t c = 0; c < d.cols; ++c) store_value(p, d.dtype, r * d.ld + c, value(r, c));
  };
  switch (d.init) {
    case InitKind::none:
    case InitKind::zeros:
    case InitKind::file: break;  // files are mapped by the DataStore, not copied here
    case InitKind::ones:
    case InitKind::value: {
      const double v = d.init == InitKind::ones ? 1.0 : d.value;
      each([v](std::int64_t, std::int64_t) { return v; });
      break;
    }
    case InitKind::range:  // 0, 1, 2, ... in row-major order
      each([&](std::int64_t r, std::int64_t c) { return double(r * d.cols + c); });
      break;
    case InitKind::identity:
      for (std::int64_t i = 0; i < d.rows; ++i) store_value(p, d.dtype, i * d.ld + i, 1.0);
      break;
    case InitKind::random: {
      const double scale = d.dtype == DType::i8 ? 127.0 : d.dtype == DType::i32 ? 1000.0 : 1.0;
      each([&](std::int64_t r, std::int64_t c) {
        const double v = random_value(d.seed, std::uint64_t(r * d.cols + c)) * scale;
        return integral ? double(std::int64_t(v)) : v;
      });
      break;
    }
    case InitKind::spd: {  // symmetric, diagonally dominant: positive definite
      const std::int64_t m = d.rows;
      each([&](std::int64_t i, std::int64_t j) {
        const std::int64_t lo = std::min(i, j), hi = std::max(i, j);
        const double v = random_value(d.seed, std::uint64_t(lo * m + hi));
        return i == j ? double(m) + std::abs(v) : v;
      });
      break;
    }
    case InitKind::dominant: {  // random, plus n on the diagonal: LU and Gauss-Jordan need no pivoting
      each([&](std::int64_t r, std::int64_t c) {
        const double v = random_value(d.seed, std::uint64_t(r * d.cols + c));
        return r == c ? double(d.rows) + v : v;
      });
      break;
    }
  }
}

/// Maps the file pages of [p, p + n) now, read-only (no copy-on-write copies),
/// so that the run's first tasks do not take a page fault per 4 KiB of weights
/// (a mapped weight file is read as a loaded one would be). Best effort: a kernel
/// without MADV_POPULATE_READ (before Linux 5.14) leaves the faults to the tasks.
void populate(const std::byte* p, std::size_t n) {
#ifdef MADV_POPULATE_READ
  const std::uintptr_t page = std::uintptr_t(::sysconf(_SC_PAGESIZE));
  const std::uintptr_t b = reinterpret_cast<std::uintptr_t>(p) / page * page;
  const std::uintptr_t e = reinterpret_cast<std::uintptr_t>(p) + n;
  if (n > 0) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_POPULATE_READ);
#else
  (void)p, (void)n;
#endif
}

/// Zero-initialised tensors from this size on are mapped, not allocated and cleared.
constexpr size_t kLazyBytes = size_t(1) << 21;

}  // namespace

DataStore::DataStore(const Dag& dag) : DataStore(dag, std::vector<char>(dag.data.size(), 1)) {}

DataStore::DataStore(const Dag& dag, const std::vector<char>& resident) : dag_(dag) {
  std::map<std::string, std::shared_ptr<io::MappedTensorFile>> files;
  std::set<std::string> used;
  for (const auto& d : dag.data) {
    if (!d.format.empty()) {  // stored compressed: its companions hold the data
      ptrs_.push_back(nullptr);
      continue;
    }
    if (d.init == InitKind::file) {
      auto& f = files[d.src];
      if (!f) {
        f = std::make_shared<io::MappedTensorFile>(d.src);
        mappings_.push_back(f);
      }
      io::TensorInfo info;
      std::byte* p = f->tensor(d.key, &info);
      // dtype and shape were checked at compile time; the file may have changed since
      std::int64_t numel = 1;
      for (auto x : info.shape) numel *= x;
      if (info.dtype != d.dtype || numel != d.rows * d.cols)
        throw std::runtime_error(d.src + ": '" + (d.key.empty() ? d.name : d.key) + "' is " +
                                 (info.dtype ? dtype_name(*info.dtype) : info.stored_dtype.c_str()) +
                                 shape_str(info.shape) + " but data '" + d.name + "' is declared " +
                                 dtype_name(d.dtype) + shape_str(d.shape) + " (the file changed since the check?)");
      // the first tensor of a (file, key) is used in place; another one reading
      // the same bytes gets its own copy, so that writing one never changes the other
      const bool first_use = used.insert(d.src + '\n' + d.key).second;
      if (first_use && reinterpret_cast<std::uintptr_t>(p) % dtype_size(d.dtype) == 0) {
        if (resident[ptrs_.size()]) populate(p, size_t(d.bytes()));
        ptrs_.push_back(p);
        mapped_ += size_t(d.bytes());
        continue;
      }
      // misaligned in the file, or already in use: copy to aligned memory
      void* q = std::aligned_alloc(64, (size_t(d.bytes()) + 63) / 64 * 64);  // ld == cols for files
      if (!q) throw std::runtime_error("out of memory loading '" + d.name + "'");
      std::memcpy(q, p, size_t(d.bytes()));
      owned_.emplace_back(q);
      ptrs_.push_back(q);
      total_ += size_t(d.bytes());
      continue;
    }
    if (!resident[ptrs_.size()]) {
      ptrs_.push_back(nullptr);
      continue;
    }
    const size_t bytes = (size_t(d.storage_bytes()) + 63) / 64 * 64;
    if ((d.init == InitKind::zeros || d.init == InitKind::none) && bytes >= kLazyBytes) {
      // zero pages from the kernel, each allocated when first written: a KV
      // cache pool holds in memory the blocks its sequences have reached
      void* z = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (z == MAP_FAILED)
        throw std::runtime_error("out of memory allocating " + std::to_string(bytes) + " bytes for '" + d.name + "'");
      mappings_.emplace_back(z, [bytes](void* q) { ::munmap(q, bytes); });
      ptrs_.push_back(z);
      total_ += bytes;
      continue;
    }
    void* p = std::aligned_alloc(64, bytes ? bytes : 64);
    if (!p) throw std::runtime_error("out of memory allocating " + std::to_string(bytes) + " bytes for '" + d.name + "'");
    owned_.emplace_back(p);
    ptrs_.push_back(p);
    total_ += bytes;
    initialise(d, p);
  }
}

void DataStore::reinitialise(std::int32_t data) {
  const DataDecl& d = dag_.data[size_t(data)];
  if (d.init == InitKind::file || !ptrs_[size_t(data)])
    throw std::logic_error("DataStore::reinitialise: '" + d.name + "' has no init= values held here");
  initialise(d, ptrs_[size_t(data)]);
}

TensorView DataStore::view(const DataRef& ref) const {
  const DataDecl& d = dag_.data[size_t(ref.data)];
  TensorView v;
  v.dtype = d.dtype;
  v.shape = dag_.ref_shape(ref);
  v.ld = d.ld;
  char* p = static_cast<char*>(base(ref.data));
  if (ref.tile < 0) {
    v.rows = d.rows, v.cols = d.cols;
  } else {
    const std::int64_t tr = ref.tile / d.ntile_c, tc = ref.tile % d.ntile_c;
    v.rows = d.tile_nrows(tr), v.cols = d.tile_ncols(tc);
    p += (d.tile_row0(tr) * d.ld + d.tile_col0(tc)) * std::int64_t(dtype_size(d.dtype));
  }
  v.data = p;
  return v;
}

}  // namespace ymlopt
