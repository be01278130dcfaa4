#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipesched/io/timeline.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/schedule.hpp"

// PyTorch `torch.distributed.pipelining` CSV: one row per rank, one action per cell,
// `<stage><kind><microbatch>` with `stage` the global stage (our global chunk). Format rules
// and the spelling-detection rule are documented in docs/formats.md.

namespace pipesched {

/// How backward kinds are spelled in a PyTorch CSV.
enum class torch_spelling : std::uint8_t {
  current,  ///< F, I (input gradient = our B), W, B (full backward = our BW)
  legacy,   ///< F, B (input gradient), W, BW (full backward): older torch releases
};

/// Where actions land in the row.
enum class torch_alignment : std::uint8_t {
  /// Column = start step in unit_step_timeline(): every op lasts one step and starts as soon as
  /// its stage is free and its inputs exist; empty cells are idle steps, so columns line up
  /// across ranks as time. The compute-only form PyTorch's schedule tables use.
  unit_steps,
  /// Column = position in the stage's list: no empty cells. With SEND/RECV ops this is the
  /// compute+comms form (`_PipelineScheduleRuntime._load_csv(path, format="compute_comms")`
  /// rejects empty cells).
  list_order,
  /// list_order when the schedule has SEND/RECV ops, else unit_steps: the form PyTorch's
  /// loader for that kind of file reads.
  automatic,
};

struct torch_csv_options {
  torch_spelling spelling = torch_spelling::current;
  torch_alignment alignment = torch_alignment::automatic;
};

namespace detail {

inline std::string_view torch_kind(op_kind k, torch_spelling sp) noexcept {
  switch (k) {
    case op_kind::forward:
      return "F";
    case op_kind::backward_input:
      return sp == torch_spelling::current ? "I" : "B";
    case op_kind::backward_weight:
      return "W";
    case op_kind::backward_full:
      return sp == torch_spelling::current ? "B" : "BW";
    default:
      return to_string(k);  // SEND_F, RECV_F, SEND_B, RECV_B: same names
  }
}

struct torch_cell {
  std::size_t row = 0;  // 0-based
  std::size_t col = 0;  // 0-based
  std::uint64_t stage = 0;
  std::string kind;  // as written
  std::uint64_t mb = 0;
  bool overlap_next = false;  // the first action of a (...;...)OVERLAP_F_B cell
};

/// PyTorch's suffix of an overlapped pair cell: `(0F7;7B3)OVERLAP_F_B`.
inline constexpr std::string_view torch_overlap_suffix = ")OVERLAP_F_B";

inline std::string trim(std::string_view s) {
  std::size_t a = 0;
  std::size_t b = s.size();
  while (a < b && (s[a] == ' ' || s[a] == '\t' || s[a] == '"')) {
    ++a;
  }
  while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t' || s[b - 1] == '"' || s[b - 1] == '\r')) {
    --b;
  }
  return std::string(s.substr(a, b - a));
}

// Digits, then letters/underscores, then digits; false when the cell has another shape or a
// number overflows 2^32.
inline bool split_cell(const std::string& c, torch_cell& out) {
  std::size_t i = 0;
  auto number = [&](std::uint64_t& v) {
    const std::size_t from = i;
    v = 0;
    while (i < c.size() && c[i] >= '0' && c[i] <= '9') {
      v = v * 10 + static_cast<std::uint64_t>(c[i] - '0');
      if (v > std::numeric_limits<std::uint32_t>::max()) {
        return false;
      }
      ++i;
    }
    return i > from;
  };
  if (!number(out.stage)) {
    return false;
  }
  const std::size_t k0 = i;
  while (i < c.size() && ((c[i] >= 'A' && c[i] <= 'Z') || c[i] == '_')) {
    ++i;
  }
  out.kind = c.substr(k0, i - k0);
  if (out.kind.empty()) {
    return false;
  }
  if (i == c.size()) {  // UNSHARD / RESHARD / REDUCE_GRAD carry no micro-batch
    out.mb = std::numeric_limits<std::uint64_t>::max();
    return true;
  }
  return number(out.mb) && i == c.size();
}

/// The name in the reader's messages.
inline constexpr const char* torch_reader = "from_torch_csv";

/// Throws the error of the cell at 0-based (row, col): "from_torch_csv: row 3, column 2: ...".
template <class... Args>
[[noreturn]] void torch_cell_fail(std::size_t row, std::size_t col, const Args&... what) {
  fail(torch_reader, ": row ", row + 1, ", column ", col + 1, what...);
}

/// The lines of `text`; trailing blank lines are not ranks (a line of commas only is an idle
/// rank).
inline std::vector<std::string_view> torch_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t eol = text.find('\n', pos);
    eol = eol == std::string_view::npos ? text.size() : eol;
    lines.push_back(text.substr(pos, eol - pos));
    pos = eol + 1;
  }
  while (!lines.empty() && trim(lines.back()).empty()) {
    lines.pop_back();
  }
  return lines;
}

