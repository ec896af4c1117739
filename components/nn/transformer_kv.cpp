// The KV cache of generation (transformer_internal.hpp): nn.positions turns a
// position counter into the positions of a step's rows, nn.kv_append writes the
// step's keys or values at those rows of a cache, and nn.kv_attention attends
// each query to the cache rows up to its own position. Prefill (the prompt's
// rows) and each decode step (one row) are the same tasks with different row
// counts; the positions are read at run time, so one compiled loop body serves
// every step.
//
// A batch of sequences (ports `seq` and `table`) keeps its caches in blocks of
// `block` rows from a pool: nn.kv_blocks gives a sequence a block when it
// reaches one and takes its blocks back once it has finished, so sequences of
// different lengths hold what they use, not the longest context each. Row r of
// a step belongs to sequence seq[r]; its position p is at cache row
// table[seq[r], p / block] * block + p % block. A negative position marks an
// idle row (a finished sequence's): not stored, attended to nothing (y = 0).
//
// A sliding window (arg `window`, Mistral's): position p attends positions
// p - window < j <= p, and nn.kv_blocks gives back the blocks that all of a
// step's queries have passed, so a sequence holds about window / block + 1
// blocks however long it runs.
#include "nn/transformer_internal.hpp"

#include <immintrin.h>

#include <cstring>

#include <ymlopt/half.hpp>

namespace ymlopt::transformer {

namespace {

const std::int32_t* ints(const TensorView& v) { return static_cast<const std::int32_t*>(v.data); }

/// "" when port i holds one i32 position per row of port `rows_of`.
std::string one_position_per_row(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i,
                                 std::size_t rows_of) {
  if (num_ids(p[i]) == p[rows_of].rows) return "";
  return "port '" + s[i].name + "' is " + dims(p[i]) + " but '" + s[rows_of].name + "' has " +
         to_string(p[rows_of].rows) + " rows (one position each)";
}

/// Throws unless every position is a row of a cache of `ctx` rows.
void check_positions(const TensorView& pos, int64_t n, int64_t ctx, const char* what) {
  const std::int32_t* p = ints(pos);
  for (int64_t r = 0; r < n; ++r)
    if (p[r] < 0 || p[r] >= ctx)
      throw KernelError("position " + to_string(p[r]) + " (row " + to_string(r) + ") is outside the " + what +
                        "'s " + to_string(ctx) + " rows: the context is full (give the cache more rows)");
}

/// A batch's cache rows (ports `seq` and `table`, arg `block`): where position
/// p of row r's sequence lives. Unpaged (no table): row p itself.
struct Paging {
  const std::int32_t* seq = nullptr;
  const std::int32_t* table = nullptr;
  int64_t ld = 0, per = 0, seqs = 0, block = 0;

