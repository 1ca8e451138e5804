// dump_patches IMAGE MAX_SIDE PATCH OUT: writes image_to_patches() for
// pil_compare.py. OUT: one text line "rows cols patch\n", then the float32
// values (native byte order). Bad images print the ImageError and exit 1.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "image/patches.hpp"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: dump_patches IMAGE MAX_SIDE PATCH OUT\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  meshloom::image::ImageOptions options;
  options.max_side = std::atoi(argv[2]);
  options.patch = std::atoi(argv[3]);
  try {
    const meshloom::image::Patches p = meshloom::image::image_to_patches(bytes.str(), options);
    std::ofstream out(argv[4], std::ios::binary);
    out << p.rows << ' ' << p.cols << ' ' << p.patch << '\n';
    out.write(reinterpret_cast<const char*>(p.values.data()),
              std::streamsize(p.values.size() * sizeof(float)));
    return out ? 0 : 1;
  } catch (const meshloom::image::ImageError& e) {
    std::fprintf(stderr, "%s: %s\n", argv[1], e.what());
    return 1;
  }
}
