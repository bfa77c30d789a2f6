#include "common/store/s3_multipart.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/base/status_macros.h"
#include "common/store/s3_xml.h"

namespace windquant::store {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

std::string XmlEscape(absl::string_view text) {
  return absl::StrReplaceAll(
      text, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}, {"'", "&apos;"}});
}

absl::StatusOr<std::string> OneText(absl::string_view xml, absl::string_view name) {
  WQ_ASSIGN_OR_RETURN(std::vector<std::string> all, XmlElements(xml, name));
  if (all.empty()) return std::string();
  return XmlUnescape(all.front());
}

}  // namespace

absl::StatusOr<int64_t> S3PartSizeFor(int64_t file_bytes, int64_t configured) {
  if (file_bytes > kS3MaxObjectBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "file of ", file_bytes, " bytes is over S3's object size limit of ", kS3MaxObjectBytes));
  }
  int64_t part = std::clamp(configured, kS3MinPartBytes, kS3MaxPartBytes);
  const int64_t needed = (file_bytes + kS3MaxParts - 1) / kS3MaxParts;
  if (needed > part) part = (needed + kMiB - 1) / kMiB * kMiB;
  return std::min(part, kS3MaxPartBytes);
}

std::string CompleteMultipartUploadXml(const std::vector<S3Part>& parts) {
  std::string xml = "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">";
  for (const S3Part& p : parts) {
    absl::StrAppend(&xml, "<Part><PartNumber>", p.number, "</PartNumber><ETag>", XmlEscape(p.etag),
                    "</ETag></Part>");
  }
  absl::StrAppend(&xml, "</CompleteMultipartUpload>");
  return xml;
}

absl::StatusOr<std::string> ParseUploadId(absl::string_view xml) {
  WQ_ASSIGN_OR_RETURN(std::string id, OneText(xml, "UploadId"));
  if (id.empty()) {
    return absl::DataLossError("S3 CreateMultipartUpload: response has no <UploadId>");
  }
  return id;
}

absl::StatusOr<std::vector<S3OpenUpload>> ParseListMultipartUploads(absl::string_view xml) {
  if (xml.find("<ListMultipartUploadsResult") == absl::string_view::npos) {
    return absl::DataLossError(
        "S3 ListMultipartUploads: response has no <ListMultipartUploadsResult>");
  }
  WQ_ASSIGN_OR_RETURN(std::vector<std::string> uploads, XmlElements(xml, "Upload"));
  std::vector<S3OpenUpload> out;
  for (const std::string& u : uploads) {
    S3OpenUpload open;
    WQ_ASSIGN_OR_RETURN(open.key, OneText(u, "Key"));
    WQ_ASSIGN_OR_RETURN(open.upload_id, OneText(u, "UploadId"));
    if (open.key.empty() || open.upload_id.empty()) {
      return absl::DataLossError("S3 ListMultipartUploads: <Upload> without Key/UploadId");
    }
    out.push_back(std::move(open));
  }
  return out;
}

}  // namespace windquant::store
