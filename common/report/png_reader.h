// A minimal PNG decoder for tests: 8-bit greyscale, grey+alpha, RGB and RGBA,
// non-interlaced (what Chromium's --screenshot writes), all five scanline filters.
// Enough to check a screenshot is not blank; not a general image library.
// Stateless; thread-safe.
#ifndef WINDQUANT_COMMON_REPORT_PNG_READER_H_
#define WINDQUANT_COMMON_REPORT_PNG_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace windquant::report {

struct RgbaImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgba;  // width * height * 4, row-major

  const uint8_t* Pixel(int x, int y) const {
    return &rgba[(static_cast<size_t>(y) * width + x) * 4];
  }
};

// Decodes PNG bytes. INVALID_ARGUMENT / UNIMPLEMENTED (unsupported bit depth, colour
// type or interlacing) with a one-line message prefixed by `source`.
absl::StatusOr<RgbaImage> DecodePng(absl::string_view bytes, const std::string& source);

// Test helper for the decoder: an RGBA image as PNG, row y filtered with filter type
// filters[y % filters.size()] (0 none, 1 sub, 2 up, 3 average, 4 Paeth).
std::string EncodePngForTest(const RgbaImage& image, const std::vector<int>& filters);

}  // namespace windquant::report

#endif  // WINDQUANT_COMMON_REPORT_PNG_READER_H_
