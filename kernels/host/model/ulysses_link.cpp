#include "kernels/host/model/ulysses_link.hpp"

#include <algorithm>
#include <climits>
#include <string>
#include <utility>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "comm/mpi_check.hpp"
#include "comm/p2p.hpp"
#include "kernels/device/common/check.cuh"
#include "kernels/host/comm/nccl_comm.hpp"
#include "kernels/host/device_buffer.hpp"

namespace meshloom::cuda {

namespace {

// Rows that `rows`/`at` reach: the extent of a side of an exchange.
int64_t extent(const std::vector<int64_t>& rows, const std::vector<int64_t>& at) {
  int64_t end = 0;
  for (size_t d = 0; d < rows.size(); ++d) end = std::max(end, at[d] + rows[d]);
  return end;
}

int to_int(int64_t v, const char* what) {
  ML_CHECK(v >= 0 && v <= INT_MAX, strf("Ulysses attention: %s of %lld rows", what, (long long)v));
  return int(v);
}

class MpiUlyssesLink final : public UlyssesLink {
 public:
  MpiUlyssesLink(MPI_Comm group, double timeout_s) : group_(group), timeout_s_(timeout_s) {
    MPI_CHECK(MPI_Comm_size(group_, &k_));
    MPI_CHECK(MPI_Comm_rank(group_, &me_));
  }

  std::vector<int64_t> gather_counts(int64_t n, cudaStream_t) override {
    std::vector<int64_t> all(size_t(k_), 0);
    MPI_Request req;
    MPI_CHECK(MPI_Iallgather(&n, 1, MPI_INT64_T, all.data(), 1, MPI_INT64_T, group_, &req));
    wait(&req, 1, "the Ulysses token counts");
    return all;
  }

  void exchange(const std::vector<UlyssesPart>& parts, const UlyssesPlan& plan,
                cudaStream_t stream) override {
    send_.resize(parts.size());
    recv_.resize(parts.size());
    for (size_t p = 0; p < parts.size(); ++p) {
      const size_t bytes = size_t(extent(plan.send_rows, plan.send_at)) * parts[p].row_bytes;
      send_[p].resize(bytes);
      if (bytes > 0)
        CUDA_CHECK(
            cudaMemcpyAsync(send_[p].data(), parts[p].send, bytes, cudaMemcpyDeviceToHost, stream));
    }
    // The downloads, and the last exchange's uploads from recv_, are done.
    CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<int> sc, sd, rc, rd;
    for (size_t d = 0; d < size_t(k_); ++d) {
      sc.push_back(to_int(plan.send_rows[d], "a section"));
      sd.push_back(to_int(plan.send_at[d], "an offset"));
      rc.push_back(to_int(plan.recv_rows[d], "a section"));
      rd.push_back(to_int(plan.recv_at[d], "an offset"));
    }
    std::vector<MPI_Request> reqs(parts.size());
    for (size_t p = 0; p < parts.size(); ++p) {
      recv_[p].resize(size_t(extent(plan.recv_rows, plan.recv_at)) * parts[p].row_bytes);
      ML_CHECK(parts[p].row_bytes > 0 && parts[p].row_bytes <= INT_MAX,
               "Ulysses attention: a row of " + std::to_string(parts[p].row_bytes) + " bytes");
      // Counts in rows: a long sequence's byte counts would pass INT_MAX.
      MPI_Datatype row;
      MPI_CHECK(MPI_Type_contiguous(int(parts[p].row_bytes), MPI_BYTE, &row));
      MPI_CHECK(MPI_Type_commit(&row));
      MPI_CHECK(MPI_Ialltoallv(send_[p].data(), sc.data(), sd.data(), row, recv_[p].data(),
                               rc.data(), rd.data(), row, group_, &reqs[p]));
      MPI_CHECK(MPI_Type_free(&row));  // MPI keeps it for the pending call
    }
    wait(reqs.data(), int(reqs.size()), "the Ulysses all-to-all");
    for (size_t p = 0; p < parts.size(); ++p)
      if (!recv_[p].empty())
        CUDA_CHECK(cudaMemcpyAsync(parts[p].recv, recv_[p].data(), recv_[p].size(),
                                   cudaMemcpyHostToDevice, stream));
  }

