// SPDX-License-Identifier: Apache-2.0
// Tessera host executor for sorts and unique runs (backend/host/scan.hpp): the standard algorithms
// for the two key types a SortTask carries (sort_key_t: int32 and int64), compiled once here
// rather than in every program, which then needs no <algorithm> or <numeric>.
#include <backend/host/scan.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

namespace tessera::detail::host {
namespace {

template <class K>
void sort_keys(const SortTask<K>& t) {
  const auto n = static_cast<std::size_t>(t.n);
  if (!t.idx_out) {
    // Equal keys are equal bits: stability cannot show.
    std::copy(t.keys_in, t.keys_in + n, t.keys_out);
    if (t.descending) std::sort(t.keys_out, t.keys_out + n, [](K a, K b) { return b < a; });
    else std::sort(t.keys_out, t.keys_out + n);
    return;
  }
  std::vector<std::int64_t> p(n);
  std::iota(p.begin(), p.end(), std::int64_t(0));
  const K* k = t.keys_in;
  if (t.descending) std::stable_sort(p.begin(), p.end(), [k](std::int64_t a, std::int64_t b) { return k[b] < k[a]; });
  else std::stable_sort(p.begin(), p.end(), [k](std::int64_t a, std::int64_t b) { return k[a] < k[b]; });
  for (std::size_t i = 0; i < n; ++i) {
    t.keys_out[i] = k[p[i]];
    t.idx_out[i] = t.idx_in[p[i]];
  }
}

template <class K>
void unique_keys(const UniqueTask<K>& t) {
  const K* end = std::unique_copy(t.in, t.in + t.n, t.out);
  *t.count = static_cast<std::int64_t>(end - t.out);
}

}  // namespace

void run(const SortTask<std::int32_t>& t) { sort_keys(t); }
void run(const SortTask<std::int64_t>& t) { sort_keys(t); }
void run(const UniqueTask<std::int32_t>& t) { unique_keys(t); }
void run(const UniqueTask<std::int64_t>& t) { unique_keys(t); }

}  // namespace tessera::detail::host
