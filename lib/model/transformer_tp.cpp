// The Transformer's tensor-parallel parts: sums and gathers over the TP
// group, the row-parallel products onto the residual, and the norm gains'
// gradients summed over the group (Megatron's split, design.md "The model").
#include "model/blas.hpp"
#include "model/row_ops.hpp"
#include "model/transformer.hpp"

namespace meshloom::model {

template <class T>
void Transformer<T>::sum_over_group(T* values, int64_t count) {
  Timer t(&profile_, &Times::tp, threads_);
  tp_->sum_activations(std::span<T>(values, static_cast<size_t>(count)));
}

template <class T>
const T* Transformer<T>::all_rows(const T* mine, int64_t n) {
  if (!sp_) return mine;
  const int64_t d = shape().d_model;
  Timer t(&profile_, &Times::tp, threads_);
  tp_->all_gather_rows(std::span<const T>(mine, static_cast<size_t>(rows_.count() * d)),
                       std::span<T>(gathered_.data(), static_cast<size_t>(n * d)), d);
  return gathered_.data();
}

template <class T>
T* Transformer<T>::input_grad_partials() {
  return sp_ ? partial_.data() : dxn_.data();
}

template <class T>
void Transformer<T>::reduce_input_grad(int64_t n) {
  const int64_t d = shape().d_model;
  if (!sp_) {
    if (tp_) sum_over_group(dxn_.data(), n * d);
    return;
  }
  scatter_rows(partial_.data(), dxn_.data(), n);
}

template <class T>
void Transformer<T>::scatter_rows(const T* all, T* mine, int64_t n) {
  const int64_t d = shape().d_model;
  Timer t(&profile_, &Times::tp, threads_);
  tp_->reduce_scatter_rows(std::span<const T>(all, static_cast<size_t>(n * d)),
                           std::span<T>(mine, static_cast<size_t>(rows_.count() * d)), d);
}

template <class T>
void Transformer<T>::row_parallel_residual(const T* in, int64_t k, const T* w, const T* base,
                                           T* out, int64_t n) {
  const int64_t d = shape().d_model;
  if (!tp_) {  // one product onto a copy of base
    {
      Timer t(&profile_, &Times::other, threads_);
      copy_rows(threads_, n * d, base, out);
    }
    Timer t(&profile_, &Times::matmul, threads_);
    gemm_parallel<T>(threads_, Op::N, Op::T, n, d, k, T(1), in, k, w, k, T(1), out, d);
    return;
  }
  {
    Timer t(&profile_, &Times::matmul, threads_);
    gemm_parallel<T>(threads_, Op::N, Op::T, n, d, k, T(1), in, k, w, k, T(0), partial_.data(), d);
  }
  if (!sp_) {
    sum_over_group(partial_.data(), n * d);
    Timer t(&profile_, &Times::other, threads_);
    add_rows(threads_, n * d, base, partial_.data(), out);
    return;
  }
  scatter_rows(partial_.data(), out, n);
  Timer t(&profile_, &Times::other, threads_);
  add_rows(threads_, rows_.count() * d, base, out, out);  // the same bits as base + the sum
}

template <class T>
int64_t Transformer<T>::gain_offset(int64_t slot) const {
  if (slot == 2 * shape().n_layers) return layout_.final_norm();
  const LayerOffsets& o = layout_.layer(slot / 2);
  return slot % 2 == 0 ? o.attn_norm : o.mlp_norm;
}

template <class T>
T* Transformer<T>::gain_grad(int64_t slot) {
  return sp_ ? gain_partials_.data() + slot * shape().d_model : grads_.data() + gain_offset(slot);
}

template <class T>
void Transformer<T>::sum_gain_grads() {
  const int64_t d = shape().d_model, slots = 2 * shape().n_layers + 1;
  sum_over_group(gain_partials_.data(), slots * d);
  for (int64_t k = 0; k < slots; ++k) {
    const bool held = k == slots - 1 ? layout_.last_stage() : layout_.holds_layer(k / 2);
    if (!held) continue;  // another pipeline stage's norm
    T* g = grads_.data() + gain_offset(k);
    const T* add = gain_partials_.data() + k * d;
    for (int64_t c = 0; c < d; ++c) g[c] += add[c];
  }
}

// Members defined here, for the two instantiations transformer.cpp makes.
#define ML_TP_MEMBERS_FOR(T)                                                                     \
  template void Transformer<T>::sum_over_group(T*, int64_t);                                     \
  template const T* Transformer<T>::all_rows(const T*, int64_t);                                 \
  template T* Transformer<T>::input_grad_partials();                                             \
  template void Transformer<T>::reduce_input_grad(int64_t);                                      \
  template void Transformer<T>::scatter_rows(const T*, T*, int64_t);                             \
  template void Transformer<T>::row_parallel_residual(const T*, int64_t, const T*, const T*, T*, \
                                                      int64_t);                                  \
  template int64_t Transformer<T>::gain_offset(int64_t) const;                                   \
  template T* Transformer<T>::gain_grad(int64_t);                                                \
  template void Transformer<T>::sum_gain_grads();
ML_TP_MEMBERS_FOR(float)
ML_TP_MEMBERS_FOR(double)
#undef ML_TP_MEMBERS_FOR

}  // namespace meshloom::model
