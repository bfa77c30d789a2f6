#include "common/report/png_reader.h"

#include <zlib.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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

// What DecodePng needs of the chunks: the header's size and channels, the image data.
struct PngChunks {
  uint32_t width = 0, height = 0;
  int channels = 0;
  std::string idat;
};

absl::Status Bad(const std::string& source, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
}

// Channels of an 8-bit PNG colour type (grey, RGB, grey + alpha, RGBA).
absl::StatusOr<int> Channels(int color, const std::string& source) {
  switch (color) {
    case 0:
      return 1;
    case 2:
      return 3;
    case 4:
      return 2;
    case 6:
      return 4;
    default:
      return absl::UnimplementedError(absl::StrCat(source, ": colour type ", color));
  }
}

absl::Status ReadHeader(const unsigned char* data, uint32_t len, const std::string& source,
                        PngChunks* out) {
  if (len != 13) return Bad(source, "IHDR length");
  out->width = Be32(data);
  out->height = Be32(data + 4);
  const int depth = data[8], color = data[9], interlace = data[12];
  if (depth != 8) return absl::UnimplementedError(absl::StrCat(source, ": bit depth ", depth));
  if (interlace != 0) return absl::UnimplementedError(absl::StrCat(source, ": interlaced"));
  absl::StatusOr<int> channels = Channels(color, source);
  if (!channels.ok()) return channels.status();
  out->channels = *channels;
  if (out->width == 0 || out->height == 0 || out->width > 32768 || out->height > 32768) {
    return Bad(source, "image size");
  }
  return absl::OkStatus();
}

// Walks the chunks after the signature up to IEND.
absl::StatusOr<PngChunks> ReadChunks(absl::string_view bytes, const std::string& source) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  PngChunks chunks;
  bool have_header = false, have_end = false;
  size_t pos = 8;
  while (pos + 12 <= bytes.size()) {
    const uint32_t len = Be32(p + pos);
    if (len > bytes.size() - pos - 12) return Bad(source, "chunk runs past the end");
    const std::string type(bytes.data() + pos + 4, 4);
    const unsigned char* data = p + pos + 8;
    if (type == "IHDR") {
      absl::Status s = ReadHeader(data, len, source, &chunks);
      if (!s.ok()) return s;
      have_header = true;
    } else if (type == "IDAT") {
      chunks.idat.append(reinterpret_cast<const char*>(data), len);
    } else if (type == "IEND") {
      have_end = true;
      break;
    }
    pos += 12 + len;
  }
  if (!have_header) return Bad(source, "no IHDR");
  if (!have_end) return Bad(source, "truncated (no IEND)");
  return chunks;
}

// The filtered rows: `size` bytes inflated from the image data.
absl::StatusOr<std::vector<uint8_t>> Inflate(std::string& idat, size_t size,
                                             const std::string& source) {
  std::vector<uint8_t> raw(size);
  z_stream z{};
  if (inflateInit(&z) != Z_OK) return Bad(source, "inflateInit failed");
  z.next_in = reinterpret_cast<Bytef*>(idat.data());
  z.avail_in = static_cast<uInt>(idat.size());
  z.next_out = raw.data();
  z.avail_out = static_cast<uInt>(raw.size());
  const int rc = inflate(&z, Z_FINISH);
  const size_t produced = raw.size() - z.avail_out;
  inflateEnd(&z);
  if (rc != Z_STREAM_END || produced != raw.size()) {
    return Bad(source, absl::StrCat("image data: inflate gave ", produced, " of ", raw.size(),
                                    " bytes (zlib rc ", rc, ")"));
  }
  return raw;
}

}  // namespace

absl::StatusOr<RgbaImage> DecodePng(absl::string_view bytes, const std::string& source) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 8 || std::memcmp(p, kSignature, 8) != 0) {
    return Bad(source, "not a PNG (signature)");
  }
  absl::StatusOr<PngChunks> chunks = ReadChunks(bytes, source);
  if (!chunks.ok()) return chunks.status();
  const uint32_t width = chunks->width, height = chunks->height;
  const int channels = chunks->channels;
  const size_t stride = static_cast<size_t>(width) * channels;
  absl::StatusOr<std::vector<uint8_t>> raw = Inflate(chunks->idat, (stride + 1) * height, source);
  if (!raw.ok()) return raw.status();

  RgbaImage img;
  img.width = static_cast<int>(width);
  img.height = static_cast<int>(height);
  img.rgba.resize(static_cast<size_t>(width) * height * 4);
  std::vector<uint8_t> prev(stride, 0), cur(stride);
  for (uint32_t y = 0; y < height; ++y) {
    const uint8_t* row = &(*raw)[y * (stride + 1)];
    const int filter = row[0];
    if (filter > 4) return Bad(source, absl::StrCat("row ", y, ": filter type ", filter));
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