/// Parses one action, `written`, of the (trimmed) cell `cell` at (row, col) into c; false for an
/// FSDP action (UNSHARD / RESHARD / REDUCE_GRAD: nothing to schedule).
inline bool torch_action(const std::string& written,
                         const std::string& cell,
                         std::size_t row,
                         std::size_t col,
                         torch_cell& c) {
  c.row = row;
  c.col = col;
  if (!split_cell(written, c)) {
    torch_cell_fail(row, col, ": malformed cell \"", cell,
                    "\" (expected <stage><kind><microbatch>, e.g. 0F3)");
  }
  const bool no_mb = c.mb == std::numeric_limits<std::uint64_t>::max();
  const bool mb_free_kind = c.kind == "UNSHARD" || c.kind == "RESHARD" || c.kind == "REDUCE_GRAD";
  if (no_mb != mb_free_kind) {
    torch_cell_fail(row, col, ": malformed cell \"", cell,
                    no_mb ? "\" (missing micro-batch)" : "\" (this action takes no micro-batch)");
  }
  if (no_mb) {
    return false;
  }
  // R is ours, not PyTorch's (it has no recompute action; to_torch_csv refuses it too).
  if ((c.kind != "F" && c.kind != "I" && c.kind != "B" && c.kind != "W" && c.kind != "BW" &&
       !parse_op_kind(c.kind)) ||
      c.kind == "R") {
    torch_cell_fail(row, col, ": unknown action \"", c.kind, "\" in cell \"", cell,
                    "\" (expected F, I, B, W, BW, SEND_F, RECV_F, SEND_B or RECV_B)");
  }
  return true;
}

/// Parses the cell `(<action>;<action>)OVERLAP_F_B` at (row, col): two actions overlapped, the
/// first marked overlap_next; appends them to `out`.
inline void torch_overlap_pair(const std::string& cell,
                               std::size_t row,
                               std::size_t col,
                               std::vector<torch_cell>& out) {
  const std::string_view sfx = torch_overlap_suffix;
  const std::size_t semi = cell.find(';');
  const bool shaped = cell.size() > sfx.size() + 1 &&
                      std::string_view(cell).substr(cell.size() - sfx.size()) == sfx &&
                      semi != std::string::npos && cell.find(';', semi + 1) == std::string::npos;
  if (!shaped) {
    torch_cell_fail(row, col, ": malformed cell \"", cell,
                    "\" (expected an overlapped pair (<action>;<action>)OVERLAP_F_B, e.g. "
                    "(0F7;7B3)OVERLAP_F_B)");
  }
  torch_cell a;
  torch_cell b;
  if (!torch_action(trim(std::string_view(cell).substr(1, semi - 1)), cell, row, col, a) ||
      !torch_action(
          trim(std::string_view(cell).substr(semi + 1, cell.size() - sfx.size() - semi - 1)), cell,
          row, col, b)) {
    torch_cell_fail(row, col, ": cell \"", cell,
                    "\": an overlapped pair holds two compute actions");
  }
  a.overlap_next = true;
  out.push_back(std::move(a));
  out.push_back(std::move(b));
}

/// The actions of one line (0-based row), in column order; empty cells are idle.
inline std::vector<torch_cell> torch_row(std::string_view line, std::size_t row) {
  std::vector<torch_cell> out;
  std::size_t col = 0;
  for (std::size_t cpos = 0; cpos <= line.size(); ++col) {
    std::size_t comma = line.find(',', cpos);
    comma = comma == std::string_view::npos ? line.size() : comma;
    const std::string cell = trim(line.substr(cpos, comma - cpos));
    cpos = comma + 1;
    if (cell.empty()) {
      continue;
    }
    if (cell.front() == '(') {
      torch_overlap_pair(cell, row, col, out);
      continue;
    }
    torch_cell c;
    if (torch_action(cell, cell, row, col, c)) {
      out.push_back(std::move(c));
    }
  }
  return out;
}

