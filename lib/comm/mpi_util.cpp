#include "comm/mpi_util.hpp"

#include "base/check.hpp"
#include "comm/mpi_check.hpp"

namespace meshloom::comm {

void bcast_string(std::string* text, int root, MPI_Comm comm) {
  unsigned long long n = text->size();
  MPI_CHECK(MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, root, comm));
  text->resize(n);
  if (n) MPI_CHECK(MPI_Bcast(text->data(), static_cast<int>(n), MPI_CHAR, root, comm));
}

bool run_on_root(MPI_Comm comm, const std::function<std::string()>& work, std::string* out) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  int ok = 1;
  if (rank == 0) {
    try {
      *out = work();
    } catch (const Error& e) {
      ok = 0;
      *out = e.what();
    } catch (const std::exception& e) {  // a library's own (yaml-cpp, HDF5 wrappers, std)
      ok = 0;
      *out = e.what();
    }
  }
  MPI_CHECK(MPI_Bcast(&ok, 1, MPI_INT, 0, comm));
  bcast_string(out, 0, comm);
  return ok == 1;
}

std::vector<int> world_ranks(MPI_Comm comm, std::vector<int> ranks) {
  MPI_Group group, world;
  MPI_CHECK(MPI_Comm_group(comm, &group));
  MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  std::vector<int> out(ranks.size());
  MPI_CHECK(MPI_Group_translate_ranks(group, int(ranks.size()), ranks.data(), world, out.data()));
  MPI_CHECK(MPI_Group_free(&group));
  MPI_CHECK(MPI_Group_free(&world));
  return out;
}

std::vector<std::string> all_host_names(MPI_Comm comm) {
  int size = 0;
  MPI_CHECK(MPI_Comm_size(comm, &size));
  char mine[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  MPI_CHECK(MPI_Get_processor_name(mine, &len));
  std::vector<char> all(static_cast<size_t>(size) * MPI_MAX_PROCESSOR_NAME);
  MPI_CHECK(MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(),
                          MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm));
  std::vector<std::string> names;
  for (int r = 0; r < size; ++r) names.emplace_back(&all[size_t(r) * MPI_MAX_PROCESSOR_NAME]);
  return names;
}

}  // namespace meshloom::comm
