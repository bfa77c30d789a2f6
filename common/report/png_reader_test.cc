#include "common/report/png_reader.h"

#include <random>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace windquant::report {
namespace {

using ::windquant::testing::StatusIs;

RgbaImage RandomImage(int w, int h, uint32_t seed) {
  RgbaImage img;
  img.width = w;
  img.height = h;
  img.rgba.resize(static_cast<size_t>(w) * h * 4);
  std::mt19937 rng(seed);
  // Smooth gradients plus noise, so every filter has something to predict.
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &img.rgba[(static_cast<size_t>(y) * w + x) * 4];
      p[0] = static_cast<uint8_t>(x * 3 + (rng() % 7));
      p[1] = static_cast<uint8_t>(y * 5 + (rng() % 5));
      p[2] = static_cast<uint8_t>(rng());
      p[3] = static_cast<uint8_t>(200 + rng() % 56);
    }
  }
  return img;
}

TEST(PngReaderTest, DecodesEveryFilterType) {
  const RgbaImage img = RandomImage(37, 23, 7);
  for (const std::vector<int>& filters :
       std::vector<std::vector<int>>{{0}, {1}, {2}, {3}, {4}, {0, 1, 2, 3, 4}}) {
    absl::StatusOr<RgbaImage> back = DecodePng(EncodePngForTest(img, filters), "mem.png");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->width, 37);
    EXPECT_EQ(back->height, 23);
    EXPECT_EQ(back->rgba, img.rgba) << "filter " << filters[0];
  }
}

TEST(PngReaderTest, RejectsBadInput) {
  EXPECT_THAT(DecodePng("hello", "x.png"),
              StatusIs(absl::StatusCode::kInvalidArgument, "x.png: not a PNG (signature)"));
  std::string png = EncodePngForTest(RandomImage(8, 8, 1), {4});
  absl::StatusOr<RgbaImage> truncated = DecodePng(png.substr(0, png.size() - 20), "t.png");
  EXPECT_THAT(truncated,
              StatusIs(absl::StatusCode::kInvalidArgument, "t.png: chunk runs past the end"));
  std::string corrupt = png;
  corrupt[45] ^= 0x5a;  // inside the first IDAT: the deflate stream breaks
  EXPECT_THAT(DecodePng(corrupt, "c.png"),
              StatusIs(absl::StatusCode::kInvalidArgument, "c.png: image data: inflate gave"));
}

}  // namespace
}  // namespace windquant::report
