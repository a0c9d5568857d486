#include "tools/text_table.h"

#include <algorithm>

#include "tools/proto_text.h"

namespace tessera::cli {

TextTable::TextTable(std::vector<Column> columns) : columns_(std::move(columns)) {}

void TextTable::add_row(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

std::string TextTable::render(bool with_header) const {
  std::vector<size_t> widths(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    widths[c] = with_header ? display_width(columns_[c].name) : 0;
  }
  for (const auto& row : rows_) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], display_width(row[c]));
  }
  std::string out;
  auto append_row = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t c = 0; c < columns_.size(); ++c) {
      const std::string& cell = cells[c];
      const std::string pad(widths[c] - display_width(cell), ' ');
      if (c > 0) line += "  ";
      line += columns_[c].right_aligned ? pad + cell : cell + pad;
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += line;
    out += '\n';
  };
  std::vector<std::string> header;
  for (const Column& column : columns_) header.push_back(column.name);
  if (with_header) append_row(header);
  for (const auto& row : rows_) append_row(row);
  return out;
}

}  // namespace tessera::cli