 private:
  void wait(MPI_Request* reqs, int count, const char* what) const {
    comm::wait_requests(reqs, count, timeout_s_, [&] {
      return strf("%s in a CP group of %d (this is member %d)", what, k_, me_);
    });
  }

  MPI_Comm group_;
  double timeout_s_;
  int k_ = 1, me_ = 0;
  std::vector<std::vector<char>> send_, recv_;  // host staging, per part
};

class NcclUlyssesLink final : public UlyssesLink {
 public:
  NcclUlyssesLink(MPI_Comm group, ncclComm_t nccl, double timeout_s)
      : nccl_(nccl), timeout_s_(timeout_s) {
    ML_CHECK(nccl_ != nullptr, "Ulysses attention over NCCL without a communicator");
    MPI_CHECK(MPI_Comm_size(group, &k_));
    MPI_CHECK(MPI_Comm_rank(group, &me_));
    int ranks = 0, self = -1;
    NCCL_CHECK(ncclCommCount(nccl_, &ranks));
    NCCL_CHECK(ncclCommUserRank(nccl_, &self));
    ML_CHECK(
        ranks == k_ && self == me_,
        strf("Ulysses attention: member %d of %d is NCCL rank %d of %d", me_, k_, self, ranks));
    check_current_device(nccl_, "Ulysses attention");
  }

  std::vector<int64_t> gather_counts(int64_t n, cudaStream_t stream) override {
    counts_.resize(size_t(k_));
    CUDA_CHECK(
        cudaMemcpyAsync(counts_.data() + me_, &n, sizeof(int64_t), cudaMemcpyHostToDevice, stream));
    NCCL_CHECK(ncclAllGather(counts_.data() + me_, counts_.data(), sizeof(int64_t), ncclUint8,
                             nccl_, stream));
    wait_stream(stream, nccl_, timeout_s_, "the Ulysses token counts over NCCL");
    std::vector<int64_t> all(static_cast<size_t>(k_));
    CUDA_CHECK(cudaMemcpy(all.data(), counts_.data(), all.size() * sizeof(int64_t),
                          cudaMemcpyDeviceToHost));
    return all;
  }

  void exchange(const std::vector<UlyssesPart>& parts, const UlyssesPlan& plan,
                cudaStream_t stream) override {
    NCCL_CHECK(ncclGroupStart());
    for (const UlyssesPart& p : parts)
      for (int d = 0; d < k_; ++d) {
        if (d == me_) continue;
        const size_t s = size_t(d), rb = p.row_bytes;
        if (plan.send_rows[s] > 0)
          NCCL_CHECK(ncclSend(static_cast<const char*>(p.send) + size_t(plan.send_at[s]) * rb,
                              size_t(plan.send_rows[s]) * rb, ncclUint8, d, nccl_, stream));
        if (plan.recv_rows[s] > 0)
          NCCL_CHECK(ncclRecv(static_cast<char*>(p.recv) + size_t(plan.recv_at[s]) * rb,
                              size_t(plan.recv_rows[s]) * rb, ncclUint8, d, nccl_, stream));
      }
    NCCL_CHECK(ncclGroupEnd());
    // This member's own section stays on the device.
    const size_t me = size_t(me_);
    ML_CHECK(plan.send_rows[me] == plan.recv_rows[me],
             "Ulysses attention: this member's own section changes size");
    for (const UlyssesPart& p : parts)
      if (plan.send_rows[me] > 0)
        CUDA_CHECK(cudaMemcpyAsync(
            static_cast<char*>(p.recv) + size_t(plan.recv_at[me]) * p.row_bytes,
            static_cast<const char*>(p.send) + size_t(plan.send_at[me]) * p.row_bytes,
            size_t(plan.send_rows[me]) * p.row_bytes, cudaMemcpyDeviceToDevice, stream));
  }

 private:
  ncclComm_t nccl_;
  double timeout_s_;
  int k_ = 1, me_ = 0;
  DeviceBuffer<int64_t> counts_;
};

}  // namespace

std::unique_ptr<UlyssesLink> mpi_ulysses_link(MPI_Comm group, double timeout_s) {
  return std::make_unique<MpiUlyssesLink>(group, timeout_s);
}

std::unique_ptr<UlyssesLink> nccl_ulysses_link(MPI_Comm group, ncclComm_t nccl, double timeout_s) {
  return std::make_unique<NcclUlyssesLink>(group, nccl, timeout_s);
}

}  // namespace meshloom::cuda
