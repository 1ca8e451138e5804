// The safetensors reader (lib/data/safetensors.cpp): the input is the file.
// One that loads must list tensors whose byte ranges lie in the file, match
// shape x dtype and do not overlap; every tensor must read as float, and
// written back as F32 read back bit for bit.
#include <bit>
#include <cstring>
#include <string>
#include <vector>

#include "data/safetensors.hpp"
#include "fuzz/harness.hpp"

using namespace meshloom;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::init();
  const std::string path = fuzz::write_file("model.safetensors", fuzz::bytes(data, size));
  std::vector<std::vector<float>> values;
  std::vector<data::StWriteTensor> back;
  try {
    const data::SafetensorsFile f(path);
    uint64_t end = 0;
    for (const data::StTensor& t : f.tensors()) {
      if (uint64_t(t.numel()) * data::st_dtype_size(t.dtype) != t.end - t.begin)
        fuzz::finding("a tensor's bytes do not match its shape");
      if (t.end > size) fuzz::finding("a tensor past the end of the file");
      end = std::max(end, t.end);
      values.push_back(f.read(t.name));
      if (values.back().size() != size_t(t.numel())) fuzz::finding("read the wrong element count");
    }
    for (size_t i = 0; i < f.tensors().size(); ++i)
      back.push_back({f.tensors()[i].name, f.tensors()[i].shape, values[i].data()});
  } catch (const Error& e) {
    fuzz::expect_names(e, {path});
    return 0;
  }
  const std::string copy = fuzz::write_file("copy.safetensors", "");
  data::write_safetensors(copy, back, data::StDtype::F32);
  const data::SafetensorsFile g(copy);
  if (g.tensors().size() != back.size()) fuzz::finding("the copy lost tensors");
  for (const data::StWriteTensor& t : back) {
    const std::vector<float> v = g.read(t.name);
    const size_t n = v.size();
    if (n > 0 && std::memcmp(v.data(), t.data, n * sizeof(float)) != 0)
      fuzz::finding("an F32 copy does not read back bit for bit");
  }
  return 0;
}