  Paging(const TensorView& s, const TensorView& t, int64_t bs) {
    if (!t.bound()) return;
    seq = ints(s);
    table = ints(t);
    ld = t.ld;
    per = t.cols;
    seqs = t.rows;
    block = bs;
  }
  bool paged() const { return table != nullptr; }
  int64_t sequence(int64_t r) const { return seq ? seq[r] : 0; }
  /// The cache row of position p of sequence s (its block must be given).
  int64_t row(int64_t s, int64_t p, int64_t cache_rows) const {
    if (!table) return p;
    if (s < 0 || s >= seqs) throw KernelError("port 'seq' holds " + to_string(s) + ": the table has " + to_string(seqs) + " sequences");
    if (p / block >= per)
      throw KernelError("position " + to_string(p) + " is past the table's " + to_string(per) + " blocks of " +
                        to_string(block) + " tokens");
    const std::int32_t b = table[s * ld + p / block];
    if (b < 0 || (int64_t(b) + 1) * block > cache_rows)
      throw KernelError("sequence " + to_string(s) + " has " + (b < 0 ? std::string("no block") : "block " + to_string(b)) +
                        " for position " + to_string(p) + (b < 0 ? " (nn.kv_blocks gives them)" : ": past the cache"));
    return int64_t(b) * block + p % block;
  }
};

/// "" when ports seq (i) and table (i + 1) are both bound or both not, with
/// arg `block` and the cache's rows (port c) a whole number of blocks.
std::string check_paging(const std::vector<PortSpec>& s, std::span<const TensorView> p, const Args& a, std::size_t i,
                         std::size_t c, std::size_t rows_of) {
  if (p[i].bound() != p[i + 1].bound()) return "ports 'seq' and 'table' go together (a batch in blocks): bind both";
  if (!p[i].bound()) return "";
  if (auto m = first_error({positive_param(a, "block"), one_position_per_row(s, p, i, rows_of)}); !m.empty()) return m;
  if (p[c].rows % a.get_int("block") != 0)
    return "port '" + s[c].name + "' has " + to_string(p[c].rows) + " rows: not a whole number of blocks of " +
           to_string(a.get_int("block"));
  return "";
}

}  // namespace

// ============================================================ nn.positions

const std::vector<PortSpec>& positions_ports() {
  static const std::vector<PortSpec> p = {
      {"pos", Access::read_write, {DType::i32}, false, 1,
       "tokens already in the cache [1] (a batch: per sequence [sequences]); advanced by the rows"},
      {"positions", Access::write, {DType::i32}, false, 2, "the positions of this step's rows [rows]: pos, pos + 1, ..."},
      {"seq", Access::read, {DType::i32}, true, 1, "a batch: the sequence of each row [rows]"},
      {"alive", Access::read, {DType::i32}, true, 1,
       "a batch: 1 while a sequence generates [sequences]; a finished one's rows get position -1"},
      {"lookup", Access::write, {DType::i32}, true, 1,
       "the positions with idle rows at 0 [rows]: ids for a position-embedding table (GPT-2's wpe)"},
  };
  return p;
}

std::string positions_check(const TaskShape& t) {
  const auto& s = positions_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (num_ids(p[1]) < 0) return "port 'positions' is " + dims(p[1]) + ": expected shape [rows] or [rows, 1]";
  if (!p[2].bound()) {
    if (p[3].bound() || p[4].bound()) return "ports 'alive' and 'lookup' are a batch's: bind 'seq' too";
    if (p[0].rows * p[0].cols != 1) return "port 'pos' is " + dims(p[0]) + ": a counter of one element";
    return "";
  }
  if (num_ids(p[2]) != num_ids(p[1]))
    return "port 'seq' is " + dims(p[2]) + " but 'positions' is " + dims(p[1]) + ": a sequence per row";
  const int64_t b = p[0].rows * p[0].cols;
  if (p[4].bound() && num_ids(p[4]) != num_ids(p[1]))
    return "port 'lookup' is " + dims(p[4]) + " but 'positions' is " + dims(p[1]) + ": one per row";
  if (p[3].bound() && p[3].rows * p[3].cols != b)
    return "port 'alive' is " + dims(p[3]) + " but 'pos' counts " + to_string(b) + " sequences";
  return "";
}

Cost positions_cost(const TaskShape& t) { return kutil::io_cost(positions_ports(), t, 0); }

void positions_cpu(KernelContext& ctx) {
  kutil::validate(ctx, positions_ports(), positions_check);
  auto* pos = static_cast<std::int32_t*>(ctx.port(0).data);
  auto* out = static_cast<std::int32_t*>(ctx.port(1).data);
  const int64_t n = num_ids(ctx.port(1)), b = ctx.port(0).rows * ctx.port(0).cols;
  const std::int32_t* seq = ctx.port(2).bound() ? ints(ctx.port(2)) : nullptr;
  const std::int32_t* alive = ctx.port(3).bound() ? ints(ctx.port(3)) : nullptr;
  auto* lookup = ctx.port(4).bound() ? static_cast<std::int32_t*>(ctx.port(4).data) : nullptr;
  for (int64_t s = 0; s < b; ++s)
    if (pos[s] < 0) throw KernelError("port 'pos' holds " + to_string(pos[s]) + ": a count of tokens is >= 0");
  for (int64_t r = 0; r < n; ++r) {
    const int64_t s = seq ? seq[r] : 0;
    if (s < 0 || s >= b)
      throw KernelError("port 'seq' holds " + to_string(s) + " at row " + to_string(r) + ": the batch has " +
                        to_string(b) + " sequences");
    if (alive && !alive[s]) {
      out[r] = -1;
    } else {
      if (pos[s] == INT32_MAX) throw KernelError("port 'pos' would pass 2^31 - 1");
      out[r] = pos[s]++;
    }
    if (lookup) lookup[r] = std::max(out[r], 0);
  }
}

// ============================================================ nn.kv_blocks

const std::vector<PortSpec>& kv_blocks_ports() {
  static const std::vector<PortSpec> p = {
      {"positions", Access::read, {DType::i32}, false, 1, "this step's positions [rows] (nn.positions; < 0: idle)"},
      {"seq", Access::read, {DType::i32}, false, 1, "the sequence of each row [rows]"},
      {"alive", Access::read, {DType::i32}, false, 1, "1 while a sequence generates [sequences]; 0: its blocks go back"},
      {"table", Access::read_write, {DType::i32}, false, 2,
       "the block of each sequence's block of positions [sequences, blocks per sequence]; -1: none"},
      {"pool", Access::read_write, {DType::i32}, false, 1,
       "[2 + blocks]: blocks in use, the most in use at once, then 1 per block in use (zeros: all free)"},
  };
  return p;
}

std::string kv_blocks_check(const TaskShape& t) {
  const auto& s = kv_blocks_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = positive_param(t.args, "block"); !m.empty()) return m;
  if (num_ids(p[0]) < 0 || num_ids(p[1]) != num_ids(p[0]))
    return "port 'seq' is " + dims(p[1]) + " but 'positions' is " + dims(p[0]) + ": a sequence per row";
  if (p[2].rows * p[2].cols != p[3].rows)
    return "port 'table' is " + dims(p[3]) + " but 'alive' counts " + to_string(p[2].rows * p[2].cols) + " sequences";
  if (p[4].rows * p[4].cols < 3) return "port 'pool' is " + dims(p[4]) + ": 2 counters and one entry per block";
  return nonneg_param(t.args, "window");
}

