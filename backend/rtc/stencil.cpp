// SPDX-License-Identifier: Apache-2.0
// Tessera: run-time compiled stencils (stencil.hpp): the plan of a shard, the description of its
// kernel and the kernel's parameter words, the grid, the programs (one per description, the source
// from stencil_source.cpp), each thread's recent call shapes, and the launch.
#include <backend/rtc/rtc.hpp>
#include <backend/rtc/stencil.hpp>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace tessera::detail::rtc {

tile_plan make_tile_plan(const stencil_call& c, bool scalar) {
  tile_plan pl;
  const int N = c.n, L = static_cast<int>(c.operands);
  if (N < 2 || L < 2 || c.elem <= 0 || 16 % c.elem != 0) return pl;
  const std::int64_t K = scalar ? 1 : 16 / c.elem;
  pl.k = static_cast<int>(K);
  for (int k = 1; k < N; ++k)
    if (c.out_st[k] % K != 0) return pl;
  const auto elem = [&](std::uintptr_t p) {
    return static_cast<std::int64_t>(p / static_cast<std::uintptr_t>(c.elem));
  };
  pl.head = static_cast<int>((K - elem(c.out) % K) % K);
  // The candidates: unit stride along dim 0, rows aligned alike.
  std::vector<bool> ok(static_cast<std::size_t>(L));
  auto st = [&](int l) { return c.op_st + static_cast<std::ptrdiff_t>(l) * N; };
  for (int l = 0; l < L; ++l) {
    bool g = st(l)[0] == 1 && c.op[l] % static_cast<std::uintptr_t>(c.elem) == 0;
    for (int k = 1; k < N; ++k) g = g && st(l)[k] % K == 0;
    ok[static_cast<std::size_t>(l)] = g;
  }
  const auto same_strides = [&](int a, int b) {
    for (int k = 0; k < N; ++k)
      if (st(a)[k] != st(b)[k]) return false;
    return true;
  };
  // Where operand l sits against candidate anchor r moved by m0 elements (a multiple of K): its
  // row, plane and window start, or false when it is not a member.
  const auto place = [&](int r, std::int64_t m0, int l, int& dy, int& dz, int& s) {
    if (!ok[static_cast<std::size_t>(l)] || !same_strides(r, l)) return false;
    const std::int64_t row = st(r)[1];
    if (row < 4 * K && row > -4 * K) return false;  // a shift along dim 0 must not pass for a row
    // Planes only where a plane is longer than the rows a step of dy and s spans.
    const std::int64_t plane = N >= 3 ? st(r)[2] : 0;
    const int zr = N >= 3 && (plane >= 4 * row || plane <= -4 * row) && row > 0 ? 1 : 0;
    const std::int64_t d = elem(c.op[l]) - elem(c.op[r]);
    const std::int64_t m = (elem(c.op[r]) + pl.head) % K;  // r's element at an aligned output, in its chunk
    for (int z = -zr; z <= zr; ++z)
      for (int y = -1; y <= 1; ++y) {
        const std::int64_t w = d - y * row - z * plane + m - m0;
        if (w >= -1 && w <= 1) {
          dy = y, dz = z, s = static_cast<int>(w);
          return true;
        }
      }
    return false;
  };
  int best = 0, best_r = -1;
  std::int64_t best_m0 = 0;
  for (int r = 0; r < L; ++r) {
    if (!ok[static_cast<std::size_t>(r)]) continue;
    for (std::int64_t m0 : {std::int64_t(0), K, -K, 2 * K, -2 * K}) {
      int count = 0, dy = 0, dz = 0, s = 0;
      for (int l = 0; l < L; ++l) count += place(r, m0, l, dy, dz, s) ? 1 : 0;
      if (count > best) best = count, best_r = r, best_m0 = m0;
    }
  }
  if (best < 2) return pl;
  pl.valid = true;
  pl.members = best;
  const std::int64_t m = (elem(c.op[best_r]) + pl.head) % K;
  pl.anchor = c.op[best_r] + static_cast<std::uintptr_t>((best_m0 - m) * c.elem);
  pl.st.assign(st(best_r), st(best_r) + N);
  pl.member.assign(static_cast<std::size_t>(L), 0);
  pl.dy.assign(static_cast<std::size_t>(L), 0);
  pl.dz.assign(static_cast<std::size_t>(L), 0);
  pl.s.assign(static_cast<std::size_t>(L), 0);
  pl.lo = 1, pl.hi = -1, pl.zlo = 1, pl.zhi = -1;
  for (int l = 0; l < L; ++l) {
    int dy = 0, dz = 0, s = 0;
    if (!place(best_r, best_m0, l, dy, dz, s)) continue;
    const auto i = static_cast<std::size_t>(l);
    pl.member[i] = 1, pl.dy[i] = dy, pl.dz[i] = dz, pl.s[i] = s;
    const int bit = 1 << (3 * (dz + 1) + dy + 1);
    if (s < 0) pl.left |= bit;
    if (s > 0) pl.right |= bit;
    pl.lo = std::min(pl.lo, dy), pl.hi = std::max(pl.hi, dy);
    pl.zlo = std::min(pl.zlo, dz), pl.zhi = std::max(pl.zhi, dz);
  }
  return pl;
}

