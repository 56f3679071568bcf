// How the NHWC GEMM drivers (float, QS8, QD8) cut a product into thread-pool tasks (internal
// header): row tiles of balanced sizes, tasks of a few row tiles by a few column blocks, and the
// order tasks are numbered in. None of it depends on the thread count, and none of it changes
// how an output element is summed, so every split gives the same bits.
#pragma once

#include <algorithm>
#include <cstdint>

namespace executorch {
namespace kernels {
namespace cpu {

// Row tiles of at most MR rows whose sizes differ by at most one (49 rows as 7 x 7, not 6 x 8
// + 1: a one-row tile runs its chains back to back at a fraction of the peak, and an odd small
// tile leaves one thread idle at the end).
struct RowTiles {
  int64_t base, extra;  // tile t has base + (t < extra) rows
  RowTiles(int64_t m, int64_t tiles) : base(m / tiles), extra(m % tiles) {}
  int64_t begin(int64_t t) const { return t * base + std::min(t, extra); }
  int64_t rows(int64_t t) const { return base + (t < extra ? 1 : 0); }
};

// Multiply-adds per task for m rows of row_macs multiply-adds each: at least `least`, more for a
// larger product (up to 2^20) while it still makes 32 tasks. A task whose tiles take all their
// column blocks builds each tile's row pointers once and can run the blocks in one kernel call;
// 32 tasks keep two to four threads balanced. Shape-only, like the rest of the split.
inline int64_t task_macs_for(int64_t m, int64_t row_macs, int64_t least) {
  constexpr int64_t kMost = int64_t(1) << 20, kMinTasks = 32;
  row_macs = std::max<int64_t>(1, row_macs);
  const int64_t macs = m > (int64_t(1) << 62) / row_macs ? int64_t(1) << 62 : m * row_macs;
  return std::max(least, std::min(kMost, macs / kMinTasks));
}

// Tasks over (group, span of row tiles, span of column blocks), each about `task_macs`
// multiply-adds. The pool hands each thread a contiguous run of task numbers, so the numbering
// decides what a thread keeps in its cache. Row-tile major by default: a thread's tiles read
// their rows once, and they are the rows the thread wrote in the layer before (which split its
// rows the same way), still in its core's cache. Column-block major when the weights outweigh
// the rows and are too large for one core's cache (ResNet's 7x7 layers, 2-9 MB of weights): a
// thread then reads only its share of the weights, each block once for all its tiles.
struct GemmSplit {
  // Weights above this take column-block-major numbering when they outweigh the rows. Below it
  // (MobileNetV2's 7x7 layers, 0.6-1.6 MB; ResNet-50's 14x14 ones, 1 MB) the rows' affinity
  // wins: at two threads, with those layers column-block major, MobileNetV2 took 3% longer, and
  // the adds after them 1.7-2.7 times as long (their inputs half in the other core's cache).
  static constexpr int64_t kBlockMajorBytes = int64_t(2) << 20;
  int64_t tiles, blocks, tiles_per, blocks_per, tile_tasks, block_tasks, tasks;
  bool block_major;

  // m rows in `tiles` tiles, n columns in `blocks` blocks, per group; tile_macs: multiply-adds
  // of one tile by one block; a task's blocks come in multiples of block_group (a one-row tile
  // runs several blocks at once); weight_bytes: the packed weights the product reads.
  GemmSplit(int64_t groups, int64_t m, int64_t n, int64_t tiles_, int64_t blocks_, int64_t tile_macs, int64_t task_macs,
            int64_t block_group, int64_t weight_bytes)
      : tiles(tiles_), blocks(blocks_) {
    tile_macs = std::max<int64_t>(1, tile_macs);
    tiles_per = std::clamp<int64_t>(task_macs / (tile_macs * blocks), 1, tiles);
    blocks_per = blocks;
    if (tiles_per == 1) {
      blocks_per = std::max<int64_t>(1, task_macs / tile_macs);
      blocks_per = std::min(blocks, (blocks_per + block_group - 1) / block_group * block_group);
    }
    tile_tasks = (tiles + tiles_per - 1) / tiles_per;
    block_tasks = (blocks + blocks_per - 1) / blocks_per;
    tasks = groups * tile_tasks * block_tasks;
    block_major = n > m && weight_bytes > kBlockMajorBytes;
  }

  struct Task {
    int64_t g, tile0, tile1, block0, block1;  // tiles [tile0, tile1), blocks [block0, block1)
  };
  Task at(int64_t task) const {
    const int64_t per_group = tile_tasks * block_tasks, i = task % per_group;
    const int64_t tt = block_major ? i % tile_tasks : i / block_tasks;
    const int64_t bt = block_major ? i / tile_tasks : i % block_tasks;
    return {task / per_group, tt * tiles_per, std::min(tiles, (tt + 1) * tiles_per), bt * blocks_per,
            std::min(blocks, (bt + 1) * blocks_per)};
  }
};

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
