// llama.cpp's forward with windquant's perplexity protocol, for scripts/llama-cpp-check.sh
// (float32 KV cache, no flash attention):
// loads a GGUF file with llama.cpp's own loader, cuts the token ids of IDS (int32, raw, no
// BOS) into consecutive chunks of CONTEXT-1, evaluates each window BOS + chunk at positions
// 0..CONTEXT-1 with every position's logits, and sums -log p(next id) over all chunk ids
// (windquant's `eval`: common/model/perplexity.h; the last partial chunk is dropped). Writes
// the first window's logits to OUT as float32 [CONTEXT, vocab] and prints one JSON line
// {"windows", "tokens", "nll", "perplexity"}. Not part of windquant's build:
// scripts/build-llama-cpp.sh compiles it against the llama.cpp it builds (llama.h).
//
// usage: llama-cpp-logits MODEL.gguf IDS CONTEXT OUT [MAX_WINDOWS]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "llama.h"

namespace {

bool ReadIds(const char* path, std::vector<llama_token>* ids) {
  FILE* f = std::fopen(path, "rb");
  if (f == nullptr) return false;
  int32_t v;
  while (std::fread(&v, sizeof(v), 1, f) == 1) ids->push_back(v);
  std::fclose(f);
  return !ids->empty();
}

// -log softmax(logits)[target], in double.
double Nll(const float* logits, int32_t vocab, llama_token target) {
  double max = logits[0];
  for (int32_t v = 1; v < vocab; ++v) max = std::fmax(max, logits[v]);
  double sum = 0;
  for (int32_t v = 0; v < vocab; ++v) sum += std::exp(logits[v] - max);
  return std::log(sum) + max - logits[target];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5 && argc != 6) {
    std::fprintf(stderr, "usage: llama-cpp-logits MODEL.gguf IDS CONTEXT OUT [MAX_WINDOWS]\n");
    return 2;
  }
  std::vector<llama_token> ids;
  if (!ReadIds(argv[2], &ids)) {
    std::fprintf(stderr, "%s: no int32 token ids\n", argv[2]);
    return 1;
  }
  const int32_t context = std::atoi(argv[3]);
  const long max_windows = argc == 6 ? std::atol(argv[5]) : -1;
  if (context < 2) {
    std::fprintf(stderr, "CONTEXT must be >= 2\n");
    return 2;
  }
  llama_backend_init();
  llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (model == nullptr) {
    std::fprintf(stderr, "%s: llama.cpp cannot load it\n", argv[1]);
    return 1;
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(context);
  // A float32 KV cache (llama.cpp's default is F16, which alone moves the logits ~1e-3).
  cp.type_k = GGML_TYPE_F32;
  cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) {
    std::fprintf(stderr, "cannot create a context of %d tokens\n", context);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int32_t n_vocab = llama_vocab_n_tokens(vocab);
  const size_t chunk = static_cast<size_t>(context - 1);
  long windows = static_cast<long>(ids.size() / chunk);
  if (max_windows >= 0 && windows > max_windows) windows = max_windows;
  llama_batch batch = llama_batch_init(context, 0, 1);
  double nll = 0;
  long tokens = 0;
  for (long w = 0; w < windows; ++w) {
    llama_memory_clear(llama_get_memory(ctx), true);
    for (int32_t i = 0; i < context; ++i) {
      batch.token[i] = i == 0 ? llama_vocab_bos(vocab) : ids[w * chunk + i - 1];
      batch.pos[i] = i;
      batch.n_seq_id[i] = 1;
      batch.seq_id[i][0] = 0;
      batch.logits[i] = 1;
    }
    batch.n_tokens = context;
    if (llama_decode(ctx, batch) != 0) {
      std::fprintf(stderr, "llama_decode failed at window %ld\n", w);
      return 1;
    }
    for (int32_t i = 0; i + 1 < context; ++i) {
      nll += Nll(llama_get_logits_ith(ctx, i), n_vocab, ids[w * chunk + i]);
      ++tokens;
    }
    if (w == 0) {
      FILE* out = std::fopen(argv[4], "wb");
      if (out == nullptr) {
        std::fprintf(stderr, "%s: cannot write\n", argv[4]);
        return 1;
      }
      for (int32_t i = 0; i < context; ++i) {
        std::fwrite(llama_get_logits_ith(ctx, i), sizeof(float), static_cast<size_t>(n_vocab), out);
      }
      std::fclose(out);
    }
  }
  const double mean = tokens > 0 ? nll / static_cast<double>(tokens) : 0.0;
  std::printf("{\"windows\": %ld, \"tokens\": %ld, \"nll\": %.9f, \"perplexity\": %.9f}\n", windows,
              tokens, mean, std::exp(mean));
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
