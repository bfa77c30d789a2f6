// Opens a rendered report in headless Chromium (Debian's `chromium` package), takes a
// screenshot and checks it is not blank and that the heat map's colours are on screen.
// Skips when /usr/bin/chromium is absent. Label: integration (Chromium takes seconds).
#include <stdlib.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/base/files.h"
#include "common/report/html_report.h"
#include "common/report/png_reader.h"
#include "gtest/gtest.h"

namespace windquant::report {
namespace {

constexpr char kChromium[] = "/usr/bin/chromium";
constexpr int kWidth = 1200, kHeight = 1600;
// A pixel "has" a colour when every channel is within this of it (anti-aliasing and
// colour management may nudge values; flat rectangles keep theirs).
constexpr int kColourTolerance = 3;

ReportData Sample() {
  ReportData d;
  d.model_name = "stories260k <test> & co";
  d.fingerprint = "0123abcd";
  d.fp_perplexity = 11.75;
  d.target_bits = 2.0;
  for (int l = 0; l < 6; ++l) {
    for (int m = 0; m < kNumMatrixTypes; ++m) {
      d.units.push_back({l, m, 4096, (l + m) % 3 == 0 ? 4.25 : 2.13});
    }
  }
  d.points = {{"rl", 2.0, 17.5},        {"uniform-2", 2.12, 40.0}, {"uniform-3", 3.1, 14.0},
              {"uniform-4", 4.1, 12.2}, {"greedy", 2.0, 21.0},     {"lagrange", 1.99, 19.5},
              {"random", 1.98, 95.0}};
  d.winner = "rl";
  for (int u = 0; u < 40; ++u) {
    d.curve.push_back({u, -2.0 + 0.05 * u + 0.2 * std::sin(u),
                       u < 3 ? std::nan("") : 30.0 - 0.3 * u, 2.6 - 0.015 * u, 0.02 * u,
                       u < 20 ? 2.5 : 2.0});
  }
  d.wall_time_s = 321.5;
  d.notes = {"synthetic data for the Chromium screenshot test"};
  return d;
}

std::array<int, 3> Hex(const std::string& c) {
  return {std::stoi(c.substr(1, 2), nullptr, 16), std::stoi(c.substr(3, 2), nullptr, 16),
          std::stoi(c.substr(5, 2), nullptr, 16)};
}

int64_t CountNear(const RgbaImage& img, const std::string& colour) {
  const std::array<int, 3> c = Hex(colour);
  int64_t n = 0;
  for (int y = 0; y < img.height; ++y) {
    for (int x = 0; x < img.width; ++x) {
      const uint8_t* p = img.Pixel(x, y);
      if (std::abs(p[0] - c[0]) <= kColourTolerance && std::abs(p[1] - c[1]) <= kColourTolerance &&
          std::abs(p[2] - c[2]) <= kColourTolerance) {
        ++n;
      }
    }
  }
  return n;
}

TEST(HtmlReportChromiumTest, ScreenshotIsNotBlankAndShowsTheHeatMap) {
  ASSERT_TRUE(base::PathExists(kChromium))
      << kChromium << " not found (apt-get install chromium; scripts/install-deps.sh)";
  std::string tmpl = ::testing::TempDir() + "/wq_report_chromium_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::string dir = tmpl;
  const std::string html = dir + "/report.html", png = dir + "/screenshot.png";
  const ReportData data = Sample();
  ASSERT_TRUE(WriteHtmlReport(data, html).ok());

  const std::string cmd =
      absl::StrCat("timeout 180 ", kChromium,
                   " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
                   " --disable-background-networking --disable-component-update --disable-sync"
                   " --disable-dev-shm-usage --hide-scrollbars --force-device-scale-factor=1"
                   " --user-data-dir=",
                   dir, "/profile --screenshot=", png, " --window-size=", kWidth, ",", kHeight,
                   " file://", html, " > ", dir, "/chromium.log 2>&1");
  const int rc = std::system(cmd.c_str());
  absl::StatusOr<std::string> log = base::ReadFile(dir + "/chromium.log");
  ASSERT_EQ(rc, 0) << cmd << "\n" << (log.ok() ? *log : "");
  absl::StatusOr<std::string> bytes = base::ReadFile(png);
  ASSERT_TRUE(bytes.ok()) << bytes.status() << "\n" << (log.ok() ? *log : "");
  absl::StatusOr<RgbaImage> img = DecodePng(*bytes, png);
  ASSERT_TRUE(img.ok()) << img.status();
  std::cout << "screenshot: " << png << " (" << img->width << "x" << img->height << ")\n";
  EXPECT_EQ(img->width, kWidth);
  EXPECT_EQ(img->height, kHeight);

  // Not blank: many colours, a fair share of non-white pixels.
  std::set<uint32_t> colours;
  int64_t non_white = 0;
  for (int y = 0; y < img->height; ++y) {
    for (int x = 0; x < img->width; ++x) {
      const uint8_t* p = img->Pixel(x, y);
      colours.insert((uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | p[2]);
      if (p[0] < 245 || p[1] < 245 || p[2] < 245) ++non_white;
    }
  }
  const double non_white_share = static_cast<double>(non_white) / (img->width * img->height);
  std::cout << "distinct colours " << colours.size() << ", non-white " << non_white_share << "\n";
  EXPECT_GE(colours.size(), 50u);
  EXPECT_GT(non_white_share, 0.02);

  // The heat map is on screen: both cell colours fill whole cells (78 x 26 px each;
  // 14 and 28 cells of them, numbers inside), far more than any anti-aliased edge.
  const int64_t high = CountNear(*img, BitsColor(4.25));
  const int64_t low = CountNear(*img, BitsColor(2.13));
  std::cout << "heat map pixels: 4.25 bits " << high << ", 2.13 bits " << low << "\n";
  EXPECT_GT(high, 10 * 1000);
  EXPECT_GT(low, 20 * 1000);
  // The RL marker's red is there too (the PPL chart rendered).
  EXPECT_GT(CountNear(*img, "#d62728"), 50);
}

}  // namespace
}  // namespace windquant::report
