#include "ymlopt/scheduler/data_store.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
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

// The block of rows [r0, r0 + nr) and columns [c0, c0 + nc) of the tensor,
// element (r, c) at (r - r0) * ld + (c - c0); nr * ld elements are zeroed
// first. Values depend on the logical index r * cols + c only, so tiling and
// padding never change them.
struct Block {
  std::int64_t r0, nr, c0, nc, ld;
};

void initialise(const DataDecl& d, void* p, const Block& k) {
  const bool integral = d.dtype == DType::i8 || d.dtype == DType::i32;
  std::memset(p, 0, size_t(k.nr * k.ld) * dtype_size(d.dtype));  // zeros, and the padding
  auto each = [&](auto&& value) {
    for (std::int64_t r = k.r0; r < k.r0 + k.nr; ++r)
      for (std::int64_t c = k.c0; c < k.c0 + k.nc; ++c)
        store_value(p, d.dtype, (r - k.r0) * k.ld + (c - k.c0), value(r, c));
  };
  switch (d.init) {
    case InitKind::none:
    case InitKind::zeros:
    case InitKind::file: break;  // files are mapped or read by the DataStore, not here
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
      for (std::int64_t i = std::max(k.r0, k.c0); i < std::min(k.r0 + k.nr, k.c0 + k.nc); ++i)
        store_value(p, d.dtype, (i - k.r0) * k.ld + (i - k.c0), 1.0);
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

Block whole_block(const DataDecl& d) { return {0, d.rows, 0, d.cols, d.ld}; }
Block tile_block(const DataDecl& d, std::int64_t t) {
  const std::int64_t tr = t / d.ntile_c, tc = t % d.ntile_c;
  return {d.tile_row0(tr), d.tile_nrows(tr), d.tile_col0(tc), d.tile_ncols(tc), d.tile_ncols(tc)};
}

/// Copies the held tiles of a row-major tensor (ld == cols, as files are) from
/// the file with pread, a few MiB of whole rows at a time: the mapping's pages
/// are never touched, so they never count in this process's resident memory.
void read_tiles(const io::MappedTensorFile& f, const std::byte* src, const DataDecl& d,
                const std::vector<char>& held, const std::vector<void*>& dst) {
  const size_t es = dtype_size(d.dtype), row = size_t(d.cols) * es;
  const std::int64_t chunk_rows = std::max<std::int64_t>(1, std::int64_t((size_t(4) << 20) / std::max<size_t>(row, 1)));
  std::vector<std::byte> buf;
  for (std::int64_t tr = 0; tr < d.ntile_r; ++tr) {
    bool any = false;
    for (std::int64_t tc = 0; tc < d.ntile_c; ++tc) any |= bool(held[size_t(tr * d.ntile_c + tc)]);
    if (!any) continue;
    const std::int64_t r0 = d.tile_row0(tr), nr = d.tile_nrows(tr);
    for (std::int64_t r = r0; r < r0 + nr; r += chunk_rows) {
      const std::int64_t n = std::min(chunk_rows, r0 + nr - r);
      buf.resize(size_t(n) * row);
      f.read_at(src + size_t(r) * row, buf.data(), buf.size());
      for (std::int64_t tc = 0; tc < d.ntile_c; ++tc) {
        const size_t t = size_t(tr * d.ntile_c + tc);
        if (!held[t]) continue;
        const size_t w = size_t(d.tile_ncols(tc)) * es, c0 = size_t(d.tile_col0(tc)) * es;
        auto* out = static_cast<std::byte*>(dst[t]) + size_t(r - r0) * w;
        for (std::int64_t i = 0; i < n; ++i) std::memcpy(out + size_t(i) * w, buf.data() + size_t(i) * row + c0, w);
      }
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

/// populate() of the pages a rank reads of a tensor it holds whole: all of
/// them when it owns every tile (`owned` empty or all set), else the rows of
/// its own row tiles (contiguous in the file); a column tile spans every page,
/// so a tensor in column tiles owned in part is left to be read on demand.
/// Returns the bytes of what it owns (all, or its tiles'): what its tasks read.
size_t populate_owned(const std::byte* p, const DataDecl& d, const std::vector<char>& owned) {
  if (std::find(owned.begin(), owned.end(), 0) == owned.end()) {
    populate(p, size_t(d.bytes()));
    return size_t(d.bytes());
  }
  const size_t es = dtype_size(d.dtype), row = size_t(d.cols) * es;
  size_t n = 0;
  for (std::int64_t t = 0; t < d.ntiles(); ++t) {
    if (!owned[size_t(t)]) continue;
    const std::int64_t tr = t / d.ntile_c, tc = t % d.ntile_c;
    n += size_t(d.tile_nrows(tr) * d.tile_ncols(tc)) * es;
    if (d.ntile_c == 1) populate(p + size_t(d.tile_row0(tr)) * row, size_t(d.tile_nrows(tr)) * row);
  }
  return n;
}

/// Zero-initialised tensors from this size on are mapped, not allocated and cleared.
constexpr size_t kLazyBytes = size_t(1) << 21;

}  // namespace

DataStore::DataStore(const Dag& dag) : DataStore(dag, Residency::all(dag)) {}

void* DataStore::allocate(size_t bytes, bool lazy_zero, const std::string& name) {
  bytes = (bytes + 63) / 64 * 64;
  total_ += bytes;
  if (lazy_zero && bytes >= kLazyBytes) {
    // zero pages from the kernel, each allocated when first written: a KV
    // cache pool holds in memory the blocks its sequences have reached
    void* z = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (z == MAP_FAILED)
      throw std::runtime_error("out of memory allocating " + std::to_string(bytes) + " bytes for '" + name + "'");
    mappings_.emplace_back(z, [bytes](void* q) { ::munmap(q, bytes); });
    return z;
  }
  void* p = std::aligned_alloc(64, bytes ? bytes : 64);
  if (!p) throw std::runtime_error("out of memory allocating " + std::to_string(bytes) + " bytes for '" + name + "'");
  owned_.emplace_back(p);
  if (lazy_zero) std::memset(p, 0, bytes);
  return p;
}

DataStore::DataStore(const Dag& dag, const Residency& held) : dag_(dag) {
  std::map<std::string, std::shared_ptr<io::MappedTensorFile>> files;
  std::set<std::string> used;
  tiles_.resize(dag.data.size());
  for (size_t i = 0; i < dag.data.size(); ++i) {
    const DataDecl& d = dag.data[i];
    ptrs_.push_back(nullptr);
    if (!d.format.empty() || held.data[i] == Holding::none) continue;  // compressed: its companions hold the data
    const bool lazy = d.init == InitKind::zeros || d.init == InitKind::none;
    std::shared_ptr<io::MappedTensorFile> file;
    std::byte* p = nullptr;
    if (d.init == InitKind::file) {
      auto& f = files[d.src];
      if (!f) {
        f = std::make_shared<io::MappedTensorFile>(d.src);
        mappings_.push_back(f);
      }
      file = f;
      io::TensorInfo info;
      p = f->tensor(d.key, &info);
      // dtype and shape were checked at compile time; the file may have changed since
      std::int64_t numel = 1;
      for (auto x : info.shape) numel *= x;
      if (info.dtype != d.dtype || numel != d.rows * d.cols)
        throw std::runtime_error(d.src + ": '" + (d.key.empty() ? d.name : d.key) + "' is " +
                                 (info.dtype ? dtype_name(*info.dtype) : info.stored_dtype.c_str()) +
                                 shape_str(info.shape) + " but data '" + d.name + "' is declared " +
                                 dtype_name(d.dtype) + shape_str(d.shape) + " (the file changed since the check?)");
    }
    if (held.data[i] == Holding::tiles) {  // only the tiles it owns, each contiguous
      const std::vector<char>& mine = held.tiles[i];
      tiles_[i].assign(mine.size(), nullptr);
      for (size_t t = 0; t < mine.size(); ++t) {
        if (!mine[t]) continue;
        const Block k = tile_block(d, std::int64_t(t));
        tiles_[i][t] = allocate(size_t(k.nr * k.ld) * dtype_size(d.dtype), lazy && !file, d.name);
        if (!file && !lazy) initialise(d, tiles_[i][t], k);
      }
      if (file) read_tiles(*file, p, d, mine, tiles_[i]);
      continue;
    }
    if (file) {
      // the first tensor of a (file, key) is used in place; another one reading
      // the same bytes gets its own copy, so that writing one never changes the other
      const bool first_use = used.insert(d.src + '\n' + d.key).second;
      if (first_use && reinterpret_cast<std::uintptr_t>(p) % dtype_size(d.dtype) == 0) {
        mapped_ += populate_owned(p, d, held.tiles[i]);
        ptrs_[i] = p;
        continue;
      }
      // misaligned in the file, or already in use: copy to aligned memory (ld == cols for files)
      ptrs_[i] = allocate(size_t(d.bytes()), false, d.name);
      file->read_at(p, ptrs_[i], size_t(d.bytes()));
      continue;
    }
    ptrs_[i] = allocate(size_t(d.storage_bytes()), lazy, d.name);
    if (!lazy) initialise(d, ptrs_[i], whole_block(d));
  }
}

void DataStore::reinitialise(std::int32_t data) {
  const DataDecl& d = dag_.data[size_t(data)];
  const auto& tiles = tiles_[size_t(data)];
  if (d.init == InitKind::file || (!ptrs_[size_t(data)] && tiles.empty()))
    throw std::logic_error("DataStore::reinitialise: '" + d.name + "' has no init= values held here");
  if (ptrs_[size_t(data)]) initialise(d, ptrs_[size_t(data)], whole_block(d));
  for (size_t t = 0; t < tiles.size(); ++t)
    if (tiles[t]) initialise(d, tiles[t], tile_block(d, std::int64_t(t)));
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
    if (void* own = tile_base(ref.data, ref.tile)) {
      v.ld = v.cols;
      p = static_cast<char*>(own);
    } else if (p) {
      p += (d.tile_row0(tr) * d.ld + d.tile_col0(tc)) * std::int64_t(dtype_size(d.dtype));
    }
  }
  v.data = p;
  return v;
}

}  // namespace ymlopt
