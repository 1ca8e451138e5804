#include "kernels/host/cudnn/sdpa_graph_ops.hpp"

namespace meshloom::cudnn {

namespace {
// Every bound tensor's rows are at least 16-byte aligned (checked by
// SdpaShape::validate); cuDNN picks its vectorized loads from this.
constexpr int64_t kAlignment = 16;
constexpr double kZero = 0.0;
}  // namespace

Dims token_major_strides(int64_t max_len, int64_t ld, int64_t head_stride) {
  return {max_len * ld, head_stride, ld, 1};
}

Descriptor& GraphOps::new_tensor(int64_t uid, cudnnDataType_t type, const Dims& dims,
                                 const Dims& strides) {
  Descriptor& t = g_.tensors.emplace_back(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid)
      .set(CUDNN_ATTR_TENSOR_DATA_TYPE, type)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, dims)
      .set(CUDNN_ATTR_TENSOR_STRIDES, strides)
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, kAlignment);
  return t;
}

const Descriptor& GraphOps::bound(int64_t uid, cudnnDataType_t type, const Dims& dims,
                                  const Dims& strides, const Descriptor* ragged) {
  Descriptor& t = new_tensor(uid, type, dims, strides);
  if (ragged) t.set(CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, *ragged);
  g_.bound_uids.push_back(uid);
  return t.finalize();
}

const Descriptor& GraphOps::scalar(int64_t uid) {
  Descriptor& t = new_tensor(uid, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1});
  t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, true);
  g_.bound_uids.push_back(uid);
  return t.finalize();
}

const Descriptor& GraphOps::batch_index(int64_t uid, int64_t count) {
  Descriptor& t = new_tensor(uid, CUDNN_DATA_INT32, {count, 1, 1, 1}, {1, 1, 1, 1});
  g_.bound_uids.push_back(uid);
  return t.finalize();
}

const Descriptor& GraphOps::virtual_tensor(cudnnDataType_t type, const Dims& dims,
                                           const Dims& strides, const Descriptor* ragged) {
  Descriptor& t = new_tensor(next_virtual_++, type, dims, strides);
  t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, true);
  if (ragged) t.set(CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, *ragged);
  return t.finalize();
}

void GraphOps::pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t precision, const Descriptor& x,
                         const Descriptor* b, const Descriptor& y, const Descriptor* t,
                         int64_t axis) {
  Descriptor pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  pw.set(CUDNN_ATTR_POINTWISE_MODE, mode).set(CUDNN_ATTR_POINTWISE_MATH_PREC, precision);
  if (axis >= 0) pw.set(CUDNN_ATTR_POINTWISE_AXIS, axis);
  pw.finalize();
  Descriptor op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw)
      .set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x)
      .set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
  if (b) op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
  if (t) op.set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
  g_.operations.push_back(std::move(op.finalize()));
}

void GraphOps::matmul(const Descriptor& a, const Descriptor& b, const Descriptor& c,
                      Overrides overrides, bool zero_padding) {
  Descriptor mm(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT);
  // Rows and columns past a document's length read as 0, not as the next
  // document's tokens (the masks then set them to −inf).
  if (zero_padding) mm.set_raw(CUDNN_ATTR_MATMUL_PADDING_VALUE, CUDNN_TYPE_DOUBLE, 1, &kZero);
  mm.finalize();
  Descriptor op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
      .set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
      .set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
      .set(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
  if (overrides.m) op.set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, *overrides.m);
  if (overrides.n) op.set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, *overrides.n);
  if (overrides.k) op.set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, *overrides.k);
  g_.operations.push_back(std::move(op.finalize()));
}

void GraphOps::reduction(cudnnReduceTensorOp_t reduce, const Descriptor& x, const Descriptor& y) {
  Descriptor red(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  red.set(CUDNN_ATTR_REDUCTION_OPERATOR, reduce)
      .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_DATA_FLOAT)
      .finalize();
  Descriptor op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
      .set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y)
      .set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, red);
  g_.operations.push_back(std::move(op.finalize()));
}

void GraphOps::reshape(const Descriptor& x, const Descriptor& y) {
  Descriptor op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x).set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
  g_.operations.push_back(std::move(op.finalize()));
}

const Descriptor& GraphOps::padding_mask(const Descriptor& s, const Dims& dims, const Dims& strides,
                                         const Descriptor& seq_q, const Descriptor& seq_kv,
                                         const Descriptor& neg_inf) {
  const Descriptor& row = virtual_tensor(CUDNN_DATA_INT32, dims, strides);
  pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, s, nullptr, row, nullptr, 2);
  const Descriptor& col = virtual_tensor(CUDNN_DATA_INT32, dims, strides);
  pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, s, nullptr, col, nullptr, 3);
  const Descriptor& row_in = virtual_tensor(CUDNN_DATA_BOOLEAN, dims, strides);
  pointwise(CUDNN_POINTWISE_CMP_LT, CUDNN_DATA_BOOLEAN, row, &seq_q, row_in);
  const Descriptor& col_in = virtual_tensor(CUDNN_DATA_BOOLEAN, dims, strides);
  pointwise(CUDNN_POINTWISE_CMP_LT, CUDNN_DATA_BOOLEAN, col, &seq_kv, col_in);
  const Descriptor& inside = virtual_tensor(CUDNN_DATA_BOOLEAN, dims, strides);
  pointwise(CUDNN_POINTWISE_LOGICAL_AND, CUDNN_DATA_BOOLEAN, row_in, &col_in, inside);
  const Descriptor& masked = virtual_tensor(CUDNN_DATA_FLOAT, dims, strides);
  pointwise(CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, s, &neg_inf, masked, &inside);
  return masked;
}

const Descriptor& GraphOps::causal_mask(const Descriptor& s, const Dims& dims, const Dims& strides,
                                        const Descriptor& neg_inf) {
  const Descriptor& row = virtual_tensor(CUDNN_DATA_INT32, dims, strides);
  pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, s, nullptr, row, nullptr, 2);
  const Descriptor& col = virtual_tensor(CUDNN_DATA_INT32, dims, strides);
  pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, s, nullptr, col, nullptr, 3);
  const Descriptor& seen = virtual_tensor(CUDNN_DATA_BOOLEAN, dims, strides);
  pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, &col, seen);
  const Descriptor& masked = virtual_tensor(CUDNN_DATA_FLOAT, dims, strides);
  pointwise(CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, s, &neg_inf, masked, &seen);
  return masked;
}

std::vector<cudnnBackendDescriptor_t> SdpaGraph::raw_operations() const {
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const Descriptor& op : operations) raw.push_back(op.get());
  return raw;
}

}  // namespace meshloom::cudnn
