#include "train/optimizer.hpp"

#include <algorithm>
#include <cmath>

#include "base/strings.hpp"

namespace meshloom::train {

double learning_rate(const config::OptimConfig& o, int64_t step, int64_t total_steps) {
  if (step < o.warmup_steps) return o.lr * double(step + 1) / double(o.warmup_steps);
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - 1 - o.warmup_steps);
  const double progress = std::min(1.0, double(step - o.warmup_steps) / double(decay_steps));
  return o.min_lr + 0.5 * (o.lr - o.min_lr) * (1.0 + std::cos(M_PI * progress));
}

std::string schedule_change(const config::OptimConfig& o, int64_t step, int64_t saved_steps,
                            int64_t steps) {
  if (saved_steps <= 0 || saved_steps == steps) return "";
  const double before = learning_rate(o, step, saved_steps), after = learning_rate(o, step, steps);
  if (std::abs(after - before) <= 0.01 * before) return "";
  return strf(
      "run.steps %lld -> %lld changes the cosine schedule mid-run: the learning rate at step "
      "%lld becomes %.3g where the run had %.3g (x%.2f). Keep run.steps %lld to continue the "
      "schedule as it was",
      (long long)saved_steps, (long long)steps, (long long)step, after, before, after / before,
      (long long)saved_steps);
}

double clip_scale(double norm, double clip) {
  if (clip <= 0 || norm <= clip) return 1.0;
  return clip / (norm + 1e-6);
}

AdamW::AdamW(const config::OptimConfig& o, int64_t begin, int64_t end,
             std::vector<std::pair<int64_t, int64_t>> decay)
    : o_(o), begin_(begin), end_(end) {
  const size_t n = size_t(std::max<int64_t>(0, end - begin));
  decay_.assign(n, 0);
  m_.assign(n, 0.0f);
  v_.assign(n, 0.0f);
  for (auto [a, b] : decay)
    for (int64_t i = std::max(a, begin); i < std::min(b, end); ++i) decay_[size_t(i - begin)] = 1;
}

void AdamW::update(float* params, const float* grads, double lr, double grad_scale) {
  ++t_;
  const float b1 = float(o_.beta1), b2 = float(o_.beta2);
  const float c1 = float(1.0 / (1.0 - std::pow(o_.beta1, double(t_))));
  const float c2 = float(1.0 / (1.0 - std::pow(o_.beta2, double(t_))));
  const float eps = float(o_.eps), lrf = float(lr), wd = float(o_.weight_decay);
  const float gs = float(grad_scale);
  const int64_t n = end_ - begin_;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = grads[i] * gs;
    m_[size_t(i)] = b1 * m_[size_t(i)] + (1 - b1) * g;
    v_[size_t(i)] = b2 * v_[size_t(i)] + (1 - b2) * g * g;
    const float update = (m_[size_t(i)] * c1) / (std::sqrt(v_[size_t(i)] * c2) + eps);
    params[i] -= lrf * (update + (decay_[size_t(i)] ? wd * params[i] : 0.0f));
  }
}

}  // namespace meshloom::train