Cost kv_blocks_cost(const TaskShape& t) { return kutil::io_cost(kv_blocks_ports(), t, 0); }

void kv_blocks_cpu(KernelContext& ctx) {
  kutil::validate(ctx, kv_blocks_ports(), kv_blocks_check);
  const std::int32_t *pos = ints(ctx.port(0)), *seq = ints(ctx.port(1)), *alive = ints(ctx.port(2));
  const TensorView& tv = ctx.port(3);
  auto* table = static_cast<std::int32_t*>(tv.data);
  auto* pool = static_cast<std::int32_t*>(ctx.port(4).data);
  const int64_t seqs = tv.rows, per = tv.cols, blocks = ctx.port(4).rows * ctx.port(4).cols - 2, bs = ctx.arg_int("block");
  std::int32_t* used = pool + 2;
  const int64_t rows = num_ids(ctx.port(0)), window = ctx.arg_int("window");
  for (int64_t r = 0; r < rows; ++r)
    if (pos[r] >= 0 && (seq[r] < 0 || seq[r] >= seqs))
      throw KernelError("port 'seq' holds " + to_string(seq[r]) + " at row " + to_string(r) + ": the batch has " +
                        to_string(seqs) + " sequences");
  // a sequence's first position in this step: with a window, its blocks
  // before position first - window + 1 are never attended again
  std::vector<int64_t> first(std::size_t(seqs), -1);
  for (int64_t r = 0; r < rows; ++r)
    if (pos[r] >= 0) {
      int64_t& f = first[std::size_t(seq[r])];
      f = f < 0 ? pos[r] : std::min<int64_t>(f, pos[r]);
    }
  for (int64_t s = 0; s < seqs; ++s) {  // blocks no query reaches again go back to the pool
    const int64_t f = first[std::size_t(s)];
    const int64_t drop = !alive[s] ? per : f >= 0 ? window_first(f, window) / bs : 0;
    for (int64_t j = 0; j < std::min(drop, per); ++j) {
      std::int32_t& b = table[s * tv.ld + j];
      if (b < 0) continue;
      if (b >= blocks || !used[b]) throw KernelError("port 'table' names block " + to_string(b) + ", not one in use");
      used[b] = 0;
      --pool[0];
      b = -1;
    }
  }
  int64_t next = 0;  // the lowest block that may be free
  for (int64_t r = 0; r < rows; ++r) {
    if (pos[r] < 0) continue;
    const int64_t j = pos[r] / bs;
    if (j >= per)
      throw KernelError("position " + to_string(pos[r]) + " of sequence " + to_string(seq[r]) + " is past its " +
                        to_string(per) + " blocks of " + to_string(bs) + " tokens: the context is full");
    std::int32_t& b = table[seq[r] * tv.ld + j];
    if (b >= 0) continue;
    while (next < blocks && used[next]) ++next;
    if (next == blocks)
      throw KernelError("the KV cache pool is full: its " + to_string(blocks) + " blocks of " + to_string(bs) +
                        " tokens are in use and sequence " + to_string(seq[r]) + " needs one for position " +
                        to_string(pos[r]) + " (give the pool more blocks)");
    used[next] = 1;
    b = std::int32_t(next);
    pool[1] = std::max(pool[1], ++pool[0]);
  }
  ctx.report("blocks_in_use", pool[0]);
}

