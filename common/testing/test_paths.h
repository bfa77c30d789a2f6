// Where tests find real models and texts. The one place that knows about
// ../shared: every test that needs a pretrained model or real text asks here.
//
// With ../shared/models/stories260k and ../shared/data beside the source tree
// (a developer's worktree, CI), tests use stories260k and its TinyStories text.
// On a fresh clone without ../shared they use the project's own small test
// model (scripts/default-model.sh --small: trained by `windquant pretrain` on
// the King James text's training books; the default model of `scripts/run.sh` is
// larger and would make the fixture slow), which the ctest fixture
// `wq_test_model` (scripts/test-model.sh) builds once per source tree before
// the first test that needs it. Nothing is skipped either way.
#ifndef WINDQUANT_COMMON_TESTING_TEST_PATHS_H_
#define WINDQUANT_COMMON_TESTING_TEST_PATHS_H_

#include <string>
#include <vector>

namespace windquant::testing {

// $WQ_SOURCE_DIR (ctest sets it for every test), else the current directory.
std::string SourceDir();

// $WQ_BINARY_DIR (ctest sets it), else the system temporary directory.
std::string BinaryDir();

// <source>/../shared when it is a directory, else "".
std::string SharedDir();

// A pretrained LLaMA checkpoint in Hugging Face layout and text of its domain.
struct TestModel {
  std::string name;       // "stories260k" or "test-model"
  std::string dir;        // config.json, model.safetensors, tokenizer.json
  std::string text_path;  // plain UTF-8 text the model was trained on or for
  std::string config;     // its run config: configs/stories260k.yaml or configs/test-model.yaml
  bool stories260k = false;
};

// stories260k with tinystories-valid-sample.txt when ../shared has both, else
// the test model (<source>/.cache/test-model) with text of its domain that it
// was not trained on (<source>/.cache/default-data/heldout.txt). The fallback files exist once the
// `wq_test_model` fixture ran; tests that call this require that fixture.
TestModel RealModel();

// Real texts for tokenizer tests: ../shared's TinyStories sample and
// WikiText-2 test set when present, else the project's held-out King James text.
std::vector<std::string> TextPaths();

}  // namespace windquant::testing

#endif  // WINDQUANT_COMMON_TESTING_TEST_PATHS_H_
