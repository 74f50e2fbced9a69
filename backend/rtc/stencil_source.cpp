// SPDX-License-Identifier: Apache-2.0
// Tessera: the source of a run-time compiled stencil kernel, from its description (stencil.hpp).
//
// One block of 128 threads along dim 0 takes `rows` rows along dim 1 of one slice of the box (y: a
// grid-stride loop past 65535 tiles); a thread takes K outputs per row from the row's first
// 16-byte aligned one. It loads the anchor's chunks of rows lo .. count - 1 + hi first, then the
// elements just before and after its chunk (from the lanes beside it, the warp's edge lanes from
// memory), then computes each row with every member's elements named by constant indices and
// every other operand read as chunks, and stores whole vectors; the first 2K threads of the
// block at x = 0 do the elements before the first aligned output and after the last whole vector
// one by one. As bench/support/stencil_probe.cu's tile kernel (0.974x memcpy for Jacobi on an H200;
// the generated one 0.971x with 8 rows per thread).
//
// When some member lies in another plane (a 3-D stencil), the kernel marches along dim 2 instead
// (emit_march_kernel): a block is 4, 8 or 16 warps of rows, each thread keeps the anchor's rows of
// the planes z - 1, z and z + 1 in registers and loads each row once, as it comes into the window.
// Its warps start on 128-byte lines; the elements outside whole chunks are taken by the threads
// whose chunks straddle the box's ends, or by a kernel of their own (tessera_stencil_edges).
#include <backend/rtc/stencil.hpp>

#include <algorithm>
#include <sstream>
#include <string>