// ============================================================ cache storage
// A cache holds its rows in the activations' dtype, in f16 (f32 activations),
// or in int8 with one f32 scale per row and head: code = round(x / s),
// s = max|x| / 127 over the head's dh values (symmetric, per token and head).

namespace {

bool cache_dtype_ok(DType cache, DType act) { return cache == act || cache == DType::i8 || (cache == DType::f16 && act == DType::f32); }

/// "" when `cache` (port c) can store rows of dtype `act` with the scale port sc
/// bound exactly when it is int8, one scale per row and head.
std::string check_cache(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t c, std::size_t sc,
                        DType act, int64_t heads) {
  if (!cache_dtype_ok(p[c].dtype, act))
    return "port '" + s[c].name + "' has dtype " + dtype_name(p[c].dtype) + ": a cache of " + dtype_name(act) +
           " rows is " + dtype_name(act) + ", f16 (f32 rows) or i8 (with scales)";
  const bool i8 = p[c].dtype == DType::i8;
  if (i8 && !p[sc].bound()) return "port '" + s[c].name + "' is i8: bind '" + s[sc].name + "' (a scale per row and head)";
  if (!i8 && p[sc].bound())
    return "port '" + s[sc].name + "' is bound but '" + s[c].name + "' is " + dtype_name(p[c].dtype) + ", not i8";
  if (i8 && (p[sc].rows != p[c].rows || p[sc].cols != heads))
    return "port '" + s[sc].name + "' is " + dims(p[sc]) + " but expected " + rc(p[c].rows, heads) + " (a scale per row of '" +
           s[c].name + "' and head)";
  if (i8 && p[c].cols % heads != 0)
    return "port '" + s[c].name + "' is " + dims(p[c]) + ": " + to_string(p[c].cols) + " columns are not a multiple of " +
           to_string(heads) + " heads";
  return "";
}

/// Stores row `x` (n values, `heads` heads) as cache row `dst` (its scales at `scale`).
template <class T> void store_row(const T* x, int64_t n, int64_t heads, const TensorView& cache, int64_t row, float* scale) {
  char* dst = static_cast<char*>(cache.data) + std::size_t(row) * std::size_t(cache.ld) * dtype_size(cache.dtype);
  switch (cache.dtype) {
    case DType::f16: {
      auto* d = reinterpret_cast<std::uint16_t*>(dst);
      for (int64_t j = 0; j < n; ++j) d[j] = half::f16_bits_from_double(double(x[j]));
      break;
    }
    case DType::i8: {
      auto* d = reinterpret_cast<std::int8_t*>(dst);
      const int64_t dh = n / heads;
      for (int64_t h = 0; h < heads; ++h) {
        double amax = 0;
        for (int64_t j = h * dh; j < (h + 1) * dh; ++j) amax = std::max(amax, std::fabs(double(x[j])));
        const double sc = amax / 127.0;
        scale[h] = float(sc);
        for (int64_t j = h * dh; j < (h + 1) * dh; ++j)
          d[j] = sc > 0 ? std::int8_t(std::clamp(std::nearbyint(double(x[j]) / double(float(sc))), -127.0, 127.0)) : 0;
      }
      break;
    }
    default: std::memcpy(dst, x, std::size_t(n) * sizeof(T));
  }
}

/// Positions [first, end) of sequence s in a cache, in T: as stored (unpaged,
/// T), or copied from their blocks, widened (f16) or codes times their scales
/// (i8) into `out` [end - first, cols] (leading dimension cols).
template <class T>
const T* cache_rows(const TensorView& cache, const TensorView& scale, int64_t first, int64_t end, int64_t heads,
                    const Paging& pg, int64_t s, std::vector<T>& out, int64_t* ld) {
  if (cache.dtype == dtype_of<T>() && !pg.paged()) {
    *ld = ld_of(cache);
    return static_cast<const T*>(cache.data) + first * *ld;
  }
  const int64_t n = cache.cols, dh = n / heads;
  out.resize(std::size_t((end - first) * n));
  *ld = n;
  for (int64_t r = 0; r < end - first; ++r) {
    T* o = out.data() + r * n;
    const int64_t at = pg.row(s, first + r, cache.rows);
    if (cache.dtype == dtype_of<T>()) {
      std::memcpy(o, static_cast<const T*>(cache.data) + at * cache.ld, std::size_t(n) * sizeof(T));
    } else if (cache.dtype == DType::f16) {
      const auto* c = static_cast<const std::uint16_t*>(cache.data) + at * cache.ld;
      widen_f16(c, n, o);
    } else {
      const auto* c = static_cast<const std::int8_t*>(cache.data) + at * cache.ld;
      const float* sc = static_cast<const float*>(scale.data) + at * scale.ld;
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t j = h * dh; j < (h + 1) * dh; ++j) o[j] = T(c[j]) * T(sc[h]);
    }
  }
  return out.data();
}

}  // namespace