namespace {
// The kernel's parameter words for `c` (stencil_words' order) with the anchor at `anchor` and its
// strides (nullptr: no plan, zeros).
void fill_words(const stencil_call& c, std::uintptr_t anchor, const std::int64_t* anchor_st,
                std::vector<std::uint64_t>& words) {
  const int N = c.n;
  auto word = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  words.clear();
  words.push_back(c.out);
  for (int k = 0; k < N; ++k) words.push_back(word(c.out_st[k]));
  for (int k = 0; k < N; ++k) words.push_back(word(c.ext[k]));
  words.push_back(word(c.count));
  words.push_back(anchor);
  for (int k = 0; k < N; ++k) words.push_back(word(anchor_st ? anchor_st[k] : 0));
  for (std::size_t i = 0; i < c.operands; ++i) {
    words.push_back(c.op[i]);
    for (int k = 0; k < N; ++k) words.push_back(word(c.op_st[static_cast<std::ptrdiff_t>(i) * N + k]));
  }
  words.insert(words.end(), c.scalar_bits, c.scalar_bits + c.scalar_types->size());
}

// Whether a marching kernel may load the chunks that straddle the box's ends whole: each holds an
// element that is read anyway (so the 16-byte load lies in the same allocation). A loaded row is
// read by some member at its (dz, dy), so each (dz, dy) with members needs one with s <= 0 (the
// chunk holding the box's first element reads it or the one before) and one with s >= 0 (the last
// element, or the one after); other operands read every element of the box as aligned chunks
// (mode 0) or one element (mode 2).
bool partial_ok(const stencil_desc& d) {
  for (const auto& o : d.operands) {
    if (!o.member) {
      if (o.mode != 0 && o.mode != 2) return false;
      continue;
    }
    bool le = false, ge = false;
    for (const auto& m : d.operands)
      if (m.member && m.dz == o.dz && m.dy == o.dy) le = le || m.s <= 0, ge = ge || m.s >= 0;
    if (!le || !ge) return false;
  }
  return true;
}

// Whether a marching kernel's grid holds a block per tile (grid y and z; otherwise its blocks
// stride over the tiles): with at most 65535^2 rows, there are at most as many tiles.
bool one_tile_grid(const stencil_call& c) {
  return c.ext[0] > 0 && c.count / c.ext[0] <= std::int64_t{65535} * 65535;
}
}  // namespace

