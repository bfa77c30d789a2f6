// SessionOptions: what a quant::QuantizationSession reads (quantization_session.h),
// without torch, so that the options of the nodes that open a session can carry one.
// job::SessionOptionsFrom builds it from the run config.
#ifndef WINDQUANT_COMMON_QUANT_SESSION_OPTIONS_H_
#define WINDQUANT_COMMON_QUANT_SESSION_OPTIONS_H_

#include <string>

#include "common/base/log.h"
#include "common/base/text_range.h"
#include "common/model/compute_options.h"
#include "common/quant/calibration_options.h"
#include "common/quant/compensation.h"
#include "common/quant/unit_table_options.h"

namespace windquant::quant {

// What a session reads. The run config's keys are named beside each field; errors name
// those keys.
struct SessionOptions {
  std::string model_dir;           // model.dir: config.json, *.safetensors, tokenizer.json
  model::ComputeOptions compute;   // model.device: where the model computes
  CalibrationOptions calibration;  // calibration.*
  UnitTableOptions units;          // quant.chunk_size, quant.salient_fraction
  std::string cache_dir;           // quant.cache_dir; empty = no unit-table cache
  // quant.compensation: kGptq applies plans with error compensation (gptq.h), the
  // factors from a calibration pass over the session's windows; kNone rounds each unit.
  Compensation compensation = Compensation::kNone;
  base::TextRange heldout;  // evaluation.heldout
  int context = 256;        // evaluation.context: window length of Perplexity
  int batch = 16;           // evaluation.batch: windows per forward

  bool use_cache = true;       // read/write cache_dir
  bool load_eval_text = true;  // tokenize the held-out text (heldout)
  // false: no calibration pass and no fits here (a cache hit is still taken); the
  // caller hands in fits built elsewhere (AdoptFits), e.g. by the actors of the
  // one-process job, so that the model is fitted once.
  bool fit = true;
  // Progress / warning lines (nullptr = silent).
  base::LogSink log;
};

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_SESSION_OPTIONS_H_
