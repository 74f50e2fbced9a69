// SPDX-License-Identifier: Apache-2.0
// The host side of the sparse layer (csr.hpp): assembly, canonical form, shards.
#include <backend/sparse/csr.hpp>

#include <algorithm>
#include <climits>
#include <numeric>
#include <string>

namespace tessera::detail::sparse {
namespace {

std::string entry(std::size_t k) { return "entry " + std::to_string(k); }

// Sorts each row's entries by column (stable: duplicates keep their input order) and sums
// duplicates, in place over a CSR whose rows are grouped but not sorted.
template <class T>
void sort_and_sum(host_csr<T>& a) {
  std::vector<std::int64_t> perm;
  std::vector<std::int64_t> cols;
  std::vector<T> vals;
  std::int64_t out = 0;
  std::int64_t start = 0;
  for (std::int64_t i = 0; i < a.m; ++i) {
    const std::int64_t b = start, e = a.indptr[i + 1];
    start = e;
    a.indptr[i] = out;
    if (e == b) continue;
    bool sorted = true;
    for (std::int64_t k = b + 1; k < e && sorted; ++k) sorted = a.indices[k - 1] < a.indices[k];
    if (sorted) {
      for (std::int64_t k = b; k < e; ++k, ++out) a.indices[out] = a.indices[k], a.data[out] = a.data[k];
      continue;
    }
    perm.resize(static_cast<std::size_t>(e - b));
    std::iota(perm.begin(), perm.end(), b);
    std::stable_sort(perm.begin(), perm.end(), [&](std::int64_t x, std::int64_t y) { return a.indices[x] < a.indices[y]; });
    cols.clear();
    vals.clear();
    for (std::int64_t p : perm) {
      if (!cols.empty() && cols.back() == a.indices[p]) {
        vals.back() += a.data[p];
      } else {
        cols.push_back(a.indices[p]);
        vals.push_back(a.data[p]);
      }
    }
    for (std::size_t k = 0; k < cols.size(); ++k, ++out) a.indices[out] = cols[k], a.data[out] = vals[k];
  }
  a.indptr[a.m] = out;
  a.indices.resize(static_cast<std::size_t>(out));
  a.data.resize(static_cast<std::size_t>(out));
}

void check_shape(std::int64_t m, std::int64_t n, const char* what) {
  if (m < 0 || n < 0) {
    throw invalid_argument(std::string("tessera: ") + what + " with shape " + std::to_string(m) + " x " +
                           std::to_string(n) + ": expected m >= 0 and n >= 0");
  }
}

}  // namespace

template <class T>
host_csr<T> from_triplets(const std::int64_t* I, std::size_t ni, const std::int64_t* J, std::size_t nj, const T* V,
                          std::size_t nv, std::int64_t m, std::int64_t n) {
  check_shape(m, n, "sparse(I, J, V, m, n)");
  if (ni != nj || ni != nv) {
    throw invalid_argument("tessera: sparse(I, J, V, m, n): I, J and V must have the same length, found " +
                           std::to_string(ni) + ", " + std::to_string(nj) + " and " + std::to_string(nv));
  }
  for (std::size_t k = 0; k < ni; ++k) {
    if (I[k] < 0 || I[k] >= m || J[k] < 0 || J[k] >= n) {
      const bool row = I[k] < 0 || I[k] >= m;
      const std::int64_t v = row ? I[k] : J[k];
      throw invalid_argument("tessera: sparse(I, J, V, " + std::to_string(m) + ", " + std::to_string(n) + "): " +
                             entry(k) + " has " + (row ? "row " : "column ") + std::to_string(v) +
                             (v < 0 ? ", a negative index (indices are 0-based)" : "") + "; expected " +
                             (row ? "I" : "J") + " in [0, " + std::to_string(row ? m : n) + ")");
    }
  }
  host_csr<T> a;
  a.m = m, a.n = n;
  a.indptr.assign(static_cast<std::size_t>(m) + 1, 0);
  for (std::size_t k = 0; k < ni; ++k) ++a.indptr[static_cast<std::size_t>(I[k]) + 1];
  std::partial_sum(a.indptr.begin(), a.indptr.end(), a.indptr.begin());
  a.indices.resize(ni);
  a.data.resize(ni);
  std::vector<std::int64_t> next(a.indptr.begin(), a.indptr.end() - 1);
  for (std::size_t k = 0; k < ni; ++k) {  // a counting sort by row keeps the input order in a row
    const auto p = static_cast<std::size_t>(next[static_cast<std::size_t>(I[k])]++);
    a.indices[p] = J[k];
    a.data[p] = V[k];
  }
  sort_and_sum(a);
  return a;
}

template <class T>
host_csr<T> canonical(const host_csr<T>& in) {
  check_shape(in.m, in.n, "sparse(host_csr)");
  const std::string what = "tessera: sparse(host_csr) of shape " + std::to_string(in.m) + " x " + std::to_string(in.n);
  if (in.indptr.size() != static_cast<std::size_t>(in.m) + 1) {
    throw invalid_argument(what + ": indptr must have m + 1 = " + std::to_string(in.m + 1) + " entries, found " +
                           std::to_string(in.indptr.size()));
  }
  if (in.indptr[0] != 0) throw invalid_argument(what + ": indptr[0] must be 0, found " + std::to_string(in.indptr[0]));
  for (std::int64_t i = 0; i < in.m; ++i) {
    if (in.indptr[i + 1] < in.indptr[i]) {
      throw invalid_argument(what + ": indptr must not decrease, found indptr[" + std::to_string(i) + "] = " +
                             std::to_string(in.indptr[i]) + " > indptr[" + std::to_string(i + 1) + "] = " +
                             std::to_string(in.indptr[i + 1]));
    }
  }
  const auto nnz = static_cast<std::size_t>(in.indptr[in.m]);
  if (in.indices.size() != nnz || in.data.size() != nnz) {
    throw invalid_argument(what + ": indptr[m] = " + std::to_string(nnz) + " entries, but indices has " +
                           std::to_string(in.indices.size()) + " and data " + std::to_string(in.data.size()));
  }
  for (std::size_t k = 0; k < nnz; ++k) {
    if (in.indices[k] < 0 || in.indices[k] >= in.n) {
      throw invalid_argument(what + ": " + entry(k) + " has column " + std::to_string(in.indices[k]) +
                             "; expected indices in [0, " + std::to_string(in.n) + ")");
    }
  }
  host_csr<T> a = in;
  sort_and_sum(a);
  return a;
}

template <class T>
host_csr<T> transposed(const host_csr<T>& a) {
  host_csr<T> t;
  t.m = a.n, t.n = a.m;
  t.indptr.assign(static_cast<std::size_t>(t.m) + 1, 0);
  for (std::int64_t c : a.indices) ++t.indptr[static_cast<std::size_t>(c) + 1];
  std::partial_sum(t.indptr.begin(), t.indptr.end(), t.indptr.begin());
  t.indices.resize(a.indices.size());
  t.data.resize(a.data.size());
  std::vector<std::int64_t> next(t.indptr.begin(), t.indptr.end() - 1);
  for (std::int64_t i = 0; i < a.m; ++i) {  // rows in order: each column of t comes out sorted
    for (std::int64_t k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
      const auto p = static_cast<std::size_t>(next[static_cast<std::size_t>(a.indices[k])]++);
      t.indices[p] = i;
      t.data[p] = a.data[k];
    }
  }
  return t;
}

template <class T>
row_block<T> rows_of(const host_csr<T>& a, std::int64_t r0, std::int64_t rows) {
  return {rows, a.indptr.data() + r0, a.indices.data(), a.data.data()};
}

template <class T>
host_shard<T> make_shard(const row_block<T>& b, std::int64_t row0, std::int64_t col0, std::int64_t cols) {
  host_shard<T> s;
  s.row0 = row0, s.rows = b.rows, s.col0 = col0, s.cols = cols;
  const std::int64_t first = b.indptr[0], total = b.indptr[b.rows] - first;
  if (total > INT_MAX || b.rows > INT_MAX || cols > INT_MAX) {
    throw invalid_argument("tessera: a sparse matrix shard of " + std::to_string(b.rows) + " rows, " +
                           std::to_string(cols) + " columns and " + std::to_string(total) +
                           " entries: each shard takes at most " + std::to_string(INT_MAX) +
                           " of each (32-bit indices); shard the matrix over more devices");
  }
  const std::int64_t c1 = col0 + cols;
  // The ghost list: every column outside [col0, c1) that some row reads, ascending, once.
  for (std::int64_t k = first; k < first + total; ++k) {
    if (b.indices[k] < col0 || b.indices[k] >= c1) s.ghost.push_back(b.indices[k]);
  }
  std::sort(s.ghost.begin(), s.ghost.end());
  s.ghost.erase(std::unique(s.ghost.begin(), s.ghost.end()), s.ghost.end());
  const auto remote = static_cast<std::int64_t>(
      std::count_if(b.indices + first, b.indices + first + total, [&](std::int64_t c) { return c < col0 || c >= c1; }));
  s.nnz_local = total - remote;
  s.rowptr.resize(static_cast<std::size_t>(b.rows) + 1);
  s.col.resize(static_cast<std::size_t>(total));
  s.val.resize(static_cast<std::size_t>(total));
  std::int64_t loc = 0, rem = s.nnz_local;
  s.rem_ptr.push_back(0);
  for (std::int64_t i = 0; i < b.rows; ++i) {
    s.rowptr[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(loc);
    const std::int64_t rem_before = rem;
    for (std::int64_t k = b.indptr[i]; k < b.indptr[i + 1]; ++k) {
      const std::int64_t c = b.indices[k];
      if (c >= col0 && c < c1) {
        s.col[static_cast<std::size_t>(loc)] = static_cast<std::int32_t>(c - col0);
        s.val[static_cast<std::size_t>(loc++)] = b.data[k];
      } else {
        const auto g = std::lower_bound(s.ghost.begin(), s.ghost.end(), c) - s.ghost.begin();
        s.col[static_cast<std::size_t>(rem)] = static_cast<std::int32_t>(g);
        s.val[static_cast<std::size_t>(rem++)] = b.data[k];
      }
    }
    if (rem > rem_before) {
      s.rem_row.push_back(static_cast<std::int32_t>(i));
      s.rem_ptr.push_back(static_cast<std::int32_t>(rem - s.nnz_local));
    }
  }
  s.rowptr[static_cast<std::size_t>(b.rows)] = static_cast<std::int32_t>(loc);
  return s;
}

template <class T>
host_csr<T> join(const std::vector<host_shard<T>>& shards, std::int64_t m, std::int64_t n) {
  host_csr<T> a;
  a.m = m, a.n = n;
  a.indptr.assign(static_cast<std::size_t>(m) + 1, 0);
  std::vector<std::pair<std::int64_t, T>> row;
  for (const auto& s : shards) {
    std::size_t r = 0;  // position in rem_row
    for (std::int64_t i = 0; i < s.rows; ++i) {
      row.clear();
      for (std::int32_t k = s.rowptr[i]; k < s.rowptr[i + 1]; ++k) row.push_back({s.col0 + s.col[k], s.val[k]});
      if (r < s.rem_row.size() && s.rem_row[r] == i) {
        for (std::int64_t k = s.nnz_local + s.rem_ptr[r]; k < s.nnz_local + s.rem_ptr[r + 1]; ++k) {
          row.push_back({s.ghost[static_cast<std::size_t>(s.col[k])], s.val[k]});
        }
        ++r;
      }
      std::sort(row.begin(), row.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
      for (auto& [c, v] : row) a.indices.push_back(c), a.data.push_back(v);
      a.indptr[static_cast<std::size_t>(s.row0 + i) + 1] = static_cast<std::int64_t>(a.indices.size());
    }
  }
  return a;
}

template <class T>
host_csr<T> laplacian_rows(std::int64_t n, std::int64_t r0, std::int64_t rows) {
  host_csr<T> a;
  a.m = rows, a.n = n;
  a.indptr.reserve(static_cast<std::size_t>(rows) + 1);
  a.indices.reserve(static_cast<std::size_t>(rows) * 3);
  a.data.reserve(static_cast<std::size_t>(rows) * 3);
  a.indptr.push_back(0);
  for (std::int64_t i = r0; i < r0 + rows; ++i) {
    if (i > 0) a.indices.push_back(i - 1), a.data.push_back(T(-1));
    a.indices.push_back(i), a.data.push_back(T(2));
    if (i + 1 < n) a.indices.push_back(i + 1), a.data.push_back(T(-1));
    a.indptr.push_back(static_cast<std::int64_t>(a.indices.size()));
  }
  return a;
}

template <class T>
host_csr<T> laplacian_2d_rows(std::int64_t nx, std::int64_t ny, std::int64_t r0, std::int64_t rows) {
  host_csr<T> a;
  a.m = rows, a.n = nx * ny;
  a.indptr.reserve(static_cast<std::size_t>(rows) + 1);
  a.indices.reserve(static_cast<std::size_t>(rows) * 5);
  a.data.reserve(static_cast<std::size_t>(rows) * 5);
  a.indptr.push_back(0);
  for (std::int64_t i = r0; i < r0 + rows; ++i) {
    const std::int64_t x = i % nx, y = i / nx;
    auto put = [&](std::int64_t c, T v) { a.indices.push_back(c), a.data.push_back(v); };
    if (y > 0) put(i - nx, T(-1));  // columns ascending
    if (x > 0) put(i - 1, T(-1));
    put(i, T(4));
    if (x + 1 < nx) put(i + 1, T(-1));
    if (y + 1 < ny) put(i + nx, T(-1));
    a.indptr.push_back(static_cast<std::int64_t>(a.indices.size()));
  }
  return a;
}

#define TESSERA_SPARSE_HOST(T)                                                                                      \
  template host_csr<T> from_triplets<T>(const std::int64_t*, std::size_t, const std::int64_t*, std::size_t, const T*, \
                                        std::size_t, std::int64_t, std::int64_t);                                    \
  template host_csr<T> canonical<T>(const host_csr<T>&);                                                            \
  template host_csr<T> transposed<T>(const host_csr<T>&);                                                           \
  template row_block<T> rows_of<T>(const host_csr<T>&, std::int64_t, std::int64_t);                                 \
  template host_shard<T> make_shard<T>(const row_block<T>&, std::int64_t, std::int64_t, std::int64_t);              \
  template host_csr<T> join<T>(const std::vector<host_shard<T>>&, std::int64_t, std::int64_t);                      \
  template host_csr<T> laplacian_rows<T>(std::int64_t, std::int64_t, std::int64_t);                                 \
  template host_csr<T> laplacian_2d_rows<T>(std::int64_t, std::int64_t, std::int64_t, std::int64_t);
TESSERA_SPARSE_HOST(float)
TESSERA_SPARSE_HOST(double)
#undef TESSERA_SPARSE_HOST

}  // namespace tessera::detail::sparse