/// What the whole file says about its shape and its spelling.
struct torch_survey {
  const torch_cell* first_i = nullptr;
  const torch_cell* first_bw = nullptr;
  bool any_w = false;
  bool any = false;  ///< any action at all
  std::uint64_t max_stage = 0;
  std::uint64_t max_mb = 0;
};

inline torch_survey torch_survey_of(const std::vector<std::vector<torch_cell>>& rows) {
  torch_survey sv;
  for (const auto& r : rows) {
    for (const auto& c : r) {
      sv.first_i = (!sv.first_i && c.kind == "I") ? &c : sv.first_i;
      sv.first_bw = (!sv.first_bw && c.kind == "BW") ? &c : sv.first_bw;
      sv.any_w = sv.any_w || c.kind == "W";
      sv.max_stage = std::max(sv.max_stage, c.stage);
      sv.max_mb = std::max(sv.max_mb, c.mb);
      sv.any = true;
    }
  }
  return sv;
}

/// The spelling rule (docs/formats.md): whether B is the input gradient (else the full
/// backward). Throws when I and BW are mixed.
inline bool torch_b_is_input_grad(const torch_survey& sv) {
  if (sv.first_i && sv.first_bw) {
    torch_cell_fail(sv.first_bw->row, sv.first_bw->col,
                    ": BW (older spelling) mixed with I (current spelling) at row ",
                    sv.first_i->row + 1, ", column ", sv.first_i->col + 1);
  }
  return sv.first_bw != nullptr || (sv.first_i == nullptr && sv.any_w);
}

inline constexpr std::uint32_t torch_no_rank = std::numeric_limits<std::uint32_t>::max();

/// The rank (row) of each of the `total` stages, torch_no_rank for a stage no cell names.
/// Throws when a stage is on two ranks.
inline std::vector<std::uint32_t> torch_rank_of(const std::vector<std::vector<torch_cell>>& rows,
                                                std::uint64_t total) {
  std::vector<std::uint32_t> rank_of(total, torch_no_rank);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (const auto& c : rows[r]) {
      auto& owner = rank_of[c.stage];
      if (owner == torch_no_rank) {
        owner = static_cast<std::uint32_t>(r);
      } else if (owner != r) {
        torch_cell_fail(c.row, c.col, ": stage ", c.stage, " is on rank ", owner, " (row ",
                        owner + 1, ") and on rank ", r);
      }
    }
  }
  return rank_of;
}

/// A custom placement: each rank's stages in increasing order; every rank must hold v.
inline placement torch_custom_placement(const std::vector<std::uint32_t>& rank_of,
                                        std::uint32_t p,
                                        std::uint32_t v) {
  const std::uint64_t total = rank_of.size();
  // Bucket the stages by rank in one pass: a rank-by-rank scan would take p*total steps.
  std::vector<std::uint32_t> held(p, 0);
  for (std::uint64_t g = 0; g < total; ++g) {
    if (rank_of[g] != torch_no_rank) {
      ++held[rank_of[g]];
    }
  }
  for (std::uint32_t r = 0; r < p; ++r) {
    if (held[r] != v) {
      fail(torch_reader, ": rank ", r, " (row ", r + 1, ") holds ", held[r], " stages, expected ",
           v, " (stages are neither loop- nor V-placed, so every rank must hold exactly ", v,
           " stage indices)");
    }
  }
  std::vector<global_chunk> table(total);
  std::vector<std::uint32_t> next(p, 0);
  for (std::uint64_t g = 0; g < total; ++g) {
    if (rank_of[g] != torch_no_rank) {
      const std::uint32_t r = rank_of[g];
      table[std::size_t{r} * v + next[r]++] = static_cast<global_chunk>(g);
    }
  }
  return placement::custom(p, v, std::move(table));
}

