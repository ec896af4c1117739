// The sparse weight formats' views and conversions (dense <-> CSR, BSR, 2:4);
// the kernels that run them are in sparse_linear.cpp.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "sparse/sparse_linear.hpp"

namespace ymlopt::sparse {

using std::int64_t;
using std::to_string;

namespace {

void check_range(const char* what, int64_t a, int64_t b, int64_t n) {
  if (a < 0 || b < a || b > n)
    throw std::out_of_range(std::string(what) + ": range [" + to_string(a) + ", " + to_string(b) +
                            ") outside [0, " + to_string(n) + ")");
}

std::int32_t to_i32(int64_t v, const char* what) {
  if (v > std::numeric_limits<std::int32_t>::max())
    throw std::length_error(std::string(what) + ": " + to_string(v) + " entries do not fit 32-bit indices");
  return static_cast<std::int32_t>(v);
}

void check_dense(const char* what, const float* w, int64_t n, int64_t k, int64_t ldw) {
  if (n < 0 || k < 0) throw std::invalid_argument(std::string(what) + ": negative dimension");
  if (n > 1 && ldw < k)
    throw std::invalid_argument(std::string(what) + ": ldw " + to_string(ldw) + " < k " + to_string(k));
  if (n > 0 && k > 0 && !w) throw std::invalid_argument(std::string(what) + ": null data");
  if (k > std::numeric_limits<std::int32_t>::max())
    throw std::length_error(std::string(what) + ": k does not fit 32-bit column indices");
}

}  // namespace

// ---- views ------------------------------------------------------------------

CsrWeight CsrWeight::rows(int64_t n0, int64_t n1) const {
  check_range("CsrWeight::rows", n0, n1, n);
  return {values, col, row_ptr + n0, n1 - n0, k};
}

BsrWeight BsrWeight::block_rows(int64_t b0, int64_t b1) const {
  check_range("BsrWeight::block_rows", b0, b1, bs > 0 ? n / bs : 0);
  return {values, block_col, block_row_ptr + b0, (b1 - b0) * bs, k, bs};
}

Nm24Weight Nm24Weight::rows(int64_t n0, int64_t n1) const {
  check_range("Nm24Weight::rows", n0, n1, n);
  return {values + n0 * values_ld, values_ld, index + n0 * index_ld, index_ld, n1 - n0, k};
}

// ---- conversions ------------------------------------------------------------

Csr to_csr(const float* w, int64_t n, int64_t k, int64_t ldw) {
  check_dense("to_csr", w, n, k, ldw);
  Csr c;
  c.n = n;
  c.k = k;
  c.row_ptr.reserve(static_cast<std::size_t>(n + 1));
  c.row_ptr.push_back(0);
  for (int64_t r = 0; r < n; ++r) {
    const float* wr = w + r * ldw;
    for (int64_t j = 0; j < k; ++j)
      if (wr[j] != 0.0f) {
        c.values.push_back(wr[j]);
        c.col.push_back(static_cast<std::int32_t>(j));
      }
    c.row_ptr.push_back(to_i32(static_cast<int64_t>(c.values.size()), "to_csr"));
  }
  return c;
}

Bsr to_bsr(const float* w, int64_t n, int64_t k, int64_t ldw, int64_t bs) {
  check_dense("to_bsr", w, n, k, ldw);
  if (bs < 1) throw std::invalid_argument("to_bsr: block size " + to_string(bs) + " must be >= 1");
  if (n % bs || k % bs)
    throw std::invalid_argument("to_bsr: " + to_string(n) + "x" + to_string(k) + " is not a multiple of the block size " +
                                to_string(bs));
  Bsr b;
  b.n = n;
  b.k = k;
  b.bs = bs;
  b.block_row_ptr.push_back(0);
  for (int64_t br = 0; br < n / bs; ++br) {
    for (int64_t bc = 0; bc < k / bs; ++bc) {
      bool any = false;
      for (int64_t r = 0; r < bs && !any; ++r)
        for (int64_t c = 0; c < bs && !any; ++c) any = w[(br * bs + r) * ldw + bc * bs + c] != 0.0f;
      if (!any) continue;
      b.block_col.push_back(static_cast<std::int32_t>(bc));
      for (int64_t r = 0; r < bs; ++r)
        for (int64_t c = 0; c < bs; ++c) b.values.push_back(w[(br * bs + r) * ldw + bc * bs + c]);
    }
    b.block_row_ptr.push_back(to_i32(static_cast<int64_t>(b.block_col.size()), "to_bsr"));
  }
  return b;
}

Nm24 to_nm24(const float* w, int64_t n, int64_t k, int64_t ldw) {
  check_dense("to_nm24", w, n, k, ldw);
  if (k % 8)
    throw std::invalid_argument("to_nm24: k = " + to_string(k) + " is not a multiple of 8 (two groups of 4 per index byte)");
  Nm24 z;
  z.n = n;
  z.k = k;
  z.values.assign(static_cast<std::size_t>(n * (k / 2)), 0.0f);
  z.index.assign(static_cast<std::size_t>(n * (k / 8)), 0);
  for (int64_t r = 0; r < n; ++r) {
    const float* wr = w + r * ldw;
    for (int64_t g = 0; g < k / 4; ++g) {
      int pos[4], cnt = 0;
      #pragma GCC unroll 16
      for (int i = 0; i < 4; ++i)
        if (wr[4 * g + i] != 0.0f) {
          if (cnt == 2)
            throw std::invalid_argument("to_nm24: row " + to_string(r) + ", group " + to_string(g) + " (columns " +
                                        to_string(4 * g) + ".." + to_string(4 * g + 3) +
                                        ") has more than 2 nonzeros: not 2:4 sparse");
          pos[cnt++] = i;
        }
      // Fewer than 2 nonzeros: pad with the lowest unused positions (value 0).
      for (int i = 0; i < 4 && cnt < 2; ++i)
        if (cnt == 0 || pos[0] != i) {
          if (cnt == 1 && pos[0] > i) {
            pos[1] = pos[0];
            pos[0] = i;
          } else {
            pos[cnt] = i;
          }
          ++cnt;
        }
      z.values[static_cast<std::size_t>(r * (k / 2) + 2 * g)] = wr[4 * g + pos[0]];
      z.values[static_cast<std::size_t>(r * (k / 2) + 2 * g + 1)] = wr[4 * g + pos[1]];
      const unsigned nib = static_cast<unsigned>(pos[0]) | (static_cast<unsigned>(pos[1]) << 2);
      z.index[static_cast<std::size_t>(r * (k / 8) + g / 2)] |= static_cast<std::uint8_t>(nib << (4 * (g & 1)));
    }
  }
  return z;
}

void to_dense(const CsrWeight& w, float* out, int64_t ldw) {
  for (int64_t r = 0; r < w.n; ++r) {
    std::fill(out + r * ldw, out + r * ldw + w.k, 0.0f);
    for (int64_t p = w.row_ptr[r]; p < w.row_ptr[r + 1]; ++p) out[r * ldw + w.col[p]] += w.values[p];
  }
}

void to_dense(const BsrWeight& w, float* out, int64_t ldw) {
  const int64_t bs = w.bs;
  for (int64_t r = 0; r < w.n; ++r) std::fill(out + r * ldw, out + r * ldw + w.k, 0.0f);
  for (int64_t br = 0; bs > 0 && br < w.n / bs; ++br)
    for (int64_t q = w.block_row_ptr[br]; q < w.block_row_ptr[br + 1]; ++q)
      for (int64_t r = 0; r < bs; ++r)
        for (int64_t c = 0; c < bs; ++c)
          out[(br * bs + r) * ldw + static_cast<int64_t>(w.block_col[q]) * bs + c] += w.values[q * bs * bs + r * bs + c];
}

void to_dense(const Nm24Weight& w, float* out, int64_t ldw) {
  for (int64_t r = 0; r < w.n; ++r) {
    std::fill(out + r * ldw, out + r * ldw + w.k, 0.0f);
    const float* val = w.values + r * w.values_ld;
    const std::uint8_t* idx = w.index + r * w.index_ld;
    for (int64_t p = 0; p < w.k / 2; ++p) out[r * ldw + Nm24Weight::column(idx, p)] += val[p];
  }
}

}  // namespace ymlopt::sparse
