// Bytes in pieces: one run of bytes that lies in several places, taken back to back (a request's
// scores as gRPC received them, a batch's rows gathered from several requests). Offsets are into
// the joined bytes. `BytePieces` is a view: it borrows the list of pieces and the bytes they point
// at, and sums their sizes once, when it is made. `BytePieceList` owns a list of pieces (never
// their bytes), keeps its total as pieces are added, and hands out views. Empty pieces are allowed
// and never visited. Standard library only, so that the kernels can take it.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <span>
#include <vector>

namespace pk {

class BytePieceList;

// One piece: bytes that lie together.
using BytePiece = std::span<const std::byte>;

class BytePieces {
 public:
  BytePieces() = default;
  // Views `pieces` (a vector or span of BytePiece), which must outlive the view.
  template <typename Pieces>
  requires(std::convertible_to<const Pieces&, std::span<const BytePiece>> &&
           !std::same_as<Pieces, BytePieces> && !std::same_as<Pieces, BytePieceList>)
      BytePieces(const Pieces& pieces)  // NOLINT(google-explicit-constructor): a view, as span is
      : pieces_(pieces) {
    for (const BytePiece& piece : pieces_) bytes_ += piece.size();
  }

  // Bytes in all.
  size_t bytes() const { return bytes_; }
  bool empty() const { return bytes_ == 0; }
  std::span<const BytePiece> pieces() const { return pieces_; }
  auto begin() const { return pieces_.begin(); }
  auto end() const { return pieces_.end(); }

  // Calls visit(at, run) for each non-empty run of bytes [begin, min(end, bytes())), in order:
  // `run` lies within one piece and `at` is where it begins among all the bytes.
  template <typename Visit>
  void ForEachRun(size_t begin, size_t end, Visit&& visit) const {
    end = std::min(end, bytes_);
    size_t piece_begin = 0;  // where the current piece begins
    for (const BytePiece& piece : pieces_) {
      if (begin >= end) return;
      const size_t piece_end = piece_begin + piece.size();
      if (begin < piece_end) {
        const size_t bytes = std::min(end, piece_end) - begin;
        visit(begin, piece.subspan(begin - piece_begin, bytes));
        begin += bytes;
      }
      piece_begin = piece_end;
    }
  }

  // Copies bytes [begin, end) to `out` (end <= bytes(), room for end - begin bytes).
  void CopyTo(size_t begin, size_t end, std::byte* out) const {
    ForEachRun(begin, end, [out, begin](size_t at, BytePiece run) {
      std::memcpy(out + (at - begin), run.data(), run.size());
    });
  }

 private:
  friend class BytePieceList;
  BytePieces(std::span<const BytePiece> pieces, size_t bytes) : pieces_(pieces), bytes_(bytes) {}

  std::span<const BytePiece> pieces_;
  size_t bytes_ = 0;
};

class BytePieceList {
 public:
  BytePieceList() = default;
  BytePieceList(std::initializer_list<BytePiece> pieces) {
    for (const BytePiece& piece : pieces) push_back(piece);
  }

  void push_back(BytePiece piece) {
    pieces_.push_back(piece);
    bytes_ += piece.size();
  }
  // Appends bytes [begin, end) of `from` as pieces of it (one per piece they touch).
  void Append(const BytePieces& from, size_t begin, size_t end) {
    from.ForEachRun(begin, end, [this](size_t /*at*/, BytePiece run) { push_back(run); });
  }
  void reserve(size_t pieces) { pieces_.reserve(pieces); }
  void clear() {
    pieces_.clear();
    bytes_ = 0;
  }

  // Bytes in all.
  size_t bytes() const { return bytes_; }
  bool empty() const { return bytes_ == 0; }
  auto begin() const { return pieces_.begin(); }
  auto end() const { return pieces_.end(); }
  // Valid until the list is next changed or destroyed.
  BytePieces view() const { return BytePieces(pieces_, bytes_); }
  operator BytePieces() const { return view(); }  // NOLINT(google-explicit-constructor)

 private:
  std::vector<BytePiece> pieces_;
  size_t bytes_ = 0;
};

// Bytes [0, min(pieces.bytes(), staging.size())) of `pieces`, rows of `row_bytes` each, as pieces
// of whole rows in order: each run of whole rows within one piece is read where it lies, and each
// row split across pieces is first copied to its own offset in `staging` and read there (only
// those bytes of `staging` are written). A partial row at the end is left out.
inline BytePieceList WholeRows(const BytePieces& pieces, size_t row_bytes,
                               std::span<std::byte> staging) {
  const size_t limit = std::min(pieces.bytes(), staging.size());
  BytePieceList rows;
  rows.reserve(pieces.pieces().size() + 1);
  size_t at = 0;  // the first byte not yet handed out: a row boundary
  pieces.ForEachRun(0, limit, [&](size_t start, BytePiece run) {
    const size_t end = start + run.size();
    if (at >= end) return;  // within a row already copied to staging
    // Here start <= at: every earlier run ended at a row boundary or inside a staged row.
    const size_t whole_end = at + (end - at) / row_bytes * row_bytes;
    if (at < whole_end) rows.push_back(run.subspan(at - start, whole_end - at));
    at = whole_end;
    if (at == end) return;
    if (at + row_bytes > limit) {  // the partial row at the end
      at = limit;
      return;
    }
    pieces.CopyTo(at, at + row_bytes, staging.data() + at);
    rows.push_back(staging.subspan(at, row_bytes));
    at += row_bytes;
  });
  return rows;
}

}  // namespace pk
