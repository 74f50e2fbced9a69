// SPDX-License-Identifier: Apache-2.0
// Tessera: the layout of printed arrays (print.hpp).
#include <backend/io/print.hpp>

#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace tessera::detail {

std::vector<index_t> shown(index_t n, index_t keep) {
  std::vector<index_t> s;
  if (n <= 2 * keep + 1) {
    for (index_t i = 0; i < n; ++i) s.push_back(i);
  } else {
    for (index_t i = 0; i < keep; ++i) s.push_back(i);
    s.push_back(-1);  // the ellipsis
    for (index_t i = n - keep; i < n; ++i) s.push_back(i);
  }
  return s;
}

void print_matrix(std::ostream& os, const void* values, std::string (*format)(const void*, index_t), index_t base,
                  index_t rows, index_t cols, index_t cs) {
  const auto rs = shown(rows, 5), cols_shown = shown(cols, 4);
  std::vector<std::vector<std::string>> cells;
  std::vector<std::size_t> width(cols_shown.size(), 1);
  for (auto r : rs) {
    std::vector<std::string> row;
    for (std::size_t j = 0; j < cols_shown.size(); ++j) {
      const auto c = cols_shown[j];
      std::string s = (r < 0) ? (c < 0 ? "⋱" : "⋮") : (c < 0 ? "…" : format(values, base + r + c * cs));
      if (s.size() > width[j] && s != "⋮" && s != "…" && s != "⋱") width[j] = s.size();
      row.push_back(std::move(s));
    }
    cells.push_back(std::move(row));
  }
  for (auto& row : cells) {
    for (std::size_t j = 0; j < row.size(); ++j) {
      const bool glyph = row[j] == "⋮" || row[j] == "…" || row[j] == "⋱";
      const std::size_t len = glyph ? 1 : row[j].size();
      os << "  " << std::string(width[j] > len ? width[j] - len : 0, ' ') << row[j];
    }
    os << '\n';
  }
}

}  // namespace tessera::detail
