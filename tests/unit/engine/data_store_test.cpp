// DataStore on an MPI rank that holds only its tiles of a tensor
// (Holding::tiles): each held tile in a contiguous block with the values the
// whole tensor has there, init= or read from a file, and nothing else held.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "io/tensor_file.hpp"
#include "test_util.hpp"
#include "ymlopt/engine/distribution.hpp"
#include "ymlopt/scheduler/data_store.hpp"

using namespace ymlopt;
using test::compile_ok;

namespace {

// Element (r, c) of a f32 view.
float at(const TensorView& v, std::int64_t r, std::int64_t c) { return static_cast<const float*>(v.data)[r * v.ld + c]; }

// Every held tile of data d equals the same tile of the whole store, and is contiguous.
void expect_tiles_match(const Dag& dag, const DataStore& whole, const DataStore& part, const Residency& held,
                        std::int32_t d) {
  const DataDecl& decl = dag.data[size_t(d)];
  ASSERT_EQ(held.data[size_t(d)], Holding::tiles) << decl.name;
  EXPECT_EQ(part.base(d), nullptr) << decl.name;
  for (std::int32_t t = 0; t < std::int32_t(decl.ntiles()); ++t) {
    if (!held.tiles[size_t(d)][size_t(t)]) {
      EXPECT_EQ(part.tile_base(d, t), nullptr);
      continue;
    }
    const TensorView a = whole.view({d, t}), b = part.view({d, t});
    ASSERT_EQ(b.data, part.tile_base(d, t));
    EXPECT_EQ(b.ld, b.cols);
    ASSERT_EQ(a.rows, b.rows);
    ASSERT_EQ(a.cols, b.cols);
    for (std::int64_t r = 0; r < a.rows; ++r)
      for (std::int64_t c = 0; c < a.cols; ++c)
        ASSERT_EQ(at(a, r, c), at(b, r, c)) << decl.name << " tile " << t << " (" << r << ", " << c << ")";
  }
}

}  // namespace

TEST(DataStore, ARankHoldingTilesOnlyAllocatesItsTilesWithTheTensorsValues) {
  // A's tiles are only read (column tiles, 1-D cyclic): on 2 ranks each holds
  // its two; B is read whole: its owner holds it whole, the other rank its tiles
  const Dag dag = compile_ok(R"(<workflow name="tiles">
    <data name="A" shape="6,20" tile="6,5" init="random" seed="3"/>
    <data name="B" shape="8,8" tile="4,4" init="range"/>
    <data name="I" shape="8,8" tile="3,3" init="identity"/>
    <data name="C" shape="6,5" init="zeros"/>
    <data name="S" shape="8,8" init="zeros"/>
    <task component="tensor.add"><in port="a" data="A[0,1]"/><in port="b" data="A[0,3]"/><out port="c" data="C"/></task>
    <task component="tensor.add"><in port="a" data="B"/><in port="b" data="I"/><out port="c" data="S"/></task>
  </workflow>)");
  const DataStore whole(dag);
  const DataOwners own = data_owners(dag, 2);
  std::size_t sum = 0;
  for (int rank = 0; rank < 2; ++rank) {
    const Residency held = residency(dag, own, rank, 2);
    const DataStore part(dag, held);
    expect_tiles_match(dag, whole, part, held, 0);  // A
    EXPECT_EQ(held.tiles[0], (std::vector<char>{rank == 0, rank == 1, rank == 0, rank == 1}));
    const Holding b = own[1][0] == rank ? Holding::whole : Holding::tiles;
    EXPECT_EQ(held.data[1], b);
    if (b == Holding::tiles) expect_tiles_match(dag, whole, part, held, 1);
    if (held.data[2] == Holding::tiles) expect_tiles_match(dag, whole, part, held, 2);  // I: identity across tiles
    sum += part.total_bytes();
  }
  EXPECT_LT(sum, 2 * whole.total_bytes());  // A's and B's tiles are held once, not per rank
}

TEST(DataStore, TilesOfAFileAreReadIntoTheirOwnBlocks) {
  // a row-major [7, 10] weight in 3-column tiles (the last one 1 wide): the
  // held tiles hold the file's columns; nothing is mapped in place
  const std::string dir = std::filesystem::temp_directory_path() / ("ymlopt_ds_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/w.safetensors";
  std::vector<float> w(70);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i) * 0.5f - 3;
  TensorView v;
  v.data = w.data(), v.rows = 7, v.cols = 10, v.ld = 10, v.shape = {7, 10};
  io::save_safetensors(path, {{"w", v}});
  const Dag dag = compile_ok(R"(<workflow name="file">
    <data name="W" shape="7,10" tile="7,3" src=")" + path + R"(" key="w"/>
    <data name="Y" shape="7,3" init="zeros"/>
    <data name="Z" shape="7,1" init="zeros"/>
    <par var="j" from="0" to="3">
      <task component="tensor.copy"><in port="x" data="W[0,${j}]"/><out port="y" data="Y"/></task>
    </par>
    <task component="tensor.copy"><in port="x" data="W[0,3]"/><out port="y" data="Z"/></task>
  </workflow>)");
  ASSERT_EQ(dag.data[0].ntiles(), 4);
  const DataStore whole(dag);
  EXPECT_EQ(whole.mapped_bytes(), 280u);
  const DataOwners own = data_owners(dag, 2);
  for (int rank = 0; rank < 2; ++rank) {
    const Residency held = residency(dag, own, rank, 2);
    const DataStore part(dag, held);
    EXPECT_EQ(part.mapped_bytes(), 0u);
    expect_tiles_match(dag, whole, part, held, 0);
    for (std::int32_t t = 0; t < 4; ++t)
      if (part.tile_base(0, t)) {
        const TensorView b = part.view({0, t});
        EXPECT_EQ(at(b, 6, 0), w[size_t(6 * 10 + 3 * t)]);
      }
  }
  std::filesystem::remove_all(dir);
}