// f16 -> float, 8 at a time with F16C where the CPU has it (exact either way).
__attribute__((target("avx,f16c"))) static void widen_f16_f16c(const std::uint16_t* c, int64_t n, float* o) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(o + j, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + j))));
  for (; j < n; ++j) o[j] = float(half::f16_bits_to_double(c[j]));
}

void widen_f16_scalar(const std::uint16_t* c, int64_t n, float* o) {
  for (int64_t j = 0; j < n; ++j) o[j] = float(half::f16_bits_to_double(c[j]));
}

void widen_f16(const std::uint16_t* c, int64_t n, float* o) {
  static const bool f16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  if (f16c) widen_f16_f16c(c, n, o);
  else widen_f16_scalar(c, n, o);
}

void widen_f16(const std::uint16_t* c, int64_t n, double* o) {
  for (int64_t j = 0; j < n; ++j) o[j] = half::f16_bits_to_double(c[j]);
}

// ============================================================ nn.kv_append

const std::vector<PortSpec>& kv_append_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read, kFloat, false, 2, "this step's keys or values [rows, width]"},
      {"positions", Access::read, {DType::i32}, false, 2, "the cache row of each row of x [rows]"},
      {"cache", Access::read_write, {DType::f32, DType::f64, DType::f16, DType::i8}, false, 2,
       "the cache [context, width] in x's dtype, f16 or i8; only the rows named are written"},
      {"scale", Access::read_write, {DType::f32}, true, 2, "i8 cache: one scale per row and head [context, heads]"},
      {"seq", Access::read, {DType::i32}, true, 1, "a batch: the sequence of each row [rows]"},
      {"table", Access::read, {DType::i32}, true, 2,
       "a batch: each sequence's blocks [sequences, blocks per sequence] (nn.kv_blocks); the cache is their pool"},
  };
  return p;
}

