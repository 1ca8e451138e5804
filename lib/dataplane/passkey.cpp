#include "dataplane/passkey.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "base/check.hpp"
#include "base/random.hpp"
#include "base/strings.hpp"

namespace meshloom::dataplane {

namespace {

std::vector<int32_t> join(std::initializer_list<const std::vector<int32_t>*> parts) {
  std::vector<int32_t> out;
  for (const auto* p : parts) out.insert(out.end(), p->begin(), p->end());
  return out;
}

// `count` distinct 5-digit keys from one generator state.
std::vector<std::string> keys(uint64_t state, size_t count) {
  std::vector<std::string> out;
  std::set<uint64_t> seen;
  while (out.size() < count) {
    state = splitmix64(state);
    const uint64_t key = 10000 + state % 90000;
    if (seen.insert(key).second) out.push_back(std::to_string(key));
  }
  return out;
}

// F filler tokens starting at `start` in `filler`, cyclically.
std::vector<int32_t> take(const std::vector<int32_t>& filler, uint64_t start, int64_t count) {
  std::vector<int32_t> out(size_t(std::max<int64_t>(count, 0)));
  for (size_t i = 0; i < out.size(); ++i) out[i] = filler[(start + i) % filler.size()];
  return out;
}

}  // namespace

std::vector<PasskeyPrompt> passkey_prompts(const config::PasskeyConfig& spec, uint64_t seed,
                                           const std::vector<int32_t>& filler,
                                           const Encode& encode) {
  if (spec.lengths.empty()) return {};
  if (filler.empty())
    throw Error("eval.passkey: the held-out text holds no token to hide a key in");
  const std::vector<int32_t> question = encode(" What is the pass key? The pass key is");
  std::vector<PasskeyPrompt> prompts;
  for (size_t li = 0; li < spec.lengths.size(); ++li)
    for (size_t di = 0; di < spec.depths.size(); ++di)
      for (int trial = 0; trial < int(spec.trials); ++trial) {
        PasskeyPrompt p;
        p.length = spec.lengths[li];
        p.depth = spec.depths[di];
        p.trial = trial;
        const uint64_t state = splitmix64(seed ^ splitmix64(li * 1000003 + di * 1009 + trial));
        p.candidates = keys(state, size_t(spec.decoys) + 1);
        const std::vector<int32_t> needle =
            encode(" The pass key is " + p.candidates[0] + ". Remember it. " + p.candidates[0] +
                   " is the pass key. ");
        const int64_t fill =
            p.length - kAnswerRoom - int64_t(needle.size()) - int64_t(question.size());
        if (fill < 0)
          throw Error(
              strf("eval.passkey.lengths: %lld tokens cannot hold the needle and the "
                   "question (%zu tokens) and an answer (%lld)",
                   (long long)p.length, needle.size() + question.size(), (long long)kAnswerRoom));
        const std::vector<int32_t> text = take(filler, splitmix64(state) % filler.size(), fill);
        p.needle_at = int64_t(std::floor(p.depth * double(fill)));
        const std::vector<int32_t> before(text.begin(), text.begin() + p.needle_at),
            after(text.begin() + p.needle_at, text.end());
        const std::vector<int32_t> prompt = join({&before, &needle, &after, &question});
        p.scored_from = int64_t(prompt.size()) - 1;  // the last prompt token predicts the answer
        for (const std::string& c : p.candidates) {
          const std::vector<int32_t> answer = encode(" " + c);
          ML_CHECK(int64_t(answer.size()) <= kAnswerRoom,
                   strf("the answer ' %s' takes %zu tokens", c.c_str(), answer.size()));
          p.sequences.push_back(join({&prompt, &answer}));
        }
        prompts.push_back(std::move(p));
      }
  return prompts;
}

std::vector<PasskeyCell> passkey_grid(const std::vector<PasskeyPrompt>& prompts,
                                      const std::vector<std::vector<double>>& scores) {
  ML_CHECK(scores.size() == prompts.size(), "one score list per passkey prompt");
  std::map<std::pair<int64_t, double>, PasskeyCell> cells;
  std::vector<std::pair<int64_t, double>> order;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const PasskeyPrompt& p = prompts[i];
    const auto key = std::make_pair(p.length, p.depth);
    if (!cells.count(key)) order.push_back(key);
    PasskeyCell& c = cells[key];
    c.length = p.length;
    c.depth = p.depth;
    ++c.trials;
    const std::vector<double>& s = scores[i];
    ML_CHECK(s.size() == p.candidates.size(), "one score per passkey candidate");
    c.correct += std::all_of(s.begin() + 1, s.end(), [&](double d) { return s[0] > d; });
    c.key_logprob += s[0];
  }
  std::vector<PasskeyCell> grid;
  for (const auto& key : order) {
    PasskeyCell c = cells[key];
    c.key_logprob /= c.trials;
    grid.push_back(c);
  }
  return grid;
}

}  // namespace meshloom::dataplane
