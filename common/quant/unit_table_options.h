// UnitTableOptions: what a unit table is built with (the run config's
// quant.chunk_size and quant.salient_fraction; config::QuantConfig embeds this
// struct, and common/config validates both keys). Read by the unit-table
// builder, the stage worker, the quantization session and the table
// fingerprints. No torch here.
#ifndef WINDQUANT_COMMON_QUANT_UNIT_TABLE_OPTIONS_H_
#define WINDQUANT_COMMON_QUANT_UNIT_TABLE_OPTIONS_H_

#include <cstdint>

#include "common/plan/effective_bits.h"
#include "common/quant/unit_fit.h"

namespace windquant::quant {

struct UnitTableOptions {
  // Columns of a matrix per unit (the last chunk of a row may be narrower); >= 1.
  int64_t chunk_size = 256;
  // Share of a unit's entries kept exactly as INT8 salient entries (SalientCount).
  double salient_fraction = plan::kDefaultSalientFraction;
};

// The quantizer a table of `options` is fitted with: the defaults of QuantizerOptions
// but options.salient_fraction.
inline QuantizerOptions QuantizerFor(const UnitTableOptions& options) {
  QuantizerOptions quantizer;
  quantizer.salient_fraction = options.salient_fraction;
  return quantizer;
}

}  // namespace windquant::quant

#endif  // WINDQUANT_COMMON_QUANT_UNIT_TABLE_OPTIONS_H_