std::string kv_append_check(const TaskShape& t) {
  const auto& s = kv_append_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::float_dtype(s, p, 0), positive_param(t.args, "heads"), one_position_per_row(s, p, 1, 0)});
      !m.empty())
    return m;
  if (auto m = check_cache(s, p, 2, 3, p[0].dtype, t.args.get_int("heads")); !m.empty()) return m;
  if (p[2].cols != p[0].cols)
    return "port 'cache' is " + dims(p[2]) + " but 'x' is " + dims(p[0]) + ": the widths must match";
  if (!p[4].bound() && p[0].rows > p[2].rows)
    return "port 'x' has " + to_string(p[0].rows) + " rows but the cache holds " + to_string(p[2].rows) +
           ": the prompt is longer than the context";
  return check_paging(s, p, t.args, 4, 2, 0);
}

Cost kv_append_cost(const TaskShape& t) {
  Cost c;
  if (t.ports.size() != kv_append_ports().size()) return c;
  // x read, its rows of the cache (and their scales) written
  c.bytes = kutil::bytes_of(t.ports[0]) + kutil::bytes_of(t.ports[1]) +
            double(t.ports[0].rows) * double(t.ports[0].cols) * double(dtype_size(t.ports[2].dtype)) +
            (t.ports[3].bound() ? double(t.ports[0].rows) * double(t.ports[3].cols) * 4 : 0);
  return c;
}

void kv_append_cpu(KernelContext& ctx) {
  kutil::validate(ctx, kv_append_ports(), kv_append_check);
  const TensorView &x = ctx.port(0), &pos = ctx.port(1), &cache = ctx.port(2), &scale = ctx.port(3);
  const Paging pg(ctx.port(4), ctx.port(5), ctx.arg_int("block"));
  if (!pg.paged()) check_positions(pos, x.rows, cache.rows, "cache");
  const std::int32_t* p = ints(pos);
  const int64_t heads = ctx.arg_int("heads");
  kutil::dispatch_float(x.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    for (int64_t r = 0; r < x.rows; ++r) {
      if (p[r] < 0 && pg.paged()) continue;  // an idle row
      const int64_t at = pg.row(pg.sequence(r), p[r], cache.rows);
      store_row(row<T>(x, r), x.cols, heads, cache, at,
                scale.bound() ? static_cast<float*>(scale.data) + std::size_t(at) * std::size_t(scale.ld) : nullptr);
    }
  });
}

// ============================================================ nn.kv_attention

const std::vector<PortSpec>& kv_attention_ports() {
  static const std::vector<PortSpec> p = {
      {"q", Access::read, kFloat, false, 2, "this step's queries [rows, heads*dh]"},
      {"k", Access::read, {DType::f32, DType::f64, DType::f16, DType::i8}, false, 2,
       "the key cache [context, kv_heads*dh]: q's dtype, f16 or i8 (nn.kv_append's storage)"},
      {"v", Access::read, {DType::f32, DType::f64, DType::f16, DType::i8}, false, 2,
       "the value cache [context, kv_heads*dh], stored like k or not"},
      {"positions", Access::read, {DType::i32}, false, 2,
       "the position of each query [rows]: it attends cache rows 0 .. its position"},
      {"y", Access::write, kFloat, false, 2, "output [rows, heads*dh]"},
      {"k_scale", Access::read, {DType::f32}, true, 2, "i8 key cache: its scales [context, kv_heads]"},
      {"v_scale", Access::read, {DType::f32}, true, 2, "i8 value cache: its scales [context, kv_heads]"},
      {"seq", Access::read, {DType::i32}, true, 1, "a batch: the sequence of each query [rows]"},
      {"table", Access::read, {DType::i32}, true, 2,
       "a batch: each sequence's blocks [sequences, blocks per sequence]; k and v are their pool"},
  };
  return p;
}