namespace tessera::detail::rtc {
namespace {

// Replaces every `L<i>` of the expression by f(i) and every `S<i>` by "S<i>" (kept).
template <class F>
std::string expr_with(const std::string& e, F&& f) {
  std::string out;
  for (std::size_t i = 0; i < e.size(); ++i) {
    if (e[i] == 'L' && i + 1 < e.size() && e[i + 1] >= '0' && e[i + 1] <= '9') {
      std::size_t j = i + 1;
      int v = 0;
      while (j < e.size() && e[j] >= '0' && e[j] <= '9') v = v * 10 + (e[j++] - '0');
      out += f(v);
      i = j - 1;
    } else {
      out += e[i];
    }
  }
  return out;
}

// The arguments written one after the other (string concatenation with operator+ makes GCC 12
// warn of overlapping copies, -Wrestrict, a known false positive).
template <class... A>
std::string cat(const A&... a) {
  std::ostringstream o;
  (o << ... << a);
  return o.str();
}

std::string scalar_read(const std::string& type, std::size_t word) {
  const std::string w = cat("p.w[", word, "]");
  if (type == "float") return cat("__int_as_float((int)(", w, " & 0xffffffffull))");
  if (type == "double") return cat("__longlong_as_double((long long)", w, ")");
  if (type == "int") return cat("(int)(long long)", w);
  return cat("(long long)", w);
}

// Where the kernel's parameter keeps what (stencil_words).
struct word_map {
  std::size_t n, ext, count, anchor, anchor_st, first_op, first_scalar;
  std::size_t op(std::size_t i) const { return first_op + i * (1 + n); }
  std::string at(std::size_t i) const { return cat("w[", i, "]"); }
};
word_map words_of(const stencil_desc& d) {
  const auto N = static_cast<std::size_t>(d.n);
  word_map m{N, 1 + N, 1 + 2 * N, 2 + 2 * N, 3 + 2 * N, 3 + 3 * N, 0};
  m.first_scalar = m.first_op + d.operands.size() * (1 + N);
  return m;
}

// A marching kernel's least blocks per SM, for its registers (3-D diffusion on an H200): 48 warps
// of float chunks taking the straddling chunks (40 registers: 0.920x -> 0.932x memcpy), 40 of
// double chunks (48 registers; taking the straddling chunks, 8 planes: 0.979x, 32 warps 0.955x,
// 48 warps spill: 0.919x), 64 of single elements (32 registers: 0.772x -> 0.866x). Expressions of
// more than 10 operands, and a plane's kernel: as the compiler likes (a bound that made them spill
// would cost more than the warps gain).
std::string launch_blocks(const stencil_desc& d) {
  if (!d.march || d.operands.size() > 10) return "";
  return cat(", ", (d.k == 1 ? 2048 : d.partial && d.k == 4 ? 1536 : 1280) / d.threads());
}

// The typedefs and helpers, the kernel's signature and its first lines (the box, the scalars and
// the thread's chunk), common to both shapes.
void emit_head(std::ostringstream& s, const stencil_desc& d, const word_map& wm) {
  const bool dbl = d.type == "double";
  s << "// Tessera stencil kernel, generated (backend/rtc/stencil_source.cpp)\n";
  if (d.emulate) {
    // The host's stand-ins for what the kernel uses of CUDA (one thread at a time: no shuffles).
    s << "#include <cstring>\n"
      << "struct dim3_ { unsigned x, y, z; };\n"
      << "static dim3_ blockIdx, threadIdx, blockDim, gridDim;\n"
      << "#define __global__\n#define __device__\n#define __forceinline__ inline\n#define __launch_bounds__(...)\n"
      << "struct float4 { float x, y, z, w; };\nstruct double2 { double x, y; };\n"
      << "template <class X> inline X __ldg(const X* p) { X v; std::memcpy(&v, p, sizeof v); return v; }\n"
      << "inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }\n"
      << "inline double __longlong_as_double(long long i) { double f; std::memcpy(&f, &i, 8); return f; }\n";
  }
  s << "typedef unsigned long long u64;\n"
    << "struct P { u64 w[" << stencil_words(d) << "]; };\n"
    << "typedef " << d.type << " T;\n"
    << "#define K " << d.k << "\n#define U " << d.rows << "\n#define N " << d.n << "\n";
  if (d.k == 1)  // a chunk of one element
    s << "typedef T V;\n"
      << "__device__ __forceinline__ void unpack(const V c, T (&e)[K]) { e[0] = c; }\n"
      << "__device__ __forceinline__ V pack(const T (&e)[K]) { return e[0]; }\n";
  else
    s << "typedef " << (dbl ? "double2" : "float4") << " V;\n"
      << "__device__ __forceinline__ void unpack(const V c, T (&e)[K]) { e[0] = c.x; e[1] = c.y;"
      << (dbl ? "" : " e[2] = c.z; e[3] = c.w;") << " }\n"
      << "__device__ __forceinline__ V pack(const T (&e)[K]) { V c; c.x = e[0]; c.y = e[1];"
      << (dbl ? "" : " c.z = e[2]; c.w = e[3];") << " return c; }\n";
  s << "__device__ __forceinline__ void load_v(const T* p, T (&e)[K]) { unpack(__ldg((const V*)p), e); }\n"
    << "__device__ __forceinline__ void store_v(T* p, const T (&e)[K]) { const V c = pack(e); "
    << (d.emulate ? "std::memcpy(p, &c, sizeof c);" : "*(V*)p = c;") << " }\n"
    << "extern \"C\" __global__ void __launch_bounds__(" << d.threads() << launch_blocks(d)
    << ") tessera_stencil(const P p) {\n"
    << "  const long long* w = (const long long*)p.w;\n"
    << "  const long long inner = " << wm.at(wm.ext) << ", rows1 = " << wm.at(wm.ext + 1)
    << ", total = " << wm.at(wm.count) << ";\n"
    << "  T* const out = (T*)p.w[0];\n";
  for (std::size_t i = 0; i < d.scalar_types.size(); ++i)
    s << "  const " << d.scalar_types[i] << " S" << i << " = " << scalar_read(d.scalar_types[i], wm.first_scalar + i)
      << ";\n";
  // A marching block is d.warps warps of rows (warp w takes rows w U .. w U + U - 1 of its tile),
  // each warp 32 chunks along dim 0; a plane's block is 128 chunks of the same rows.
  s << "  const int lane = threadIdx.x & 31;\n"
    << "  const long long x0 = " << d.head << " + ((long long)blockIdx.x * "
    << (d.march ? cat("32 + lane - ", d.shift) : "blockDim.x + threadIdx.x") << ") * K;\n"
    << "  const bool whole = " << (d.march ? cat("x0 >= ", d.partial ? 0 : d.head, " && ") : "")
    << "x0 + K <= inner;\n";
  // part (marching): the chunk holds an element of the box (loaded whole, stored element by
  // element when it is not whole); without d.partial the same as whole. prev_ok / next_ok: the
  // lane beside loaded the chunk before / after this one.
  if (d.march) s << "  const bool part = " << (d.partial ? "x0 + K > 0 && x0 < inner" : "whole") << ";\n";
  // keep<j>: a straddling chunk's element j lies in the box. Once per thread: tested per plane,
  // the double march took 64 registers (48 with spills at 40 warps: 0.82x memcpy); so 48 (0.98x).
  if (d.partial)
    for (int j = 0; j < d.k; ++j) s << "  const bool keep" << j << " = x0 + " << j << " >= 0 && x0 + " << j << " < inner;\n";
  if (d.emulate)
    s << "  const bool prev_ok = false, next_ok = false;\n  (void)lane;\n";
  else if (d.partial)
    s << "  const bool prev_ok = lane != 0 && x0 > 0, next_ok = lane != 31 && x0 + K < inner;\n";
  else
    s << "  const bool prev_ok = lane != 0" << (d.march ? cat(" && x0 - K >= ", d.head) : "")
      << ", next_ok = lane != 31 && x0 + 2 * K <= inner;\n";
  // The threads that take the elements outside whole chunks (emit_edges).
  if (!d.march) s << "  const bool edges = blockIdx.x == 0 && threadIdx.x < 2 * K;\n";
}

// Every operand's offset at x = 0 of the tile's first row (plane 0 when marching), the output's too.
void emit_bases(std::ostringstream& s, const stencil_desc& d, const word_map& wm) {
  s << "    long long ob = 0;\n"
    << "    for (int k = 1; k < N; ++k) ob += idx[k] * w[1 + k];\n";
  for (std::size_t i = 0; i < d.operands.size(); ++i)
    s << "    const T* const q" << i << " = (const T*)p.w[" << wm.op(i) << "];\n"
      << "    long long b" << i << " = 0;\n"
      << "    for (int k = 1; k < N; ++k) b" << i << " += idx[k] * w[" << wm.op(i) + 1 << " + k];\n";
}

// Row u's outputs (plane z when marching): members from the registers (rows: "r" or "r[1]", the
// plane's rows; lf, rt likewise), every other operand read, then the expression and the store.
void emit_row(std::ostringstream& s, const stencil_desc& d, const word_map& wm, bool march) {
  for (std::size_t i = 0; i < d.operands.size(); ++i) {
    const auto& o = d.operands[i];
    s << "        T L" << i << "[K];\n";
    if (o.member) {
      const std::string slot = march ? cat("[", o.dz + 1, "]") : "";
      const std::string row = cat("[u + ", o.dy + 1, "]");
      for (int j = 0; j < d.k; ++j) {
        const int e = j + o.s;
        s << "        L" << i << "[" << j << "] = ";
        if (e < 0)
          s << "lf" << slot << row << ";\n";
        else if (e >= d.k)
          s << "rt" << slot << row << ";\n";
        else
          s << "r" << slot << row << "[" << e << "];\n";
      }
      continue;
    }
    const std::string st0 = wm.at(wm.op(i) + 1), st1 = wm.at(wm.op(i) + 2);
    // Marching: a pointer per operand to its element x = 0 of the tile's first row in plane z.
    const std::string at = march ? cat("zp", i, " + u * ", st1) : cat("q", i, " + b", i, " + u * ", st1);
    s << "        if (" << (march && o.mode == 0 ? "part" : "whole") << ") {\n";
    if (o.mode == 0) {
      s << "          load_v(" << at << " + x0, L" << i << ");\n";
    } else if (o.mode == 1) {
      s << "          T c0[K], c1[K];\n"
        << "          load_v(" << at << " + x0 - " << o.m << ", c0);\n"
        << "          load_v(" << at << " + x0 - " << o.m << " + K, c1);\n";
      for (int j = 0; j < d.k; ++j) {
        const int e = o.m + j;
        s << "          L" << i << "[" << j << "] = " << (e < d.k ? "c0[" : "c1[") << (e < d.k ? e : e - d.k)
          << "];\n";
      }
    } else if (o.mode == 2) {
      s << "          const T v = __ldg(" << at << ");\n"
        << "#pragma unroll\n"
        << "          for (int j = 0; j < K; ++j) L" << i << "[j] = v;\n";
    } else {
      s << "#pragma unroll\n"
        << "          for (int j = 0; j < K; ++j) L" << i << "[j] = __ldg(" << at << " + (x0 + j) * " << st0 << ");\n";
    }
    s << "        } else {\n"
      << "#pragma unroll\n"
      << "          for (int j = 0; j < K; ++j) L" << i << "[j] = T(0);\n"
      << "        }\n";
  }
  s << "        T O[K];\n";
  for (int j = 0; j < d.k; ++j)
    s << "        O[" << j << "] = (T)"
      << expr_with(d.expr, [&](int i) { return cat("L", i, "[", j, "]"); }) << ";\n";
  s << "        if (whole) store_v(" << (march ? "oz" : "out + ob") << " + x0 + u * w[2], O);\n";
  if (march && d.partial) {
    s << "        else if (part) {\n";
    for (int j = 0; j < d.k; ++j) s << "          if (keep" << j << ") oz[x0 + " << j << " + u * w[2]] = O[" << j << "];\n";
    s << "        }\n";
  }
}

// The elements before the first aligned output and after the last whole vector, one by one, by
// the first 2K threads of the blocks at x = 0 (a plane's kernel; a march leaves them to its own
// kernel, emit_edge_kernel).
void emit_edges(std::ostringstream& s, const stencil_desc& d, const word_map& wm, const char* in) {
  s << in << "if (edges) {\n"
    << in << "  const long long j = threadIdx.x;\n"
    << in << "  const long long tail = " << d.head << " + (inner - " << d.head << ") / K * K;\n"
    << in << "  const long long e = j < K ? j : tail + (j - K);\n"
    << in << "  if (e < inner && (j >= K || e < " << d.head << ")) {\n"
    << in << "    for (int u = 0; u < count; ++u) {\n";
  for (std::size_t i = 0; i < d.operands.size(); ++i)
    s << in << "      const T E" << i << " = __ldg(q" << i << " + b" << i << " + u * " << wm.at(wm.op(i) + 2)
      << " + e * " << wm.at(wm.op(i) + 1) << ");\n";
  s << in << "      out[ob + u * w[2] + e] = (T)" << expr_with(d.expr, [](int i) { return cat("E", i); }) << ";\n"
    << in << "    }\n"
    << in << "  }\n"
    << in << "}\n";
}

// The tile's rows (of plane z when marching), then its edges.
void emit_rows(std::ostringstream& s, const stencil_desc& d, const word_map& wm, bool march) {
  const char* in = march ? "      " : "    ";
  s << "#pragma unroll\n"
    << in << "for (int u = 0; u < U; ++u) {\n"
    << in << "  if (u < count) {\n";
  emit_row(s, d, wm, march);
  s << in << "  }\n" << in << "}\n";
  if (!march) emit_edges(s, d, wm, in);
}

// The kernel that takes U rows of one plane per thread (rank 2, or no member in another plane).
void emit_tile_kernel(std::ostringstream& s, const stencil_desc& d, const word_map& wm) {
  const int left = (d.left >> 3) & 7, right = (d.right >> 3) & 7;  // the members of dz = 0
  s << "  const long long per_slice = (rows1 + U - 1) / U, tiles = per_slice * (total / (inner * rows1));\n"
    << "  for (long long g = blockIdx.y; g < tiles; g += gridDim.y) {\n"
    << "    const long long slice = g / per_slice, y0 = (g - slice * per_slice) * U;\n"
    << "    const int count = rows1 - y0 < U ? (int)(rows1 - y0) : U;\n"
    << "    long long idx[N];\n"
    << "    idx[0] = 0;\n"
    << "    idx[1] = y0;\n"
    << "    { long long o = slice;\n"
    << "      for (int k = 2; k < N; ++k) { const long long e = w[" << wm.ext
    << " + k]; idx[k] = k + 1 < N ? o % e : o; o /= e; } }\n";
  emit_bases(s, d, wm);
  if (d.group) {
    s << "    long long ao = x0;\n"
      << "    for (int k = 1; k < N; ++k) ao += idx[k] * w[" << wm.anchor_st << " + k];\n"
      << "    const T* const a = (const T*)p.w[" << wm.anchor << "] + ao;\n"
      << "    const long long ar = w[" << wm.anchor_st + 1 << "];\n"
      << "    T r[U + 2][K], lf[U + 2], rt[U + 2];\n"
      << "#pragma unroll\n"
      << "    for (int b = 0; b < U + 2; ++b) {\n"
      << "      const int q = b - 1;\n"
      << "#pragma unroll\n"
      << "      for (int j = 0; j < K; ++j) r[b][j] = T(0);\n"
      << "      lf[b] = T(0);\n"
      << "      rt[b] = T(0);\n"
      << "      if (whole && q >= " << d.lo << " && q <= count - 1 + " << d.hi << ") {\n"
      << "        load_v(a + q * ar, r[b]);\n"
      << "        bool needl = false, needr = false;\n"
      << "#pragma unroll\n"
      << "        for (int dd = -1; dd <= 1; ++dd) {\n"
      << "          const bool used = q - dd >= 0 && q - dd < count;\n"
      << "          needl = needl || (used && ((" << left << " >> (dd + 1)) & 1));\n"
      << "          needr = needr || (used && ((" << right << " >> (dd + 1)) & 1));\n"
      << "        }\n"
      << "        if (needl && !prev_ok) lf[b] = __ldg(a + q * ar - 1);\n"
      << "        if (needr && !next_ok) rt[b] = __ldg(a + q * ar + K);\n"
      << "      }\n"
      << "    }\n";
    if (!d.emulate)
      s << "#pragma unroll\n"
        << "    for (int b = 0; b < U + 2; ++b) {\n"
        << "      const T l = __shfl_up_sync(0xffffffffu, r[b][K - 1], 1), x = __shfl_down_sync(0xffffffffu, r[b][0], "
           "1);\n"
        << "      if (prev_ok) lf[b] = l;\n"
        << "      if (next_ok) rt[b] = x;\n"
        << "    }\n";
  }
  emit_rows(s, d, wm, false);
  s << "  }\n";
}

// The kernel that marches along dim 2: a thread takes U rows of Z consecutive output planes and
// keeps the anchor's rows of the planes z - 1, z and z + 1 in r[0], r[1] and r[2], moving them down
// a slot per plane. Row q (-1 .. U) of plane z + dz is loaded when a member of that dz reads it for
// one of the tile's rows and it was not loaded at an earlier plane (as row q of a greater dz), so
// that each row is read from memory once per thread and only rows that members read are read.
void emit_march_kernel(std::ostringstream& s, const stencil_desc& d, const word_map& wm) {
  const int U = d.rows;
  int rows_at[3] = {0, 0, 0};  // bit dy + 1: a member at that dy, per dz + 1
  for (const auto& o : d.operands)
    if (o.member) rows_at[o.dz + 1] |= 1 << (o.dy + 1);
  // The least output row of the tile for which a member in `mask` (bit dy + 1) reads row q, as a
  // condition on count ("false" when none: that row is never read).
  const auto read_if = [&](int mask, int q) -> std::string {
    int least = U;
    for (int dy = -1; dy <= 1; ++dy)
      if ((mask >> (dy + 1)) & 1 && q - dy >= 0 && q - dy < U) least = std::min(least, q - dy);
    return least < U ? cat("count > ", least) : "false";
  };
  // Vector chunks (K > 1) leave elements before the first aligned output and after the last whole
  // chunk: the march takes the chunks that straddle them (d.partial), or, where such a chunk may
  // hold no element that is read, a kernel of their own does (emit_edge_kernel), so that their
  // addresses take no registers of the march.
  s << "  const long long planes = " << wm.at(wm.ext + 2) << ";\n"
    << "  const long long per_slice = (rows1 + " << d.warps << " * U - 1) / (" << d.warps << " * U);\n"
    << "  const long long zch = (planes + " << d.planes << " - 1) / " << d.planes << ";\n"
    << "  const long long tiles = per_slice * zch * (total / (inner * rows1 * planes));\n"
    << (d.one_tile ? "  {\n    const long long g = blockIdx.y + (long long)blockIdx.z * gridDim.y;\n    if (g >= tiles) return;\n"
                   : "  for (long long g = blockIdx.y; g < tiles; g += gridDim.y) {\n")
    << "    long long o = g / per_slice;\n"
    << "    const long long y0 = (g - o * per_slice) * " << d.warps << " * U + (threadIdx.x >> 5) * U;\n"
    << "    const long long z0 = (o % zch) * " << d.planes << ", z1 = z0 + " << d.planes << " < planes ? z0 + "
    << d.planes << " : planes;\n"
    << "    o /= zch;\n"
    << "    const int count = rows1 - y0 < U ? (rows1 > y0 ? (int)(rows1 - y0) : 0) : U;\n"
    << "    long long idx[N];\n"
    << "    idx[0] = 0;\n"
    << "    idx[1] = y0;\n"
    << "    idx[2] = 0;\n"
    << "    for (int k = 3; k < N; ++k) { const long long e = w[" << wm.ext
    << " + k]; idx[k] = k + 1 < N ? o % e : o; o /= e; }\n"
    // A plane counter of 32 bits (at most d.planes): 64-bit ones cost the march registers.
    << "    const int nz = (int)(z1 - z0);\n"
    << "    long long ob = 0;\n"
    << "    for (int k = 3; k < N; ++k) ob += idx[k] * w[1 + k];\n";
  // Running pointers to plane z of the output (oz: at x = 0), the anchor (a: at the thread's
  // chunk) and each other operand (zp<i>).
  s << "    long long ao = x0;\n"
    << "    for (int k = 3; k < N; ++k) ao += idx[k] * w[" << wm.anchor_st << " + k];\n"
    << "    const long long ar = w[" << wm.anchor_st + 1 << "], ap = w[" << wm.anchor_st + 2 << "];\n"
    << "    T* oz = out + ob + y0 * w[2] + z0 * w[3];\n"
    << "    const T* a = (const T*)p.w[" << wm.anchor << "] + ao + y0 * ar + z0 * ap;\n";
  for (std::size_t i = 0; i < d.operands.size(); ++i) {
    if (d.operands[i].member) continue;
    s << "    const T* zp" << i << " = (const T*)p.w[" << wm.op(i) << "] + y0 * " << wm.at(wm.op(i) + 2) << " + z0 * "
      << wm.at(wm.op(i) + 3) << ";\n"
      << "    for (int k = 3; k < N; ++k) zp" << i << " += idx[k] * w[" << wm.op(i) + 1 << " + k];\n";
  }
  s << ""
    << "    T r[3][U + 2][K], lf[3][U + 2], rt[3][U + 2];\n"
    << "#pragma unroll\n"
    << "    for (int c = 0; c < 3; ++c)\n"
    << "#pragma unroll\n"
    << "      for (int b = 0; b < U + 2; ++b) {\n"
    << "        lf[c][b] = rt[c][b] = T(0);\n"
    << "#pragma unroll\n"
    << "        for (int j = 0; j < K; ++j) r[c][b][j] = T(0);\n"
    << "      }\n"
    << "    for (int zz = 0; zz < nz; ++zz) {\n"
    << "#pragma unroll\n"
    << "      for (int b = 0; b < U + 2; ++b)\n"
    << "#pragma unroll\n"
    << "        for (int j = 0; j < K; ++j) r[0][b][j] = r[1][b][j], r[1][b][j] = r[2][b][j];\n";
  for (int dz = d.zhi; dz >= d.zlo; --dz)
    for (int b = 0; b < U + 2; ++b) {
      const int q = b - 1;
      const std::string need = read_if(rows_at[dz + 1], q);
      if (need == "false") continue;
      std::string before;  // loaded at an earlier plane of this thread, as row q of dz2 > dz
      for (int dz2 = dz + 1; dz2 <= d.zhi; ++dz2) {
        const std::string n2 = read_if(rows_at[dz2 + 1], q);
        if (n2 != "false")
          before += cat(" && !(", n2, " && zz >= ", dz2 - dz, ")");
      }
      s << "      if (part && " << need << before << ") load_v(a + " << dz << " * ap + " << q << " * ar, r["
        << dz + 1 << "][" << b << "]);\n";
    }
  // The elements just before and after each chunk that a member reads: from the lanes beside, the
  // warp's edge lanes (and every thread when emulated) from memory.
  for (int side = 0; side < 2; ++side) {
    const int mask = side == 0 ? d.left : d.right;
    const char* reg = side == 0 ? "lf" : "rt";
    for (int dz = d.zlo; dz <= d.zhi; ++dz)
      for (int b = 0; b < U + 2; ++b) {
        const std::string need = read_if((mask >> (3 * (dz + 1))) & 7, b - 1);
        if (need == "false") continue;
        const std::string slot = cat("[", dz + 1, "][", b, "]");
        if (!d.emulate) {
          if (side == 0)
            s << "      { const T v = __shfl_up_sync(0xffffffffu, r" << slot << "[K - 1], 1); if (prev_ok) lf" << slot
              << " = v; }\n";
          else
            s << "      { const T v = __shfl_down_sync(0xffffffffu, r" << slot << "[0], 1); if (next_ok) rt" << slot
              << " = v; }\n";
        }
        // From memory only for an element of the box: a straddling chunk's element before the box
        // (or after it) is not an output.
        s << "      if (" << (side == 0 ? "part && x0 >= 0" : "part && x0 + K <= inner") << " && " << need << " && !"
          << (side == 0 ? "prev_ok" : "next_ok") << ") " << reg << slot
          << " = __ldg(a + " << dz << " * ap + " << b - 1 << " * ar" << (side == 0 ? " - 1" : " + K")
          << ");\n";
      }
  }
  emit_rows(s, d, wm, true);
  s << "      a += ap;\n"
    << "      oz += w[3];\n";
  for (std::size_t i = 0; i < d.operands.size(); ++i)
    if (!d.operands[i].member) s << "      zp" << i << " += " << wm.at(wm.op(i) + 3) << ";\n";
  s << "    }\n"
    << "  }\n";
}
// The kernel of a march's edges (d.edge_kernel()): the elements before the first aligned output and
// after the last whole chunk of every row. A block takes 128 consecutive rows of one such element
// (lanes along dim 1, so that a warp's rows y - 1 and y + 1 are its neighbours' rows y, from L1)
// and stencil_edge_planes planes, marching along dim 2 with each member's element in a register of
// its own, passed down a plane as in the march. A pass of scattered accesses, mostly missing L2
// after the march: as much as the march's own edge block of session 36 cost (the double diffusion
// on an H200: 0.91x memcpy, 0.98x without edges), so marches take their straddling chunks where
// they can (d.partial).
void emit_edge_kernel(std::ostringstream& s, const stencil_desc& d, const word_map& wm) {
  // v<dz + 1><dy + 1><s + 1>: the anchor's element read by members at (dz, dy, s), once each.
  bool used[3][3][3] = {};
  for (const auto& o : d.operands)
    if (o.member) used[o.dz + 1][o.dy + 1][o.s + 1] = true;
  const auto reg = [](int dz, int dy, int x) { return cat("v", dz + 1, dy + 1, x + 1); };
  s << "extern \"C\" __global__ void __launch_bounds__(" << stencil_edge_threads
    << ") tessera_stencil_edges(const P p) {\n"
    << "  const long long* w = (const long long*)p.w;\n"
    << "  const long long inner = " << wm.at(wm.ext) << ", rows1 = " << wm.at(wm.ext + 1)
    << ", planes = " << wm.at(wm.ext + 2) << ", total = " << wm.at(wm.count) << ";\n"
    << "  T* const out = (T*)p.w[0];\n";
  for (std::size_t i = 0; i < d.scalar_types.size(); ++i)
    s << "  const " << d.scalar_types[i] << " S" << i << " = " << scalar_read(d.scalar_types[i], wm.first_scalar + i)
      << ";\n";
  // Per row: nh elements before the head, then those from `tail` on (none when the row is shorter
  // than the head); the blocks: row groups x those elements x plane chunks x slices (dims 3 ..).
  s << "  const long long tail = " << d.head << " + (inner - " << d.head << ") / K * K;\n"
    << "  const long long nh = inner < " << d.head << " ? inner : " << d.head << ";\n"
    << "  const long long ne = nh + (inner > tail ? inner - tail : 0);\n"
    << "  const long long ych = (rows1 + " << stencil_edge_threads - 1 << ") / " << stencil_edge_threads
    << ", zch = (planes + " << stencil_edge_planes - 1 << ") / " << stencil_edge_planes << ";\n"
    << "  const long long tiles = ych * ne * zch * (total / (inner * rows1 * planes));\n"
    << "  for (long long g = blockIdx.x; g < tiles; g += gridDim.x) {\n"
    << "    long long o = g / ych;\n"
    << "    const long long y = (g - o * ych) * " << stencil_edge_threads << " + threadIdx.x;\n"
    << "    const long long j = o % ne;\n"
    << "    o /= ne;\n"
    << "    const long long z0 = (o % zch) * " << stencil_edge_planes << ";\n"
    << "    o /= zch;\n"
    << "    if (y >= rows1) continue;\n"
    << "    const long long e = j < nh ? j : tail + (j - nh);\n"
    << "    const int nz = (int)(planes - z0 < " << stencil_edge_planes << " ? planes - z0 : "
    << stencil_edge_planes << ");\n"
    << "    long long ob = e + y * w[2] + z0 * w[3], ao = e + y * w[" << wm.anchor_st + 1 << "] + z0 * w["
    << wm.anchor_st + 2 << "];\n";
  for (std::size_t i = 0; i < d.operands.size(); ++i)
    if (!d.operands[i].member)
      s << "    long long b" << i << " = e * " << wm.at(wm.op(i) + 1) << " + y * " << wm.at(wm.op(i) + 2) << " + z0 * "
        << wm.at(wm.op(i) + 3) << ";\n";
  s << "    for (int k = 3; k < N; ++k) {\n"
    << "      const long long ek = w[" << wm.ext << " + k], x = k + 1 < N ? o % ek : o;\n"
    << "      o /= ek;\n"
    << "      ob += x * w[1 + k];\n"
    << "      ao += x * w[" << wm.anchor_st << " + k];\n";
  for (std::size_t i = 0; i < d.operands.size(); ++i)
    if (!d.operands[i].member) s << "      b" << i << " += x * w[" << wm.op(i) + 1 << " + k];\n";
  s << "    }\n"
    << "    const T* ae = (const T*)p.w[" << wm.anchor << "] + ao;\n"
    << "    const long long ar = w[" << wm.anchor_st + 1 << "], ap = w[" << wm.anchor_st + 2 << "];\n";
  std::string regs;  // a march has members
  for (int dz = -1; dz <= 1; ++dz)
    for (int dy = -1; dy <= 1; ++dy)
      for (int x = -1; x <= 1; ++x)
        if (used[dz + 1][dy + 1][x + 1]) regs += cat(regs.empty() ? "" : ", ", reg(dz, dy, x));
  s << "    T " << regs << ";\n"
    << "    for (int zz = 0; zz < nz; ++zz) {\n";
  // From the plane before (its register one dz up) after the first plane, from memory otherwise;
  // dz ascending, so that each register is passed down before it is replaced.
  for (int dz = -1; dz <= 1; ++dz)
    for (int dy = -1; dy <= 1; ++dy)
      for (int x = -1; x <= 1; ++x) {
        if (!used[dz + 1][dy + 1][x + 1]) continue;
        const std::string load = cat("__ldg(ae + ", dz, " * ap + ", dy, " * ar + ", x, ")");
        s << "      " << reg(dz, dy, x) << " = ";
        if (dz < 1 && used[dz + 2][dy + 1][x + 1])
          s << "zz > 0 ? " << reg(dz + 1, dy, x) << " : " << load << ";\n";
        else
          s << load << ";\n";
      }
  for (std::size_t i = 0; i < d.operands.size(); ++i)
    if (!d.operands[i].member)
      s << "      const T E" << i << " = __ldg((const T*)p.w[" << wm.op(i) << "] + b" << i << " + zz * "
        << wm.at(wm.op(i) + 3) << ");\n";
  s << "      out[ob + zz * w[3]] = (T)" << expr_with(d.expr, [&](int i) {
    const auto& o = d.operands[static_cast<std::size_t>(i)];
    return o.member ? reg(o.dz, o.dy, o.s) : cat("E", i);
  }) << ";\n"
    << "      ae += ap;\n"
    << "    }\n"
    << "  }\n"
    << "}\n";
}
}  // namespace

std::string stencil_source(const stencil_desc& d) {
  const word_map wm = words_of(d);
  std::ostringstream s;
  emit_head(s, d, wm);
  if (d.march)
    emit_march_kernel(s, d, wm);
  else
    emit_tile_kernel(s, d, wm);
  s << "}\n";
  if (d.edge_kernel()) emit_edge_kernel(s, d, wm);
  if (d.emulate && d.edge_kernel())
    s << "extern \"C\" void tessera_stencil_edges_host(const P* p, unsigned gx) {\n"
      << "  gridDim = {gx, 1, 1};\n  blockDim = {" << stencil_edge_threads << ", 1, 1};\n"
      << "  for (unsigned x = 0; x < gx; ++x)\n    for (unsigned t = 0; t < " << stencil_edge_threads << "; ++t) {\n"
      << "      blockIdx = {x, 0, 0};\n      threadIdx = {t, 0, 0};\n      tessera_stencil_edges(*p);\n    }\n}\n";
  if (d.emulate)
    s << "extern \"C\" void tessera_stencil_host(const P* p, unsigned gx, unsigned gy, unsigned gz) {\n"
      << "  gridDim = {gx, gy, gz};\n  blockDim = {" << d.threads() << ", 1, 1};\n"
      << "  for (unsigned z = 0; z < gz; ++z)\n  for (unsigned y = 0; y < gy; ++y)\n    for (unsigned x = 0; x < gx; ++x)\n"
      << "      for (unsigned t = 0; t < " << d.threads() << "; ++t) {\n"
      << "        blockIdx = {x, y, z};\n        threadIdx = {t, 0, 0};\n        tessera_stencil(*p);\n      }\n}\n";
  return s.str();
}

}  // namespace tessera::detail::rtc
