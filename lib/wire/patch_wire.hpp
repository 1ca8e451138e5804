// Image patches on the wire (token replies and batches, wire/protocol.hpp).
//
// Every patch value is a pixel's v / 127.5f - 1.0f (image::pixel_value, v in
// 0..255) or the padding 0.0f (image/patches.hpp), so a patch travels as its
// 8-bit pixels, a quarter of float32, with the padding as runs:
//   uint8   format: 1 = pixels, 0 = raw
//   pixels: uint64 n, n bytes (v; 0 where padding), varint run count, then
//           per run of padding: varint gap from the previous run's end (from
//           0 for the first), varint length (at least 1)
//   raw:    uint64 n, n float32: any other float (a NaN, -0.0, a value no
//           pixel gives) sends the whole list so, bit for bit
// Decoding gives the floats that were encoded, bit for bit, in either format.
#pragma once

#include <vector>

#include "base/bytes.hpp"

namespace meshloom::wire {

void put_patches(ByteWriter& w, const std::vector<float>& values);
// Throws Error (the reader's: names the message and the peer) on a torn or
// corrupt list.
std::vector<float> get_patches(ByteReader& r);

}  // namespace meshloom::wire