/// The placement of v stages per rank: loop (sequential when v = 1), V, or else a custom table.
inline placement torch_placement(const std::vector<std::vector<torch_cell>>& rows,
                                 std::uint64_t total,
                                 std::uint32_t v) {
  const auto p = static_cast<std::uint32_t>(rows.size());
  const std::vector<std::uint32_t> rank_of = torch_rank_of(rows, total);
  auto fits = [&](auto&& rank_for) {
    for (std::uint64_t g = 0; g < total; ++g) {
      if (rank_of[g] != torch_no_rank && rank_of[g] != rank_for(g)) {
        return false;
      }
    }
    return true;
  };
  if (fits([&](std::uint64_t g) { return static_cast<std::uint32_t>(g % p); })) {
    return placement::loop(p, v);
  }
  if (v == 2 && fits([&](std::uint64_t g) {
        return static_cast<std::uint32_t>(g < p ? g : 2 * p - 1 - g);
      })) {
    return placement::v_shape(p);
  }
  return torch_custom_placement(rank_of, p, v);
}

/// Our kind of a checked action: B by the file's spelling, the others by name.
inline op_kind torch_op_kind(const std::string& kind, bool b_is_input_grad) {
  if (kind == "I") {
    return op_kind::backward_input;
  }
  if (kind == "B") {
    return b_is_input_grad ? op_kind::backward_input : op_kind::backward_full;
  }
  return *parse_op_kind(kind);  // F, W, BW, SEND_*, RECV_*: checked by torch_action
}

}  // namespace detail

/// The actions of `sched` as PyTorch spells them, one list per rank (stage) r: each entry is
/// `<global stage><kind><mb>` with global stage = sched.layout().global(stage, chunk); a SEND
/// carries the sender's global stage and a RECV the receiver's, as in PyTorch's lowering. An
/// op marked overlaps_next and the op after it share one entry, PyTorch's
/// `(<action>;<action>)OVERLAP_F_B`, at the pair's position (its start step with unit_steps).
/// With unit_steps alignment (automatic on a compute-only schedule) an empty string is an idle
/// step and trailing idle steps are omitted; throws invalid_argument when such a schedule
/// cannot run to the end. These are the cells of to_torch_csv().
inline std::vector<std::vector<std::string>> to_torch_actions(const schedule& sched,
                                                              const torch_csv_options& opts = {}) {
  const placement& pl = sched.layout();
  if (pl.routes() > 1) {
    detail::fail(
        "to_torch_csv: schedule \"", sched.name(), "\" has ", pl.routes(), " routes (placement ",
        to_string(pl.kind()),
        "): PyTorch's schedule CSV names one chain of stages that every micro-batch runs "
        "through from stage 0, so it cannot say that a micro-batch enters at another stage "
        "(docs/formats.md); write the schedule JSON instead");
  }
  std::optional<timeline> tl;
  const bool steps = opts.alignment == torch_alignment::unit_steps ||
                     (opts.alignment == torch_alignment::automatic && !sched.has_comm());
  if (steps) {
    tl = detail::unit_step_timeline(sched, "to_torch_csv");
  }
  std::vector<std::vector<std::string>> rows(sched.stages());
  for (stage_index s = 0; s < sched.stages(); ++s) {
    const auto ops = sched.ops(s);
    std::vector<std::string>& cells = rows[s];
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const op& o = ops[i];
      if (o.chunk >= pl.chunks()) {
        detail::fail("to_torch_csv: stage ", s, ", op ", i, " (", to_string(o, true),
                     "): chunk must be < chunks (", pl.chunks(), ")");
      }
      if (o.kind == op_kind::recompute || is_recomputed(o)) {
        detail::fail("to_torch_csv: stage ", s, ", op ", i, " (", to_string(o, true),
                     "): PyTorch pipelining has no recompute action (R, or an F marked "
                     "recompute); checkpoint inside the stage module and export the schedule "
                     "without with_recompute");
      }
      const std::size_t col = tl ? static_cast<std::size_t>(tl->stages[s][i].start) : cells.size();
      if (cells.size() <= col) {
        cells.resize(col + 1);
      }
      auto action = [&](const op& a) {
        return std::to_string(pl.global(s, a.chunk)) +
               std::string(detail::torch_kind(a.kind, opts.spelling)) + std::to_string(a.mb);
      };
      if (overlaps_next(o) && i + 1 < ops.size() && ops[i + 1].chunk < pl.chunks()) {
        cells[col] =
            "(" + action(o) + ";" + action(ops[i + 1]) + std::string(detail::torch_overlap_suffix);
        ++i;  // the pair's second op shares the cell
      } else {
        cells[col] = action(o);
      }
    }
  }
  return rows;
}