namespace {

struct KvDims {
  int64_t rows, heads, kv, dh, ctx;
};

KvDims kv_dims(const TaskShape& t) {
  KvDims d{};
  d.rows = t.ports[0].rows;
  d.heads = std::max<int64_t>(t.args.get_int("heads"), 1);
  d.kv = t.args.get_int("kv_heads") > 0 ? t.args.get_int("kv_heads") : d.heads;
  d.dh = t.ports[0].cols / d.heads;
  d.ctx = t.ports[1].rows;
  return d;
}

}  // namespace

std::string kv_attention_check(const TaskShape& t) {
  const auto& s = kv_attention_ports();
  const auto& p = t.ports;
  const Args& a = t.args;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::float_dtype(s, p, 0), kutil::same_dtype(s, p, 4, 0), positive_param(a, "heads"),
                            nonneg_param(a, "kv_heads"), one_position_per_row(s, p, 3, 0)});
      !m.empty())
    return m;
  const int64_t heads = a.get_int("heads");
  const int64_t kv = a.get_int("kv_heads") > 0 ? a.get_int("kv_heads") : heads;
  if (auto m = first_error({check_cache(s, p, 1, 5, p[0].dtype, kv), check_cache(s, p, 2, 6, p[0].dtype, kv)}); !m.empty())
    return m;
  if (heads % kv != 0)
    return "param 'kv_heads' is " + to_string(kv) + ": heads=" + to_string(heads) + " must be a multiple of kv_heads";
  if (p[0].cols % heads != 0 || p[0].cols == 0)
    return "port 'q' is " + dims(p[0]) + ": " + to_string(p[0].cols) + " columns are not a positive multiple of heads=" +
           to_string(heads);
  const KvDims d = kv_dims(t);
  const std::string kvw = "kv_heads=" + to_string(kv) + " x head dim " + to_string(d.dh);
  if (auto m = first_error({expect_shape(s, p, 1, d.ctx, kv * d.dh, kvw), expect_shape(s, p, 2, d.ctx, kv * d.dh, kvw),
                            kutil::same_shape(s, p, 4, 0)});
      !m.empty())
    return m;
  if (a.get_float("scale") < 0 || !std::isfinite(a.get_float("scale")))
    return "param 'scale' is " + a.get("scale").text + ": must be finite and >= 0 (0: 1/sqrt(head dim))";
  if (auto m = nonneg_param(a, "window"); !m.empty()) return m;
  return check_paging(s, p, a, 7, 1, 0);
}

constexpr int64_t kKvQueryBlock = 128;

Cost kv_attention_cost(const TaskShape& t) {
  if (t.ports.size() != kv_attention_ports().size() || t.args.get_int("heads") < 1) return {};
  const KvDims d = kv_dims(t);
  // the positions are known at run time only: priced as a full cache (or window)
  const int64_t w = t.args.get_int("window");
  const double keys = double(w > 0 ? std::min(w + d.rows - 1, d.ctx) : d.ctx), es = double(dtype_size(t.ports[0].dtype));
  const double ks = double(dtype_size(t.ports[1].dtype)), vs = double(dtype_size(t.ports[2].dtype));
  Cost c;
  c.flops = double(d.rows) * double(d.heads) * keys * (4 * double(d.dh) + 5);
  c.bytes = es * 2 * double(d.rows) * double(d.heads * d.dh) + (ks + vs) * keys * double(d.kv * d.dh);
  c.extra_bytes = es * double(std::min(d.rows, kKvQueryBlock)) * keys;
  return c;
}

