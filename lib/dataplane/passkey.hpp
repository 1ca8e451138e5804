// Passkey retrieval (eval.passkey, meshloom eval): can the model find a key
// hidden in a long text? For each prompt length L, depth d and trial, a
// random 5-digit key is hidden in held-out text:
//
//   filler[: d·F] + " The pass key is KEY. Remember it. KEY is the pass key. "
//   + filler[d·F :] + " What is the pass key? The pass key is" + " CANDIDATE"
//
// F filler tokens make the prompt L − kAnswerRoom tokens long, so that every
// sequence (prompt and candidate) fits in L. The score is the model's
// log-likelihood of each candidate's tokens after the prompt, read off one
// full forward pass per candidate: the true key and `decoys` other keys. A
// trial is correct when the true key scores strictly highest (chance:
// 1 / (decoys + 1)). Text is tokenized piece by piece and the pieces' tokens
// joined, so the needle's tokens are the same at every depth. Pure: the
// caller brings the tokenizer (encode) and the held-out tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace meshloom::dataplane {

inline constexpr int64_t kAnswerRoom = 8;  // tokens kept for " 12345" in any tokenizer

struct PasskeyPrompt {
  int64_t length = 0;  // L
  double depth = 0;
  int trial = 0;
  int64_t needle_at = 0;                        // the needle's first token
  std::vector<std::string> candidates;          // [0] is the true key
  std::vector<std::vector<int32_t>> sequences;  // prompt + candidate, one per candidate
  int64_t scored_from = 0;  // the prediction at this position and after score the candidate
};

using Encode = std::function<std::vector<int32_t>(const std::string&)>;

// Every (length, depth, trial) of `spec`, in that order, from `filler` (held-out
// tokens, repeated when short; each trial starts elsewhere in it). Throws
// Error naming eval.passkey.lengths when a length cannot hold the needle and
// the question.
std::vector<PasskeyPrompt> passkey_prompts(const config::PasskeyConfig& spec, uint64_t seed,
                                           const std::vector<int32_t>& filler,
                                           const Encode& encode);

// One grid cell's result.
struct PasskeyCell {
  int64_t length = 0;
  double depth = 0;
  int trials = 0, correct = 0;
  double key_logprob = 0;  // mean over trials of the true key's log-likelihood
};
// `scores[i][c]`: prompt i's candidate c's log-likelihood (sum of log p).
std::vector<PasskeyCell> passkey_grid(const std::vector<PasskeyPrompt>& prompts,
                                      const std::vector<std::vector<double>>& scores);

}  // namespace meshloom::dataplane
