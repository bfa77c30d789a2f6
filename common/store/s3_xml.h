// Minimal reader for the few S3 XML documents windquant consumes: the
// ListObjectsV2 result and the <Error> body. Not a general XML parser: it
// finds elements by exact name (so <Key> never matches <KeyCount>), decodes
// the five predefined entities and numeric character references, and
// rejects malformed input with INVALID_ARGUMENT / DATA_LOSS.
#ifndef WINDQUANT_COMMON_STORE_S3_XML_H_
#define WINDQUANT_COMMON_STORE_S3_XML_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace windquant::store {

struct S3ObjectEntry {
  std::string key;
  int64_t size_bytes = 0;
};

struct S3ListPage {
  std::vector<S3ObjectEntry> objects;
  bool is_truncated = false;
  std::string next_continuation_token;
};

struct S3Error {
  std::string code;     // "NoSuchKey"; empty when the body has none
  std::string message;  // server text, one line
};

// Decodes &amp; &lt; &gt; &quot; &apos; &#N; &#xH; (UTF-8 output).
absl::StatusOr<std::string> XmlUnescape(absl::string_view text);

// Inner text of every <name>...</name> (or <name/>) inside `xml`, in order.
// Elements named `name` must not nest.
absl::StatusOr<std::vector<std::string>> XmlElements(absl::string_view xml, absl::string_view name);

absl::StatusOr<S3ListPage> ParseListObjectsV2(absl::string_view xml);

// Never fails: an unparsable body gives empty fields.
S3Error ParseS3Error(absl::string_view xml);

}  // namespace windquant::store

#endif  // WINDQUANT_COMMON_STORE_S3_XML_H_