/// Writes `sched` as a PyTorch pipelining CSV: row r = rank (stage) r, its cells the actions
/// of to_torch_actions() separated by commas (empty cells idle, trailing ones omitted), '\n'
/// after every row. Throws what to_torch_actions() throws.
inline std::string to_torch_csv(const schedule& sched, const torch_csv_options& opts = {}) {
  std::string out;
  for (const auto& cells : to_torch_actions(sched, opts)) {
    for (std::size_t c = 0; c < cells.size(); ++c) {
      out += c == 0 ? "" : ",";
      out += cells[c];
    }
    out += '\n';
  }
  return out;
}

/// Reads a PyTorch pipelining CSV (rules in docs/formats.md):
/// - one row per rank; p = number of rows (trailing blank lines ignored); empty cells are idle;
///   cells are trimmed of spaces and quotes; columns only order the ops of a row;
/// - spelling: a file with an `I` cell uses the current spelling (B = full backward), one with a
///   `BW` cell the legacy spelling (B = input gradient); with neither, B is the input gradient
///   when the file has any W, else the full backward; both I and BW is an error;
/// - total chunks = highest stage index + 1, which must be a multiple of p (v = total / p);
///   placement: sequential when v = 1 and stage == rank, loop when stage g is on rank g mod p, V
///   when v = 2 and stage g is on rank g (g < p) or 2p−1−g; otherwise a custom table (each
///   rank's stages in increasing order, every stage index present);
/// - `(<action>;<action>)OVERLAP_F_B` is two ops overlapped: the first marked overlaps_next
///   (the validator checks the pair);
/// - m = highest micro-batch + 1; UNSHARD / RESHARD / REDUCE_GRAD cells are skipped.
/// Throws invalid_argument naming the 1-based row and column of a malformed cell.
inline schedule from_torch_csv(std::string_view text, std::string name = "torch-csv") {
  constexpr const char* who = detail::torch_reader;
  const std::vector<std::string_view> lines = detail::torch_lines(text);
  std::vector<std::vector<detail::torch_cell>> rows;
  rows.reserve(lines.size());
  for (std::size_t row = 0; row < lines.size(); ++row) {
    rows.push_back(detail::torch_row(lines[row], row));
  }
  if (rows.empty()) {
    detail::fail(who, ": no rows (a PyTorch CSV has one row per rank)");
  }
  if (rows.size() > max_stages) {
    detail::fail(who, ": ranks (", rows.size(), " rows) must be at most ", max_stages);
  }
  const auto p = static_cast<std::uint32_t>(rows.size());
  const detail::torch_survey sv = detail::torch_survey_of(rows);
  if (!sv.any) {
    detail::fail(who, ": no actions (every cell is empty)");
  }
  const bool b_is_input_grad = detail::torch_b_is_input_grad(sv);

  const std::uint64_t total = sv.max_stage + 1;
  if (total % p != 0) {
    detail::fail(who, ": stage count (highest stage index + 1 = ", total,
                 ") must be a multiple of the rank count (", p, " rows)");
  }
  if (total / p > std::numeric_limits<chunk_index>::max() || total > max_total_chunks) {
    detail::fail(who, ": stage count (", total, ") is too large");
  }
  const auto v = static_cast<std::uint32_t>(total / p);
  if (sv.max_mb + 1 > max_microbatches) {
    detail::fail(who, ": microbatches (m=", sv.max_mb + 1, ") must be at most ", max_microbatches);
  }
  const auto m = static_cast<std::uint32_t>(sv.max_mb + 1);
  const placement pl = detail::torch_placement(rows, total, v);

  schedule out = schedule::on(std::move(name), pl, m);
  for (std::uint32_t r = 0; r < p; ++r) {
    auto& ops = out.stage_ops(r);
    ops.reserve(rows[r].size());
    for (const auto& c : rows[r]) {
      const op o = make_op(detail::torch_op_kind(c.kind, b_is_input_grad),
                           static_cast<microbatch_index>(c.mb),
                           pl.local_of(static_cast<global_chunk>(c.stage)));
      ops.push_back(c.overlap_next ? overlapping_next(o) : o);
    }
  }
  return out;
}

}  // namespace pipesched
