// BytePieces and BytePieceList (kernels/byte_pieces.h): the total, the runs of a byte range and its
// copy across piece boundaries and empty pieces, appending a range as pieces, and the whole-row
// split that reads whole rows in place and stages only rows split across pieces. Each case cuts
// one buffer of known bytes at chosen points and checks against that buffer.
#include "kernels/byte_pieces.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace pk {
namespace {

std::vector<std::byte> Counting(size_t bytes) {
  std::vector<std::byte> all(bytes);
  for (size_t i = 0; i < bytes; ++i) all[i] = static_cast<std::byte>(i * 7 + 3);
  return all;
}

// `all` cut at `cuts` (ascending, repeats make empty pieces), the last piece running to the end.
std::vector<BytePiece> Cut(std::span<const std::byte> all, const std::vector<size_t>& cuts) {
  std::vector<BytePiece> pieces;
  size_t begin = 0;
  for (const size_t cut : cuts) {
    pieces.push_back(all.subspan(begin, cut - begin));
    begin = cut;
  }
  pieces.push_back(all.subspan(begin));
  return pieces;
}

const std::vector<std::vector<size_t>> kCuts = {
    {}, {0}, {1}, {5, 5, 5}, {10, 11, 12}, {3, 17, 17, 31, 39}, {40, 40}, {0, 0, 20, 40}};

TEST(BytePieces, BytesIsTheSumOfThePiecesAndEmptyViewsHoldNone) {
  const std::vector<std::byte> all = Counting(40);
  for (const std::vector<size_t>& cuts : kCuts) {
    const std::vector<BytePiece> pieces = Cut(all, cuts);
    const BytePieces view(pieces);
    EXPECT_EQ(view.bytes(), 40u) << pieces.size() << " pieces";
    EXPECT_EQ(view.pieces().size(), pieces.size());
    EXPECT_FALSE(view.empty());
  }
  EXPECT_EQ(BytePieces().bytes(), 0u);
  EXPECT_TRUE(BytePieces().empty());
  const std::vector<BytePiece> only_empty = {BytePiece(), BytePiece()};
  EXPECT_TRUE(BytePieces(only_empty).empty());
}

TEST(BytePieces, RunsOfARangeCoverItInOrderWithinOnePieceEachAndSkipEmptyPieces) {
  const std::vector<std::byte> all = Counting(40);
  for (const std::vector<size_t>& cuts : kCuts) {
    const std::vector<BytePiece> pieces = Cut(all, cuts);
    const BytePieces view(pieces);
    for (size_t begin = 0; begin <= 40; ++begin) {
      for (size_t end = begin; end <= 45; ++end) {  // past the end: clamped to bytes()
        size_t next = begin;
        view.ForEachRun(begin, end, [&](size_t at, BytePiece run) {
          EXPECT_EQ(at, next) << "runs out of order or with a gap";
          EXPECT_FALSE(run.empty()) << "an empty run";
          EXPECT_EQ(run.data(), all.data() + at) << "a run that is not the bytes at its offset";
          bool within_one_piece = false;
          for (const BytePiece& piece : pieces) {
            within_one_piece |= run.data() >= piece.data() &&
                                run.data() + run.size() <= piece.data() + piece.size();
          }
          EXPECT_TRUE(within_one_piece) << "a run across pieces at " << at;
          next = at + run.size();
        });
        EXPECT_EQ(next, std::max(begin, std::min<size_t>(end, 40)))
            << "[" << begin << ", " << end << ") not covered";
      }
    }
  }
}

TEST(BytePieces, CopyToCopiesAnyRangeAcrossPieceBoundaries) {
  const std::vector<std::byte> all = Counting(40);
  for (const std::vector<size_t>& cuts : kCuts) {
    const std::vector<BytePiece> pieces = Cut(all, cuts);
    const BytePieces kept(pieces);
    for (size_t begin = 0; begin <= 40; ++begin) {
      for (size_t end = begin; end <= 40; ++end) {
        std::vector<std::byte> out(end - begin + 1, std::byte{0xEE});
        kept.CopyTo(begin, end, out.data());
        EXPECT_EQ(std::vector<std::byte>(out.begin(), out.end() - 1),
                  std::vector<std::byte>(all.begin() + begin, all.begin() + end))
            << "[" << begin << ", " << end << ")";
        EXPECT_EQ(out.back(), std::byte{0xEE}) << "wrote past end - begin bytes";
      }
    }
  }
}

TEST(BytePieceList, AppendTakesARangeAsPiecesAndKeepsItsTotal) {
  const std::vector<std::byte> all = Counting(40);
  const std::vector<BytePiece> pieces = Cut(all, {3, 17, 17, 31, 39});
  BytePieceList list;
  list.Append(pieces, 10, 20);  // across an empty piece
  list.Append(pieces, 35, 40);
  list.push_back(BytePiece());
  EXPECT_EQ(list.bytes(), 15u);
  EXPECT_EQ(list.view().bytes(), 15u);
  std::vector<std::byte> joined(15);
  list.view().CopyTo(0, 15, joined.data());
  std::vector<std::byte> expected(all.begin() + 10, all.begin() + 20);
  expected.insert(expected.end(), all.begin() + 35, all.end());
  EXPECT_EQ(joined, expected);
  size_t count = 0;
  for (const BytePiece& piece : list) count += piece.empty() ? 0 : 1;
  EXPECT_EQ(count, 4u) << "[10, 17), [17, 20), [35, 39), [39, 40)";
  list.clear();
  EXPECT_EQ(list.bytes(), 0u);
  EXPECT_EQ(list.begin(), list.end());
}

TEST(WholeRows, ReadsWholeRowsInPlaceAndStagesOnlyRowsSplitAcrossPieces) {
  constexpr size_t kRowBytes = 8;
  constexpr size_t kRows = 6;
  const std::vector<std::byte> all = Counting(kRowBytes * kRows);
  for (const std::vector<size_t>& cuts : std::vector<std::vector<size_t>>{
           {}, {8, 16}, {5}, {7, 9}, {9, 9, 10, 11, 30}, {1, 2, 3, 47}, {0, 48}, {4, 20, 44}}) {
    const std::vector<BytePiece> pieces = Cut(all, cuts);
    std::vector<std::byte> staging(all.size(), std::byte{0xEE});
    const BytePieceList rows = WholeRows(pieces, kRowBytes, staging);

    std::vector<std::byte> joined;
    std::vector<bool> staged_row(kRows, false);
    for (const BytePiece& run : rows) {
      ASSERT_FALSE(run.empty());
      ASSERT_EQ(run.size() % kRowBytes, 0u) << "a run of part of a row";
      const bool in_place = run.data() >= all.data() && run.data() < all.data() + all.size();
      const bool staged =
          run.data() >= staging.data() && run.data() < staging.data() + staging.size();
      ASSERT_TRUE(in_place || staged);
      const size_t at = joined.size();
      if (staged) {
        EXPECT_EQ(run.size(), kRowBytes) << "more than one row staged at once";
        EXPECT_EQ(static_cast<size_t>(run.data() - staging.data()), at)
            << "a staged row away from its own offset";
        staged_row[at / kRowBytes] = true;
      } else {
        EXPECT_EQ(static_cast<size_t>(run.data() - all.data()), at);
      }
      joined.insert(joined.end(), run.begin(), run.end());
    }
    EXPECT_EQ(joined, all) << cuts.size() << " cuts";
    EXPECT_EQ(rows.bytes(), all.size());
    // A row is staged exactly when a cut falls strictly inside it (between two non-empty parts).
    for (size_t row = 0; row < kRows; ++row) {
      bool split = false;
      for (const size_t cut : cuts) split |= cut > row * kRowBytes && cut < (row + 1) * kRowBytes;
      EXPECT_EQ(staged_row[row], split) << "row " << row;
      if (!split) {
        for (size_t i = 0; i < kRowBytes; ++i) {
          EXPECT_EQ(staging[row * kRowBytes + i], std::byte{0xEE}) << "row " << row << " staged";
        }
      }
    }
  }
}

TEST(WholeRows, StopsAtTheStagingsSizeAndLeavesOutAPartialLastRow) {
  constexpr size_t kRowBytes = 8;
  const std::vector<std::byte> all = Counting(4 * kRowBytes + 5);
  const std::vector<BytePiece> pieces = Cut(all, {12, 30});
  std::vector<std::byte> staging(all.size());
  EXPECT_EQ(WholeRows(pieces, kRowBytes, staging).bytes(), 4 * kRowBytes);
  std::vector<std::byte> short_staging(2 * kRowBytes + 3);
  EXPECT_EQ(WholeRows(pieces, kRowBytes, short_staging).bytes(), 2 * kRowBytes);
  EXPECT_EQ(WholeRows(BytePieces(), kRowBytes, staging).bytes(), 0u);
}

}  // namespace
}  // namespace pk
