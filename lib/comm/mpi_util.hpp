// Small MPI helpers used across roles: strings over the wire, and a way for
// rank 0 to do work that may fail (read a config) so that every rank learns
// the outcome from one broadcast instead of each failing on its own.
#pragma once

#include <mpi.h>

#include <functional>
#include <string>
#include <vector>

namespace meshloom::comm {

void bcast_string(std::string* text, int root, MPI_Comm comm);

// Rank 0 runs `work`; a thrown meshloom::Error becomes the error text. All
// ranks return true with the result in *out, or false with the error in *out.
bool run_on_root(MPI_Comm comm, const std::function<std::string()>& work, std::string* out);

// The MPI_COMM_WORLD ranks of `ranks` of `comm`: what messages name, as a
// group communicator's own ranks mean nothing to a reader.
std::vector<int> world_ranks(MPI_Comm comm, std::vector<int> ranks);

// Every rank's host name, on every rank (rank order).
std::vector<std::string> all_host_names(MPI_Comm comm);

}  // namespace meshloom::comm