stencil_desc describe_stencil(const stencil_call& c, const tile_plan& pl, int rows, std::vector<std::uint64_t>& words,
                              int planes, int warps) {
  const int N = c.n, K = pl.k ? pl.k : 16 / c.elem;
  const std::size_t L = c.operands;
  stencil_desc d;
  d.type = c.type;
  d.k = K;
  d.rows = rows;
  d.n = N;
  d.head = pl.head;
  d.expr = *c.expr;
  d.scalar_types = *c.scalar_types;
  d.operands.resize(L);
  d.lo = pl.lo, d.hi = pl.hi, d.left = pl.left, d.right = pl.right;
  d.group = pl.valid;
  if (pl.valid) d.zlo = pl.zlo, d.zhi = pl.zhi;
  d.march = pl.valid && (d.zlo < 0 || d.zhi > 0);
  d.planes = planes;
  d.warps = warps;
  if (d.march) {
    const auto e = static_cast<std::int64_t>(c.out / static_cast<std::uintptr_t>(c.elem));
    d.shift = static_cast<int>((e + d.head) % (128 / c.elem) / K);
    d.one_tile = one_tile_grid(c);
  }
  for (std::size_t i = 0; i < L; ++i) {
    const std::int64_t* st = c.op_st + static_cast<std::ptrdiff_t>(i) * N;
    auto& o = d.operands[i];
    if (pl.valid && pl.member[i]) {
      o.member = 1, o.dy = pl.dy[i], o.dz = pl.dz[i], o.s = pl.s[i];
    } else if (st[0] == 0) {
      o.mode = 2;
    } else {
      bool rows_aligned = st[0] == 1 && c.op[i] % static_cast<std::uintptr_t>(c.elem) == 0;
      for (int k = 1; k < N; ++k) rows_aligned = rows_aligned && st[k] % K == 0;
      if (rows_aligned) {
        o.m = static_cast<int>((c.op[i] / static_cast<std::uintptr_t>(c.elem) + static_cast<std::uintptr_t>(pl.head)) %
                               static_cast<std::uintptr_t>(K));
        o.mode = o.m == 0 ? 0 : 1;
      }
    }
  }
  // Measured on an H200 (3-D diffusion): float chunks 0.86x -> 0.92x memcpy; double chunks 0.92x
  // -> 0.98x (with each element's store condition computed once per thread, emit_head; the elements
  // outside whole chunks in a kernel of their own: 0.91x).
  d.partial = d.march && K > 1 && partial_ok(d);
  // A chunk straddling the head needs a lane before the line's first: a whole line of them.
  if (d.partial && d.head > 0 && d.shift == 0) d.shift = 128 / (K * c.elem);
  fill_words(c, pl.anchor, pl.valid ? pl.st.data() : nullptr, words);
  return d;
}


void stencil_grid(const stencil_call& c, const stencil_desc& d, unsigned (&grid)[3]) {
  // A marching block: d.warps warps of U rows, 32 chunks along dim 0 (emit_head).
  const std::int64_t K = d.k, U = d.march ? d.warps * d.rows : d.rows, rows = (c.ext[1] + U - 1) / U,
                     x = d.march ? 32 * K : 128 * K;
  std::int64_t tiles = rows * (c.count / (c.ext[0] * c.ext[1]));
  if (d.march) tiles = rows * ((c.ext[2] + d.planes - 1) / d.planes) * (c.count / (c.ext[0] * c.ext[1] * c.ext[2]));
  // One block at least: a plane kernel's first threads write a row shorter than the head.
  const std::int64_t chunks = (c.ext[0] - d.head + (d.march ? d.shift * K : 0) + x - 1) / x;
  grid[0] = static_cast<unsigned>(std::max<std::int64_t>(1, chunks));
  grid[1] = static_cast<unsigned>(std::min<std::int64_t>(tiles, 65535));
  grid[2] = d.one_tile ? static_cast<unsigned>((tiles + 65534) / 65535) : 1;
}

unsigned stencil_edge_blocks(const stencil_call& c, const stencil_desc& d) {
  const std::int64_t inner = c.ext[0], head = d.head, K = d.k;
  if (!d.edge_kernel() || c.count <= 0) return 0;
  // As the kernel counts them: head elements (fewer in a shorter row), then those from the tail on.
  const std::int64_t tail = head + (inner - head) / K * K,
                     per_row = std::min(inner, head) + std::max<std::int64_t>(0, inner - tail);
  const std::int64_t rows = c.ext[1], planes = c.ext[2], slices = c.count / (inner * rows * planes),
                     blocks = (rows + stencil_edge_threads - 1) / stencil_edge_threads * per_row *
                              ((planes + stencil_edge_planes - 1) / stencil_edge_planes) * slices;
  return static_cast<unsigned>(std::min<std::int64_t>(blocks, std::int64_t{1} << 20));
}

