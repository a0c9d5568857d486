// The tuning results file, in PyTorch TunableOp's CSV format:
//
//   Validator,TESSERA_VERSION,0.3.0
//   Validator,CUDA_VERSION,12.4
//   ...
//   GemmTunableOp_BFloat16_TN,tn_4096_1_4096_ld_4096_4096_4096,cublaslt_algo_23_splitk_4,0.0123
//
// `Validator,KEY,VALUE` lines describe the software and device that produced the results (the
// value is the rest of the line, so it may hold commas). Every other line is
// `OP,PARAMS,SOLUTION[,AVG_MS]` (AVG_MS optional, as in PyTorch). Files are written with the
// validators first, then the results sorted by signature, so that diffs are stable.
//
// Loading is forgiving where PyTorch is: blank lines are skipped, fields are trimmed, a CRLF file
// reads like an LF one; a result line that cannot be used is reported and skipped while the rest
// load. If any validator differs from what this build expects -- a key missing, a different
// value, or a key this build does not know -- the whole file is ignored (results from another
// library version or GPU may be wrong or slow); saving over it then writes a fresh file, as
// PyTorch does.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/backend/tunable_gemm.h"
#include "runtime/tuning/tuning_results.h"

namespace tessera {

using Validators = std::map<std::string, std::string>;

struct LoadedResults {
  bool exists = false;           // false: no file at the path (not an error; nothing loaded)
  bool validators_match = true;  // false: `entries` is empty and `warnings` say which differ
  Validators file_validators;    // as the file has them
  TunedEntries entries;          // usable results
  // One line each: a validator that differs (key, the file's value, the expected one), a result
  // line skipped ("path:line: why"), a repeated result (the later line wins).
  std::vector<std::string> warnings;
};

class ResultsFile {
 public:
  // Reads `path`. A missing file gives an empty result with exists=false; a file that exists but
  // cannot be read (permissions, a directory, an I/O error) is an error naming the path.
  static absl::StatusOr<LoadedResults> load(const std::string& path, const Validators& expected);

  // Replaces `path` atomically (see atomic_file.h) with `validators` and `entries`. Nothing is
  // written when a value cannot be represented (a comma or line break in a key or solution, an
  // invalid signature); the error names it. An I/O failure leaves the old file intact and names
  // the path.
  static absl::Status save(const std::string& path, const Validators& validators,
                           const TunedEntries& entries);

  // The text load() reads, with `source` (a path) in messages; never fails.
  static LoadedResults parse(std::string_view text, std::string_view source,
                             const Validators& expected);
  // The text save() writes.
  static absl::StatusOr<std::string> format(const Validators& validators,
                                            const TunedEntries& entries);
};

}  // namespace tessera
