// SPDX-License-Identifier: Apache-2.0
// Tessera sparse layer, host side: assembling compressed sparse rows (CSR) on the host and cutting
// them into the shards that dsl/tessera/sparse.hpp places on devices. Plain data processing, no
// device call; compiled once into tessera_runtime for float and double (csr.cpp), so a program
// that includes the library compiles none of it.
//
// A shard holds a block of rows [row0, row0 + rows) and is paired with a block of columns
// [col0, col0 + cols): the entries of x (in a product S * x) that live where the shard lives. Its
// entries split in two: the local block (columns inside the shard's column block, stored as CSR
// with local column numbers, the whole of it for a matrix on one device) and the remote block
// (the other columns: few for a banded matrix, stored only for the rows that have them). The
// remote block's columns are positions in the shard's ghost list: the sorted global columns it
// reads, which the gather plan brings from the shards that own them (PETSc's VecScatter).
#pragma once
#include <tessera/error.hpp>

#include <cstdint>
#include <vector>

namespace tessera {

/// A sparse matrix in compressed sparse rows on the host (SciPy's csr_matrix fields): row i's
/// entries are indices/data[indptr[i] .. indptr[i + 1]), column indices 0-based.
template <class T>
struct host_csr {
  std::int64_t m = 0, n = 0;
  std::vector<std::int64_t> indptr;   // m + 1 offsets, indptr[0] == 0
  std::vector<std::int64_t> indices;  // column of each entry
  std::vector<T> data;                // value of each entry
};

namespace detail::sparse {

// Rows [begin, end) of a CSR with global column numbers; `indptr` holds end - begin + 1 offsets
// into `indices` and `data` (not necessarily starting at 0).
template <class T>
struct row_block {
  std::int64_t rows = 0;
  const std::int64_t* indptr = nullptr;
  const std::int64_t* indices = nullptr;
  const T* data = nullptr;
};

// One shard as the host builds it (see the header comment).
template <class T>
struct host_shard {
  std::int64_t row0 = 0, rows = 0, col0 = 0, cols = 0;
  std::int64_t nnz_local = 0;           // entries of the local block; the remote block follows
  std::vector<std::int32_t> rowptr;     // rows + 1 offsets of the local block
  std::vector<std::int32_t> col;        // local columns, then ghost positions of the remote block
  std::vector<T> val;                   // local block's values, then the remote block's
  std::vector<std::int32_t> rem_row;    // local rows that have remote entries, ascending
  std::vector<std::int32_t> rem_ptr;    // rem_row.size() + 1 offsets into the remote block
  std::vector<std::int64_t> ghost;      // global columns the remote block reads, ascending
};

// Triplets to a canonical CSR (rows in order, columns ascending within a row, duplicates summed
// in input order, explicit zeros kept: Julia's sparse(I, J, V, m, n), SciPy's coo -> csr). Throws
// invalid_argument naming the first bad entry (an index outside the shape, a negative one) or the
// lengths that differ, before anything is built.
template <class T>
host_csr<T> from_triplets(const std::int64_t* I, std::size_t ni, const std::int64_t* J, std::size_t nj, const T* V,
                          std::size_t nv, std::int64_t m, std::int64_t n);
// A CSR checked like triplets (indptr's length, order and end; column range) and made canonical.
template <class T>
host_csr<T> canonical(const host_csr<T>& a);
// The transpose, canonical when `a` is.
template <class T>
host_csr<T> transposed(const host_csr<T>& a);
// Rows [r0, r0 + rows) of a canonical CSR.
template <class T>
row_block<T> rows_of(const host_csr<T>& a, std::int64_t r0, std::int64_t rows);
// A shard from its rows (canonical: columns ascending) and its column block. Throws
// invalid_argument when the shard's entries or columns exceed 32-bit indices (cuSPARSE's fastest
// index type; shard the matrix over more devices).
template <class T>
host_shard<T> make_shard(const row_block<T>& rows, std::int64_t row0, std::int64_t col0, std::int64_t cols);
// Back to a canonical CSR: the shards of one matrix (row blocks in order, every row once).
template <class T>
host_csr<T> join(const std::vector<host_shard<T>>& shards, std::int64_t m, std::int64_t n);

// The builders' rows, generated straight into a shard's row block (no global sort): rows
// [r0, r0 + rows) of the 1-D Laplacian of n points (2 on the diagonal, -1 beside it, Dirichlet
// ends) and of the 2-D 5-point Laplacian on an nx x ny grid (row i = x + nx * y: 4 on the
// diagonal, -1 for each neighbour inside the grid).
template <class T>
host_csr<T> laplacian_rows(std::int64_t n, std::int64_t r0, std::int64_t rows);
template <class T>
host_csr<T> laplacian_2d_rows(std::int64_t nx, std::int64_t ny, std::int64_t r0, std::int64_t rows);

}  // namespace detail::sparse
}  // namespace tessera
