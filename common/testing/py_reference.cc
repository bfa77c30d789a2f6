#include "common/testing/py_reference.h"

#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/base/files.h"
#include "common/base/status_macros.h"
#include "common/testing/shell.h"
#include "common/testing/test_paths.h"
#include "nlohmann/json.hpp"

namespace windquant::testing {
namespace {

// The exit status tokenizer_ref.py gives when a module is missing.
constexpr int kMissingModuleExit = 3;

const char* ReferenceFlag(Reference reference) {
  return reference == Reference::kSentencePiece ? "--spm-model" : "--tokenizer";
}

// Parses a JSON array of ids (what tokenizer_ref.py writes); INTERNAL naming
// `source` otherwise.
absl::StatusOr<std::vector<int32_t>> ParseIds(absl::string_view json, const std::string& source) {
  nlohmann::json j = nlohmann::json::parse(json.begin(), json.end(), nullptr,
                                           /*allow_exceptions=*/false);
  if (!j.is_array()) return absl::InternalError(source + ": not a JSON array of ids");
  std::vector<int32_t> ids;
  ids.reserve(j.size());
  for (const auto& id : j) {
    if (!id.is_number_integer()) return absl::InternalError(source + ": not a JSON array of ids");
    ids.push_back(id.get<int32_t>());
  }
  return ids;
}

}  // namespace

std::string ReferencePython() {
  const std::string venv = SourceDir() + "/.venv/bin/python3";
  if (access(venv.c_str(), X_OK) == 0) return venv;
  return FindOnPath("python3");
}

absl::StatusOr<std::string> RunTokenizerReference(const std::vector<std::string>& args,
                                                  const std::string& work_dir, int timeout_s) {
  const std::string python = ReferencePython();
  if (python.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no Python for the tokenizer references (neither ", SourceDir(),
                     "/.venv/bin/python3 nor python3 on PATH): run bash scripts/install-deps.sh"));
  }
  std::string command =
      ShellQuote(python) + " " + ShellQuote(SourceDir() + "/tests/py/tokenizer_ref.py");
  for (const std::string& a : args) absl::StrAppend(&command, " ", ShellQuote(a));
  const CommandOutput r = RunInDir(work_dir, command, timeout_s);
  if (r.exit_code == 0) return r.out;
  const std::string err(absl::StripTrailingAsciiWhitespace(r.err));
  if (r.exit_code == kMissingModuleExit) return absl::FailedPreconditionError(err);
  return absl::InternalError(absl::StrCat(command, " exited with ", r.exit_code,
                                          r.exit_code == 124 ? " (timed out)" : "", ": ", err));
}

absl::StatusOr<std::vector<std::vector<int32_t>>> ReferenceLineIds(
    Reference reference, const std::string& path, const std::vector<std::string>& lines,
    const std::string& work_dir) {
  std::vector<std::vector<int32_t>> ids;
  if (lines.empty()) return ids;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find('\n') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("lines[", i, "] holds a newline"));
    }
  }
  const std::string in = work_dir + "/reference_lines.txt";
  const std::string out = work_dir + "/reference_lines.jsonl";
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic(in, absl::StrJoin(lines, "\n")));
  WQ_RETURN_IF_ERROR(
      RunTokenizerReference({"encode", ReferenceFlag(reference), path, in, out}, work_dir)
          .status());
  WQ_ASSIGN_OR_RETURN(const std::string jsonl, base::ReadFile(out));
  for (absl::string_view row : absl::StrSplit(jsonl, '\n', absl::SkipEmpty())) {
    WQ_ASSIGN_OR_RETURN(std::vector<int32_t> line_ids, ParseIds(row, out));
    ids.push_back(std::move(line_ids));
  }
  if (ids.size() != lines.size()) {
    return absl::InternalError(
        absl::StrCat(out, ": ", ids.size(), " rows of ids for ", lines.size(), " lines"));
  }
  return ids;
}

absl::StatusOr<std::vector<int32_t>> ReferenceIds(Reference reference, const std::string& path,
                                                  const std::string& text,
                                                  const std::string& work_dir) {
  const std::string in = work_dir + "/reference_text.txt";
  const std::string out = work_dir + "/reference_text.json";
  WQ_RETURN_IF_ERROR(base::WriteFileAtomic(in, text));
  WQ_RETURN_IF_ERROR(
      RunTokenizerReference({"encode-file", ReferenceFlag(reference), path, in, out}, work_dir)
          .status());
  WQ_ASSIGN_OR_RETURN(const std::string json, base::ReadFile(out));
  return ParseIds(json, out);
}

}  // namespace windquant::testing
