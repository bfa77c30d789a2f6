// The field's own tokenizer references for the tokenizer tests: Hugging Face
// `tokenizers` and `sentencepiece` from PyPI (pinned in scripts/requirements.txt),
// driven by tests/py/tokenizer_ref.py (see its --help: train a LLaMA-2- or
// LLaMA-3-style tokenizer on a text, encode lines or a whole file, JSON out).
// Test-only; stateless, so thread-safe as far as the files it writes are.
#ifndef WINDQUANT_COMMON_TESTING_PY_REFERENCE_H_
#define WINDQUANT_COMMON_TESTING_PY_REFERENCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace windquant::testing {

// The interpreter that runs the references: <source>/.venv/bin/python3 when it
// is executable (scripts/install-deps.sh makes that venv), else python3 on $PATH,
// else "" when there is neither.
std::string ReferencePython();

// Runs `tokenizer_ref.py ARGS...` (each element one argument, absolute paths) in
// the existing folder `work_dir` and returns its stdout. FAILED_PRECONDITION with
// one line naming what is missing (the interpreter, or the modules tokenizers /
// sentencepiece) and `bash scripts/install-deps.sh`; INTERNAL with the command
// and its stderr when it fails otherwise or runs past `timeout_s`.
absl::StatusOr<std::string> RunTokenizerReference(const std::vector<std::string>& args,
                                                  const std::string& work_dir, int timeout_s = 300);

// The two references that encode: Hugging Face tokenizers on a tokenizer.json,
// SentencePiece on a .model.
enum class Reference { kHfTokenizers, kSentencePiece };

// Ids of each of `lines` (none may hold "\n") from `reference` on `path`, without
// BOS/EOS. INVALID_ARGUMENT for a line with "\n"; else RunTokenizerReference's errors.
absl::StatusOr<std::vector<std::vector<int32_t>>> ReferenceLineIds(
    Reference reference, const std::string& path, const std::vector<std::string>& lines,
    const std::string& work_dir);

// Ids of all of `text` as one text (newlines and all), without BOS/EOS.
absl::StatusOr<std::vector<int32_t>> ReferenceIds(Reference reference, const std::string& path,
                                                  const std::string& text,
                                                  const std::string& work_dir);

}  // namespace windquant::testing

#endif  // WINDQUANT_COMMON_TESTING_PY_REFERENCE_H_
