#include "common/store/s3_xml.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/base/status_macros.h"

namespace windquant::store {
namespace {

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// The first element named exactly `name` at or after `from`: sets the inner
// range [*inner_begin, *inner_end) and *next past its end. False if none.
absl::StatusOr<bool> FindElement(absl::string_view xml, absl::string_view name, size_t from,
                                 size_t* inner_begin, size_t* inner_end, size_t* next) {
  const std::string open = absl::StrCat("<", name);
  size_t pos = from;
  while ((pos = xml.find(open, pos)) != absl::string_view::npos) {
    const size_t after = pos + open.size();
    if (after >= xml.size()) break;
    const char c = xml[after];
    if (c != '>' && c != '/' && !absl::ascii_isspace(c)) {  // e.g. <KeyCount> for <Key>
      pos = after;
      continue;
    }
    const size_t gt = xml.find('>', after);
    if (gt == absl::string_view::npos) {
      return absl::DataLossError(absl::StrCat("S3 XML: unterminated <", name, ">"));
    }
    if (xml[gt - 1] == '/') {  // <name/>
      *inner_begin = *inner_end = gt + 1;
      *next = gt + 1;
      return true;
    }
    const std::string close = absl::StrCat("</", name, ">");
    const size_t end = xml.find(close, gt + 1);
    if (end == absl::string_view::npos) {
      return absl::DataLossError(absl::StrCat("S3 XML: missing ", close));
    }
    *inner_begin = gt + 1;
    *inner_end = end;
    *next = end + close.size();
    return true;
  }
  return false;
}

absl::StatusOr<std::string> OneElement(absl::string_view xml, absl::string_view name) {
  WQ_ASSIGN_OR_RETURN(std::vector<std::string> all, XmlElements(xml, name));
  if (all.empty()) return std::string();
  return all.front();
}

}  // namespace

absl::StatusOr<std::string> XmlUnescape(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '&') {
      out.push_back(text[i]);
      continue;
    }
    const size_t semi = text.find(';', i);
    if (semi == absl::string_view::npos || semi - i > 12) {
      return absl::DataLossError("S3 XML: bad entity reference");
    }
    absl::string_view ent = text.substr(i + 1, semi - i - 1);
    if (ent == "amp")
      out.push_back('&');
    else if (ent == "lt")
      out.push_back('<');
    else if (ent == "gt")
      out.push_back('>');
    else if (ent == "quot")
      out.push_back('"');
    else if (ent == "apos")
      out.push_back('\'');
    else if (!ent.empty() && ent[0] == '#') {
      uint32_t cp = 0;
      const bool ok = (ent.size() > 1 && (ent[1] == 'x' || ent[1] == 'X'))
                          ? absl::SimpleHexAtoi(ent.substr(2), &cp)
                          : absl::SimpleAtoi(ent.substr(1), &cp);
      if (!ok || cp > 0x10FFFF) {
        return absl::DataLossError(absl::StrCat("S3 XML: bad character reference &", ent, ";"));
      }
      AppendUtf8(cp, &out);
    } else {
      return absl::DataLossError(absl::StrCat("S3 XML: unknown entity &", ent, ";"));
    }
    i = semi;
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> XmlElements(absl::string_view xml,
                                                     absl::string_view name) {
  std::vector<std::string> out;
  size_t pos = 0, begin = 0, end = 0, next = 0;
  while (true) {
    WQ_ASSIGN_OR_RETURN(bool found, FindElement(xml, name, pos, &begin, &end, &next));
    if (!found) break;
    out.emplace_back(xml.substr(begin, end - begin));
    pos = next;
  }
  return out;
}

absl::StatusOr<S3ListPage> ParseListObjectsV2(absl::string_view xml) {
  if (xml.find("<ListBucketResult") == absl::string_view::npos) {
    return absl::DataLossError("S3 ListObjectsV2: response has no <ListBucketResult>");
  }
  S3ListPage page;
  WQ_ASSIGN_OR_RETURN(std::vector<std::string> contents, XmlElements(xml, "Contents"));
  for (const std::string& c : contents) {
    WQ_ASSIGN_OR_RETURN(std::string key, OneElement(c, "Key"));
    WQ_ASSIGN_OR_RETURN(std::string size, OneElement(c, "Size"));
    S3ObjectEntry entry;
    WQ_ASSIGN_OR_RETURN(entry.key, XmlUnescape(key));
    if (entry.key.empty() || !absl::SimpleAtoi(size, &entry.size_bytes)) {
      return absl::DataLossError("S3 ListObjectsV2: <Contents> without a valid Key/Size");
    }
    page.objects.push_back(std::move(entry));
  }
  // Top-level fields: search outside the <Contents> blocks (keys are escaped,
  // so these tag names cannot appear inside them anyway).
  WQ_ASSIGN_OR_RETURN(std::string truncated, OneElement(xml, "IsTruncated"));
  page.is_truncated = absl::AsciiStrToLower(absl::StripAsciiWhitespace(truncated)) == "true";
  WQ_ASSIGN_OR_RETURN(std::string token, OneElement(xml, "NextContinuationToken"));
  WQ_ASSIGN_OR_RETURN(page.next_continuation_token, XmlUnescape(token));
  if (page.is_truncated && page.next_continuation_token.empty()) {
    return absl::DataLossError("S3 ListObjectsV2: truncated page without NextContinuationToken");
  }
  return page;
}

S3Error ParseS3Error(absl::string_view xml) {
  S3Error err;
  auto field = [&](absl::string_view name) {
    auto raw = OneElement(xml, name);
    if (!raw.ok()) return std::string();
    auto text = XmlUnescape(*raw);
    return text.ok() ? absl::StrReplaceAll(*text, {{"\n", " "}, {"\r", " "}}) : std::string();
  };
  err.code = field("Code");
  err.message = field("Message");
  return err;
}

}  // namespace windquant::store
