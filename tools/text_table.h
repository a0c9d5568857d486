// A plain-text table for terminal output: a header row, columns padded to their widest cell,
// each column left- or right-aligned.
#pragma once

#include <string>
#include <vector>

namespace tessera::cli {

class TextTable {
 public:
  struct Column {
    std::string name;
    bool right_aligned = false;
  };

  explicit TextTable(std::vector<Column> columns);

  // A row is cut or padded (with empty cells) to the number of columns.
  void add_row(std::vector<std::string> cells);
  size_t rows() const { return rows_.size(); }

  // Header (unless `with_header` is false), then rows; two spaces between columns; no trailing
  // spaces; a newline after each row.
  std::string render(bool with_header = true) const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace tessera::cli