void kv_attention_cpu(KernelContext& ctx) {
  kutil::validate(ctx, kv_attention_ports(), kv_attention_check);
  const TensorView &q = ctx.port(0), &k = ctx.port(1), &v = ctx.port(2), &pos = ctx.port(3), &y = ctx.port(4),
                   &ks = ctx.port(5), &vs = ctx.port(6);
  const KvDims d = kv_dims(TaskShape{ctx.ports(), ctx.args()});
  if (d.rows == 0) return;
  const Paging pg(ctx.port(7), ctx.port(8), ctx.arg_int("block"));
  if (!pg.paged()) check_positions(pos, d.rows, d.ctx, "key cache");
  const double sp = ctx.arg_float("scale");
  const double scale = sp > 0 ? sp : 1.0 / std::sqrt(double(d.dh));
  const std::int32_t* p = ints(pos);
  const int64_t group = d.heads / d.kv, bq = std::min(d.rows, kKvQueryBlock), window = ctx.arg_int("window");
  kutil::dispatch_float(q.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    std::vector<T> sc, kw, vw;
    std::vector<double> inv(static_cast<std::size_t>(bq));
    std::vector<int64_t> lo(static_cast<std::size_t>(bq)), lim(static_cast<std::size_t>(bq));
    const int64_t ldq = ld_of(q), ldy = ld_of(y);
    // runs of consecutive rows of one sequence (unpaged: all rows are one)
    for (int64_t r0 = 0, r1 = 0; r0 < d.rows; r0 = r1) {
      const int64_t s = pg.sequence(r0);
      int64_t least = INT64_MAX, most = 0;
      bool idle = false;
      for (r1 = r0; r1 < d.rows && pg.sequence(r1) == s; ++r1) {
        idle = idle || p[r1] < 0;
        least = std::min(least, window_first(p[r1], window));
        most = std::max<int64_t>(most, int64_t(p[r1]) + 1);
      }
      if (idle) {  // a finished sequence's rows (nn.positions gives all of them -1)
        for (int64_t r = r0; r < r1; ++r) std::fill_n(static_cast<T*>(y.data) + r * ldy, y.cols, T(0));
        continue;
      }
      // the cache rows the run reads, [least, most), in T (gathered from blocks, widened or dequantized)
      int64_t ldk = 0, ldv = 0;
      const T* K = cache_rows<T>(k, ks, least, most, d.kv, pg, s, kw, &ldk);
      const T* V = cache_rows<T>(v, vs, least, most, d.kv, pg, s, vw, &ldv);
      sc.resize(static_cast<std::size_t>(bq * (most - least)));
      for (int64_t i0 = r0; i0 < r1; i0 += bq) {
        const int64_t nq = std::min(bq, r1 - i0);
        int64_t nk = 0;
        for (int64_t r = 0; r < nq; ++r) {
          lo[static_cast<std::size_t>(r)] = window_first(p[i0 + r], window) - least;
          lim[static_cast<std::size_t>(r)] = p[i0 + r] + 1 - least;
          nk = std::max(nk, lim[static_cast<std::size_t>(r)]);
        }
        for (int64_t h = 0; h < d.heads; ++h) {
          const int64_t g = h / group;
          attend_block(static_cast<const T*>(q.data) + i0 * ldq + h * d.dh, ldq, K + g * d.dh, ldk, V + g * d.dh, ldv,
                       static_cast<T*>(y.data) + i0 * ldy + h * d.dh, ldy, nq, nk, d.dh, window > 0 ? lo.data() : nullptr,
                       lim.data(), scale, sc.data(), inv.data());
        }
      }
    }
  });
}

}  // namespace ymlopt::transformer
