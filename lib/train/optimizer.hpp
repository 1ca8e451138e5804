// AdamW with decoupled weight decay, the learning-rate schedule and gradient
// clipping, on flat parameter buffers. Pure code: the trainer runtime does the
// communication (all-reduce, or reduce-scatter/all-gather for ZeRO-1) and
// calls update() on the slice of the buffer this rank owns.
//
// Schedule (step counted from 0): linear warmup lr·(step+1)/warmup for
// step < warmup_steps, then cosine from lr down to min_lr at the last step.
// Weight decay applies to matrices only (ranges given by the caller), never to
// norm gains.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"

namespace meshloom::train {

double learning_rate(const config::OptimConfig& o, int64_t step, int64_t total_steps);

// The schedule's length is run.steps, so a resume that changes it moves the
// learning rate mid-run: "" when the rate at `step` stays within 1%, else a
// warning giving both rates.
std::string schedule_change(const config::OptimConfig& o, int64_t step, int64_t saved_steps,
                            int64_t steps);

// The factor that brings a gradient of global L2 norm `norm` under `clip`
// (1 when clip is 0 or the norm is already below it).
double clip_scale(double norm, double clip);

class AdamW {
 public:
  // Owns the moments of elements [begin, end) of the flat buffer. `decay` are
  // the [first, last) ranges (in the flat buffer) that get weight decay.
  AdamW(const config::OptimConfig& o, int64_t begin, int64_t end,
        std::vector<std::pair<int64_t, int64_t>> decay);

  // params/grads point at element `begin` of the flat buffers; grads are
  // multiplied by grad_scale (clipping) on the fly.
  void update(float* params, const float* grads, double lr, double grad_scale);

  int64_t step() const { return t_; }
  std::vector<float>& m() { return m_; }
  std::vector<float>& v() { return v_; }
  void set_step(int64_t t) { t_ = t; }
  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }

 private:
  config::OptimConfig o_;
  int64_t begin_, end_;
  std::vector<uint8_t> decay_;  // per owned element
  std::vector<float> m_, v_;
  int64_t t_ = 0;
};

}  // namespace meshloom::train
