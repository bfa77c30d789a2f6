#include "common/report/png_reader.h"

#include <zlib.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace windquant::report {
namespace {

constexpr unsigned char kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

uint32_t Be32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

void PutBe32(std::string* out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out->push_back(static_cast<char>((v >> s) & 0xff));
}

int Paeth(int a, int b, int c) {
  const int p = a + b - c;
  const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}

// Predictor of filter `type` for byte i of a row (a = left, b = up, c = up-left).
int Predict(int type, int a, int b, int c) {
  switch (type) {
    case 1:
      return a;
    case 2:
      return b;
    case 3:
      return (a + b) / 2;
    case 4:
      return Paeth(a, b, c);
    default:
      return 0;
  }
}

void AppendChunk(std::string* out, const char* type, const std::string& data) {
  PutBe32(out, static_cast<uint32_t>(data.size()));
  std::string body = std::string(type, 4) + data;
  out->append(body);
  PutBe32(out, static_cast<uint32_t>(
                   crc32(0, reinterpret_cast<const Bytef*>(body.data()), body.size())));
}

}  // namespace

absl::StatusOr<RgbaImage> DecodePng(absl::string_view bytes, const std::string& source) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
  };
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 8 || std::memcmp(p, kSignature, 8) != 0) return bad("not a PNG (signature)");
  size_t pos = 8;
  uint32_t width = 0, height = 0;
  int channels = 0;
  bool have_header = false, have_end = false;
  std::string idat;
  while (pos + 12 <= bytes.size()) {
    const uint32_t len = Be32(p + pos);
    if (len > bytes.size() - pos - 12) return bad("chunk runs past the end");
    const std::string type(bytes.data() + pos + 4, 4);
    const unsigned char* data = p + pos + 8;
    if (type == "IHDR") {
      if (len != 13) return bad("IHDR length");
      width = Be32(data);
      height = Be32(data + 4);
      const int depth = data[8], color = data[9], interlace = data[12];
      if (depth != 8) return absl::UnimplementedError(absl::StrCat(source, ": bit depth ", depth));
      if (interlace != 0) return absl::UnimplementedError(absl::StrCat(source, ": interlaced"));
      switch (color) {
        case 0:
          channels = 1;
          break;
        case 2:
          channels = 3;
          break;
        case 4:
          channels = 2;
          break;
        case 6:
          channels = 4;
          break;
        default:
          return absl::UnimplementedError(absl::StrCat(source, ": colour type ", color));
      }
      if (width == 0 || height == 0 || width > 32768 || height > 32768) return bad("image size");
      have_header = true;
    } else if (type == "IDAT") {
      idat.append(reinterpret_cast<const char*>(data), len);
    } else if (type == "IEND") {
      have_end = true;
      break;
    }
    pos += 12 + len;
  }
  if (!have_header) return bad("no IHDR");
  if (!have_end) return bad("truncated (no IEND)");

  const size_t stride = static_cast<size_t>(width) * channels;
  std::vector<uint8_t> raw((stride + 1) * height);
  z_stream z{};
  if (inflateInit(&z) != Z_OK) return bad("inflateInit failed");
  z.next_in = reinterpret_cast<Bytef*>(idat.data());
  z.avail_in = static_cast<uInt>(idat.size());
  z.next_out = raw.data();
  z.avail_out = static_cast<uInt>(raw.size());
  const int rc = inflate(&z, Z_FINISH);
  const size_t produced = raw.size() - z.avail_out;
  inflateEnd(&z);
  if (rc != Z_STREAM_END || produced != raw.size()) {
    return bad(absl::StrCat("image data: inflate gave ", produced, " of ", raw.size(),
                            " bytes (zlib rc ", rc, ")"));
  }

  RgbaImage img;
  img.width = static_cast<int>(width);
  img.height = static_cast<int>(height);
  img.rgba.resize(static_cast<size_t>(width) * height * 4);
  std::vector<uint8_t> prev(stride, 0), cur(stride);
  for (uint32_t y = 0; y < height; ++y) {
    const uint8_t* row = &raw[y * (stride + 1)];
    const int filter = row[0];
    if (filter > 4) return bad(absl::StrCat("row ", y, ": filter type ", filter));
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= static_cast<size_t>(channels) ? cur[i - channels] : 0;
      const int c = i >= static_cast<size_t>(channels) ? prev[i - channels] : 0;
      cur[i] = static_cast<uint8_t>(row[1 + i] + Predict(filter, a, prev[i], c));
    }
    for (uint32_t x = 0; x < width; ++x) {
      const uint8_t* s = &cur[x * channels];
      uint8_t* d = &img.rgba[(static_cast<size_t>(y) * width + x) * 4];
      if (channels <= 2) {
        d[0] = d[1] = d[2] = s[0];
        d[3] = channels == 2 ? s[1] : 255;
      } else {
        d[0] = s[0], d[1] = s[1], d[2] = s[2];
        d[3] = channels == 4 ? s[3] : 255;
      }
    }
    std::swap(prev, cur);
  }
  return img;
}

std::string EncodePngForTest(const RgbaImage& image, const std::vector<int>& filters) {
  const size_t stride = static_cast<size_t>(image.width) * 4;
  std::string raw;
  std::vector<uint8_t> zero(stride, 0);
  for (int y = 0; y < image.height; ++y) {
    const int f = filters.empty() ? 0 : filters[y % filters.size()];
    const uint8_t* cur = &image.rgba[y * stride];
    const uint8_t* prev = y > 0 ? &image.rgba[(y - 1) * stride] : zero.data();
    raw.push_back(static_cast<char>(f));
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= 4 ? cur[i - 4] : 0;
      const int c = i >= 4 ? prev[i - 4] : 0;
      raw.push_back(static_cast<char>(cur[i] - Predict(f, a, prev[i], c)));
    }
  }
  uLongf zlen = compressBound(raw.size());
  std::string z(zlen, '\0');
  compress(reinterpret_cast<Bytef*>(z.data()), &zlen, reinterpret_cast<const Bytef*>(raw.data()),
           raw.size());
  z.resize(zlen);
  std::string ihdr;
  PutBe32(&ihdr, static_cast<uint32_t>(image.width));
  PutBe32(&ihdr, static_cast<uint32_t>(image.height));
  ihdr += std::string("\x08\x06\x00\x00\x00", 5);
  std::string out(reinterpret_cast<const char*>(kSignature), 8);
  AppendChunk(&out, "IHDR", ihdr);
  // Split the data over two IDAT chunks, as real encoders may.
  const size_t half = z.size() / 2;
  AppendChunk(&out, "IDAT", z.substr(0, half));
  AppendChunk(&out, "IDAT", z.substr(half));
  AppendChunk(&out, "IEND", "");
  return out;
}

}  // namespace windquant::report