namespace {
// What makes two descriptions generate the same source.
std::string key_of(const stencil_desc& d) {
  // Built in one allocation (each new call shape of a thread makes one, prepare() below).
  std::string k;
  k.reserve(96 + d.expr.size() + 24 * d.operands.size());
  const auto put = [&](int v) {
    char b[16];
    k.append(b, std::to_chars(b, b + sizeof b, v).ptr);
    k += '|';
  };
  k += d.type;
  k += '|';
  k += d.expr;
  k += '|';
  for (const auto& t : d.scalar_types) {
    k += t;
    k += ',';
  }
  for (int v : {d.k, d.rows, d.n, d.head, d.lo, d.hi, d.zlo, d.zhi, d.left, d.right, d.march ? d.planes : 0,
                d.march ? d.warps : 0, int(d.group), int(d.march), int(d.emulate), d.shift, int(d.one_tile),
                int(d.partial)})
    put(v);
  for (const auto& o : d.operands)
    for (int v : {o.member, o.dy, o.dz, o.s, o.mode, o.m}) put(v);
  return k;
}
// One program per description, kept for the process (a handful per program: one per expression
// and plan).
program& stencil_program(const stencil_desc& d) {
  static std::mutex m;
  static std::map<std::string, std::unique_ptr<program>> programs;
  const std::string key = key_of(d);
  std::lock_guard<std::mutex> g(m);
  auto& p = programs[key];
  if (!p) {
    std::vector<std::string> also;
    if (d.edge_kernel()) also.emplace_back("tessera_stencil_edges");
    p = std::make_unique<program>(source{stencil_source(d), "tessera_stencil", {}, "tessera_stencil", also}, "");
  }
  return *p;
}
// What a call's plan and description depend on, apart from the expression: the element size, the
// rank, the strides, the addresses modulo 128 bytes, the operands' distances from the first and
// whether one grid holds a block per tile (not the extents, nor where the arrays lie).
void signature_of(const stencil_call& c, std::vector<std::int64_t>& sig) {
  sig.clear();
  sig.push_back(c.elem);
  sig.push_back(c.n);
  sig.push_back(static_cast<std::int64_t>(c.out % 128));
  sig.push_back(one_tile_grid(c));
  sig.insert(sig.end(), c.out_st, c.out_st + c.n);
  sig.push_back(c.operands ? static_cast<std::int64_t>(c.op[0] % 128) : 0);
  for (std::size_t i = 0; i < c.operands; ++i) {
    sig.push_back(static_cast<std::int64_t>(c.op[i] - c.op[0]));
    const std::int64_t* st = c.op_st + static_cast<std::ptrdiff_t>(i) * c.n;
    sig.insert(sig.end(), st, st + c.n);
  }
}
// A call seen recently on this thread: its plan's outcome, description, anchor (as a distance from
// the first operand) and program. A time-stepping loop launches the same few shapes again and
// again; this spares each launch the plan, the description and the program's key (3.5 us of the
// 4-5 a 3-D diffusion's shard took on the host before, on a 2-core machine).
struct recent_call {
  const std::string* expr = nullptr;  // the executor's text of the expression (and its scalars' types)
  std::vector<std::int64_t> sig;
  bool valid = false;
  stencil_desc d;
  std::int64_t anchor_from_first = 0;
  std::vector<std::int64_t> anchor_st;
  program* prog = nullptr;
};

// The recent call of `c`'s shape on this thread, planned and described now if there is none, and
// its parameter words for `c`.
const recent_call& prepare(const stencil_call& c, std::vector<std::uint64_t>& words) {
  // TESSERA_JIT_STENCIL_ROWS, _PLANES, _SCALAR and _WARPS (stencil.hpp); 0: the defaults.
  static const auto setting = [](const char* name, int most) {
    const char* v = std::getenv(name);
    const int r = v ? std::atoi(v) : 0;
    return r >= 1 && r <= most ? r : 0;
  };
  static const int rows_set = setting("TESSERA_JIT_STENCIL_ROWS", 16),
                   planes_set = setting("TESSERA_JIT_STENCIL_PLANES", 4096),
                   scalar_march = setting("TESSERA_JIT_STENCIL_SCALAR", 1),
                   warps_set = setting("TESSERA_JIT_STENCIL_WARPS", 16);
  thread_local std::vector<recent_call> recent;  // the last 8, replaced in turn
  thread_local std::size_t next = 0;
  thread_local std::vector<std::int64_t> sig;
  if (recent.capacity() < 8) recent.reserve(8);  // descriptions stay put while the 8 fill
  signature_of(c, sig);
  const recent_call* hit = nullptr;
  for (const auto& r : recent)
    if (r.expr == c.expr && r.sig == sig) hit = &r;
  if (hit == nullptr) {
    recent_call r;
    r.expr = c.expr, r.sig = sig;
    tile_plan pl = make_tile_plan(c);
    const bool march = pl.valid && (pl.zlo < 0 || pl.zhi > 0);
    if (march && scalar_march) pl = make_tile_plan(c, true);
    r.valid = pl.valid;
    if (pl.valid) {
      const int rows = rows_set ? rows_set : march ? 1 : 8;
      const int warps = warps_set == 8 || warps_set == 16 ? warps_set : 4;
      // Planes per thread: 4 for chunks (the 3-D diffusion, float: 0.93x memcpy on an H200, 0.99x on
      // an H100, 8: 0.90x; double: 0.96x / 1.00x, 8: 0.98x / 0.93x), 8 for single elements.
      r.d = describe_stencil(c, pl, rows, words, planes_set ? planes_set : pl.k > 1 ? 4 : 8, warps);
      r.anchor_from_first = static_cast<std::int64_t>(pl.anchor - c.op[0]);
      r.anchor_st = pl.st;
      r.prog = &stencil_program(r.d);
    }
    if (recent.size() < 8) {
      recent.push_back(std::move(r));
      hit = &recent.back();
    } else {
      recent[next] = std::move(r);
      hit = &recent[next];
      next = (next + 1) % 8;
    }
  }
  if (hit->valid)
    fill_words(c, c.op[0] + static_cast<std::uintptr_t>(hit->anchor_from_first), hit->anchor_st.data(), words);
  return *hit;
}
}  // namespace

