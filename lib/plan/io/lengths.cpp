#include "plan/io/lengths.hpp"

#include <algorithm>
#include <cmath>

#include "base/check.hpp"
#include "base/strings.hpp"

namespace meshloom::plan {

namespace {

constexpr int64_t K = 1024;
constexpr int64_t M = 1024 * 1024;

// Fitted offline to the shares in the file comment (see docs/plan.md).
std::vector<LengthSampler::Segment> byted() {
  return {{32, 4 * K, 0.80, 0.8},
          {4 * K, 128 * K, 0.19, 1.6166},
          {128 * K, 256 * K, 0.0034, 1.0},
          {256 * K, 2 * M, 0.0061, 4.8355},
          {2 * M, 2 * M, 0.0005, 0}};
}

std::vector<LengthSampler::Segment> github() {
  return {{16, 4 * K, 0.8501845, 1.0},
          {4 * K, 128 * K, 0.148, 2.0},
          {128 * K, 2 * M, 0.0018155, 2.5153}};
}

// Mean of the truncated power law on [lo, hi).
double segment_mean(const LengthSampler::Segment& s) {
  if (s.hi <= s.lo) return double(s.lo);
  auto integral = [&](double p) {  // integral of L^p over [lo, hi)
    const double lo = double(s.lo), hi = double(s.hi);
    return std::fabs(p + 1) < 1e-12 ? std::log(hi / lo)
                                    : (std::pow(hi, p + 1) - std::pow(lo, p + 1)) / (p + 1);
  };
  return integral(1 - s.alpha) / integral(-s.alpha);
}

int64_t draw_segment(const LengthSampler::Segment& s, double u) {
  if (s.hi <= s.lo) return s.lo;
  const double lo = double(s.lo), hi = double(s.hi);
  double x;
  if (std::fabs(s.alpha - 1) < 1e-12) {
    x = lo * std::pow(hi / lo, u);
  } else {
    const double e = 1 - s.alpha;
    x = std::pow(std::pow(lo, e) + u * (std::pow(hi, e) - std::pow(lo, e)), 1 / e);
  }
  return std::clamp<int64_t>(int64_t(x), s.lo, s.hi - 1);
}

}  // namespace

LengthSampler LengthSampler::mixture(std::vector<Segment> segments, std::string name) {
  ML_CHECK(!segments.empty(), "a mixture needs segments");
  LengthSampler s;
  s.name_ = std::move(name);
  double total = 0;
  for (const Segment& g : segments) {
    ML_CHECK(g.lo >= 1 && g.hi >= g.lo && g.weight >= 0, "bad mixture segment");
    total += g.weight;
    s.cumulative_.push_back(total);
  }
  ML_CHECK(total > 0, "mixture weights sum to zero");
  for (double& c : s.cumulative_) c /= total;
  s.segments_ = std::move(segments);
  return s;
}

LengthSampler LengthSampler::empirical(std::vector<int64_t> lengths, std::string name) {
  if (lengths.empty()) throw Error("no lengths to draw from in " + name);
  for (int64_t L : lengths)
    if (L < 1) throw Error(strf("%s: a length of %lld", name.c_str(), (long long)L));
  LengthSampler s;
  s.name_ = std::move(name);
  s.empirical_ = std::move(lengths);
  return s;
}

std::vector<std::string> LengthSampler::names() {
  return {"byted", "github", "fixed:N", "loguniform:A:B"};
}

LengthSampler LengthSampler::named(const std::string& spec) {
  if (spec == "byted") return mixture(byted(), spec);
  if (spec == "github") return mixture(github(), spec);
  const std::vector<std::string> f = split(spec, ':');
  if (f.size() == 2 && f[0] == "fixed") {
    const int64_t n = parse_tokens(f[1]);
    return mixture({{n, n, 1, 0}}, spec);
  }
  if (f.size() == 3 && f[0] == "loguniform") {
    const int64_t a = parse_tokens(f[1]), b = parse_tokens(f[2]);
    if (b <= a) throw Error("loguniform:A:B needs A < B, got '" + spec + "'");
    return mixture({{a, b, 1, 1}}, spec);
  }
  const std::string hint = nearest(spec, {"byted", "github"});
  throw Error(strf("unknown length distribution '%s'%s; known: %s, or a lengths file", spec.c_str(),
                   hint.empty() ? "" : (" (did you mean '" + hint + "'?)").c_str(),
                   join(names(), ", ").c_str()));
}

int64_t LengthSampler::draw(Rng& rng) const {
  if (!empirical_.empty()) return empirical_[rng.below(empirical_.size())];
  const double u = rng.uniform();
  size_t i = std::upper_bound(cumulative_.begin(), cumulative_.end(), u) - cumulative_.begin();
  i = std::min(i, segments_.size() - 1);
  return draw_segment(segments_[i], rng.uniform());
}

double LengthSampler::mean() const {
  if (!empirical_.empty()) {
    double s = 0;
    for (int64_t L : empirical_) s += double(L);
    return s / double(empirical_.size());
  }
  double m = 0, prev = 0;
  for (size_t i = 0; i < segments_.size(); ++i) {
    m += (cumulative_[i] - prev) * segment_mean(segments_[i]);
    prev = cumulative_[i];
  }
  return m;
}

int64_t parse_tokens(const std::string& text) {
  if (text.empty()) throw Error("empty token count");
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  double mult = 1;
  const std::string rest(end);
  if (rest == "K" || rest == "k") {
    mult = double(K);
  } else if (rest == "M" || rest == "m") {
    mult = double(M);
  } else if (rest == "G" || rest == "g") {
    mult = double(M) * double(K);
  } else if (!rest.empty()) {
    throw Error("bad token count '" + text + "' (examples: 4096, 256K, 2M)");
  }
  const double x = v * mult;
  if (end == text.c_str() || !std::isfinite(x) || x < 1 || x > 9e15)
    throw Error("bad token count '" + text + "' (examples: 4096, 256K, 2M)");
  return int64_t(std::llround(x));
}

std::string format_tokens(int64_t n) {
  if (n >= M && n % (M / 4) == 0)
    return n % M == 0 ? strf("%lldM", (long long)(n / M)) : strf("%.2fM", double(n) / double(M));
  if (n >= K && n % K == 0) return strf("%lldK", (long long)(n / K));
  return strf("%lld", (long long)n);
}

std::vector<int64_t> draw_batch(const LengthSampler& sampler, int64_t tokens, int64_t context,
                                uint64_t seed) {
  ML_CHECK(tokens >= 1 && context >= 1, "batch and context must be positive");
  Rng rng(seed);
  std::vector<int64_t> out;
  int64_t left = tokens;
  while (left > 0) {
    int64_t doc = sampler.draw(rng);
    while (doc > 0 && left > 0) {
      const int64_t piece = std::min({doc, context, left});
      out.push_back(piece);
      doc -= piece;
      left -= piece;
    }
  }
  return out;
}

double token_share_above(const std::vector<int64_t>& lengths, int64_t threshold, bool strictly) {
  double all = 0, above = 0;
  for (int64_t L : lengths) {
    all += double(L);
    if (strictly ? L > threshold : L >= threshold) above += double(L);
  }
  return all > 0 ? above / all : 0;
}

double sample_share_at_most(const std::vector<int64_t>& lengths, int64_t threshold) {
  if (lengths.empty()) return 0;
  size_t n = 0;
  for (int64_t L : lengths) n += L <= threshold;
  return double(n) / double(lengths.size());
}

std::vector<int64_t> batch_from_lengths(std::vector<int64_t> lengths, int64_t batch_tokens,
                                        int64_t context, uint64_t seed) {
  if (batch_tokens > 0)
    return draw_batch(LengthSampler::empirical(std::move(lengths), "the length table"),
                      batch_tokens, context > 0 ? context : INT64_MAX / 4, seed);
  if (context <= 0) return lengths;
  std::vector<int64_t> cut;
  for (int64_t L : lengths)
    for (int64_t left = L; left > 0; left -= context) cut.push_back(std::min(left, context));
  return cut;
}

}  // namespace meshloom::plan
