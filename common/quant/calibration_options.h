// CalibrationOptions: the calibration pass (DESIGN.md section 3): activation
// statistics per linear input. Its windows and the loss slice of the episode-end
// reward come from `text`'s range `tokens` only. These are the run config's
// calibration.* keys (config::CalibrationConfig is this struct; common/config
// validates them). No torch here.
#ifndef WINDQUANT_COMMON_QUANT_CALIBRATION_OPTIONS_H_
#define WINDQUANT_COMMON_QUANT_CALIBRATION_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/base/text_range.h"

namespace windquant::quant {

struct CalibrationOptions {
  std::string text;                      // UTF-8 text file
  std::vector<int64_t> tokens = {0, 0};  // the part of `text` calibration reads (TextRange)
  int samples = 32;                      // sequences
  int seq_len = 256;                     // tokens per sequence (incl. BOS)
  uint64_t seed = 0;                     // which windows of the text are sampled

  // `text` and `tokens` as the TextRange base::ReadTextRange reads.
  base::TextRange range() const { return {text, tokens}; }
};

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_CALIBRATION_OPTIONS_H_