const stencil_desc* prepare_stencil(const stencil_call& c, std::vector<std::uint64_t>& words) {
  const recent_call& r = prepare(c, words);
  return r.valid ? &r.d : nullptr;
}

bool run_stencil(const stencil_call& c, int device, int shard) {
  if (c.count == 0) return false;
  thread_local std::vector<std::uint64_t> words;
  const recent_call& r = prepare(c, words);
  if (!r.valid) return false;
  void* kernel = r.prog->gpu_function(device);
  void* args[] = {words.data()};
  unsigned grid[3];
  stencil_grid(c, r.d, grid);
  const unsigned block[3] = {static_cast<unsigned>(r.d.threads()), 1, 1};
  // As kept graphs (rtc::launch), compared by the parameter words: a time-stepping loop between
  // two arrays gets one graph for each direction (rt::graph_launch), so no sweep sets parameters.
  const std::size_t bytes = words.size() * sizeof(std::uint64_t);
  launch(kernel, device, shard, grid, block, 0, args, "tessera_stencil", words.data(), bytes);
  // The elements outside whole chunks, where the march leaves them: after it, on the same stream
  // (as a separate pass they cost what the march's edge block did: 0.91x against 0.92x memcpy for
  // the double diffusion on an H200, which takes its straddling chunks now).
  if (const unsigned edges = stencil_edge_blocks(c, r.d)) {
    const unsigned eg[3] = {edges, 1, 1}, eb[3] = {stencil_edge_threads, 1, 1};
    launch(r.prog->gpu_function(device, 1), device, shard, eg, eb, 0, args, "tessera_stencil_edges", words.data(),
           bytes);
  }
  return true;
}

void compile_stencil(const std::string& code, int arch) {
  (void)cubin(source{code, "tessera_stencil", {}, "tessera_stencil", {}}, arch);
}

}  // namespace tessera::detail::rtc
