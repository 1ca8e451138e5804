// make_cuda_backend() and cuda_backend_summary(). The CUDA backend is a module,
// libmeshloom_cuda.so beside the meshloom executable (or $MESHLOOM_CUDA_MODULE),
// loaded on first use: cuBLAS touches about 85 MiB of its own memory when it
// is loaded, and every rank that never uses a GPU (loaders, constructors, the
// lead, CPU trainers) would pay it if meshloom linked it.
#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <mutex>

#include "base/check.hpp"
#include "train/backend.hpp"

namespace meshloom::train {

#ifdef MESHLOOM_HAVE_CUDA
namespace {

// The module's entry points (kernels/host/module.hpp). They report
// errors in *error rather than throw across the module boundary.
using InitFn = void (*)(FatalHandler, int, const std::string*);
using MakeFn = TrainerBackend* (*)(const model::Shape*, const CudaBackendSpec*, std::string*);
using SummaryFn = void (*)(std::string*);

struct Module {
  MakeFn make = nullptr;
  SummaryFn summary = nullptr;
  std::string error;  // why it could not be loaded
};

std::string module_path() {
  if (const char* env = std::getenv("MESHLOOM_CUDA_MODULE"); env && *env) return env;
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  std::string dir = n > 0 ? std::string(exe, size_t(n)) : std::string();
  dir = dir.substr(0, dir.find_last_of('/') + 1);
  return dir + "libmeshloom_cuda.so";
}

const Module& module() {
  static Module m;
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string path = module_path();
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      m.error = "cannot load the CUDA backend " + path + ": " + dlerror();
      return;
    }
    const auto init = reinterpret_cast<InitFn>(dlsym(h, "meshloom_cuda_init"));
    m.make = reinterpret_cast<MakeFn>(dlsym(h, "meshloom_cuda_make_backend"));
    m.summary = reinterpret_cast<SummaryFn>(dlsym(h, "meshloom_cuda_summary"));
    if (!init || !m.make || !m.summary) {
      m.make = nullptr;
      m.error = path + " is not a meshloom CUDA backend of this version (entry points missing)";
      return;
    }
    // The module's errors end the job as ours do (MPI_Abort in a run) and
    // name this rank.
    init(fatal_handler(), process_rank(), &process_role());
  });
  return m;
}

}  // namespace

std::unique_ptr<TrainerBackend> make_cuda_backend(const model::Shape& shape,
                                                  const CudaBackendSpec& spec) {
  const Module& m = module();
  if (!m.make) throw Error("run.backend: cuda: " + m.error);
  std::string error;
  std::unique_ptr<TrainerBackend> model(m.make(&shape, &spec, &error));
  if (!model) throw Error(error);
  return model;
}

std::string cuda_backend_summary() {
  const Module& m = module();
  if (!m.make) return m.error;
  std::string out;
  m.summary(&out);
  return out;
}

#else

std::unique_ptr<TrainerBackend> make_cuda_backend(const model::Shape&, const CudaBackendSpec&) {
  // Not reached in a normal run: make_layout() refuses run.backend: cuda on
  // rank 0 first, with the reason and the fix.
  throw Error("run.backend: cuda, but this meshloom was built without the CUDA backend");
}

std::string cuda_backend_summary() { return "CPU-only build"; }

#endif

}  // namespace meshloom::train
