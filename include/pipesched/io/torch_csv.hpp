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
  using detail::torch_cell;
  constexpr const char* who = "from_torch_csv";
  std::vector<std::string_view> lines;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t eol = text.find('\n', pos);
    eol = eol == std::string_view::npos ? text.size() : eol;
    lines.push_back(text.substr(pos, eol - pos));
    pos = eol + 1;
  }
  // Trailing blank lines are not ranks (a line of commas only is an idle rank).
  while (!lines.empty() && detail::trim(lines.back()).empty()) {
    lines.pop_back();
  }
  std::vector<std::vector<torch_cell>> rows(lines.size());
  for (std::size_t row = 0; row < lines.size(); ++row) {
    const std::string_view line = lines[row];
    std::size_t col = 0;
    for (std::size_t cpos = 0; cpos <= line.size(); ++col) {
      std::size_t comma = line.find(',', cpos);
      comma = comma == std::string_view::npos ? line.size() : comma;
      const std::string cell = detail::trim(line.substr(cpos, comma - cpos));
      cpos = comma + 1;
      if (cell.empty()) {
        continue;
      }
      // One action; false for an FSDP action (nothing to schedule).
      auto action = [&](const std::string& written, torch_cell& c) {
        c.row = row;
        c.col = col;
        if (!detail::split_cell(written, c)) {
          detail::fail(who, ": row ", row + 1, ", column ", col + 1, ": malformed cell \"", cell,
                       "\" (expected <stage><kind><microbatch>, e.g. 0F3)");
        }
        const bool no_mb = c.mb == std::numeric_limits<std::uint64_t>::max();
        const bool mb_free_kind =
            c.kind == "UNSHARD" || c.kind == "RESHARD" || c.kind == "REDUCE_GRAD";
        if (no_mb != mb_free_kind) {
          detail::fail(
              who, ": row ", row + 1, ", column ", col + 1, ": malformed cell \"", cell,
              no_mb ? "\" (missing micro-batch)" : "\" (this action takes no micro-batch)");
        }
        if (no_mb) {
          return false;
        }
        // R is ours, not PyTorch's (it has no recompute action; to_torch_csv refuses it too).
        if ((c.kind != "F" && c.kind != "I" && c.kind != "B" && c.kind != "W" && c.kind != "BW" &&
             !parse_op_kind(c.kind)) ||
            c.kind == "R") {
          detail::fail(who, ": row ", row + 1, ", column ", col + 1, ": unknown action \"", c.kind,
                       "\" in cell \"", cell,
                       "\" (expected F, I, B, W, BW, SEND_F, RECV_F, SEND_B or RECV_B)");
        }
        return true;
      };
      if (cell.front() == '(') {
        // (<action>;<action>)OVERLAP_F_B: two actions overlapped, the first marked.
        const std::string_view sfx = detail::torch_overlap_suffix;
        const std::size_t semi = cell.find(';');
        const bool shaped = cell.size() > sfx.size() + 1 &&
                            std::string_view(cell).substr(cell.size() - sfx.size()) == sfx &&
                            semi != std::string::npos &&
                            cell.find(';', semi + 1) == std::string::npos;
        if (!shaped) {
          detail::fail(who, ": row ", row + 1, ", column ", col + 1, ": malformed cell \"", cell,
                       "\" (expected an overlapped pair (<action>;<action>)OVERLAP_F_B, e.g. "
                       "(0F7;7B3)OVERLAP_F_B)");
        }
        torch_cell a;
        torch_cell b;
        if (!action(detail::trim(std::string_view(cell).substr(1, semi - 1)), a) ||
            !action(detail::trim(std::string_view(cell).substr(
                        semi + 1, cell.size() - sfx.size() - semi - 1)),
                    b)) {
          detail::fail(who, ": row ", row + 1, ", column ", col + 1, ": cell \"", cell,
                       "\": an overlapped pair holds two compute actions");
        }
        a.overlap_next = true;
        rows[row].push_back(std::move(a));
        rows[row].push_back(std::move(b));
        continue;
      }
      torch_cell c;
      if (action(cell, c)) {
        rows[row].push_back(std::move(c));
      }
    }
  }
  if (rows.empty()) {
    detail::fail(who, ": no rows (a PyTorch CSV has one row per rank)");
  }
  if (rows.size() > max_stages) {
    detail::fail(who, ": ranks (", rows.size(), " rows) must be at most ", max_stages);
  }
  const auto p = static_cast<std::uint32_t>(rows.size());

  // Spelling.
  const torch_cell* first_i = nullptr;
  const torch_cell* first_bw = nullptr;
  bool any_w = false;
  std::uint64_t max_stage = 0;
  std::uint64_t max_mb = 0;
  bool any = false;
  for (const auto& r : rows) {
    for (const auto& c : r) {
      first_i = (!first_i && c.kind == "I") ? &c : first_i;
      first_bw = (!first_bw && c.kind == "BW") ? &c : first_bw;
      any_w = any_w || c.kind == "W";
      max_stage = std::max(max_stage, c.stage);
      max_mb = std::max(max_mb, c.mb);
      any = true;
    }
  }
  if (!any) {
    detail::fail(who, ": no actions (every cell is empty)");
  }
  if (first_i && first_bw) {
    detail::fail(who, ": row ", first_bw->row + 1, ", column ", first_bw->col + 1,
                 ": BW (older spelling) mixed with I (current spelling) at row ", first_i->row + 1,
                 ", column ", first_i->col + 1);
  }
  const bool b_is_input_grad = first_bw != nullptr || (first_i == nullptr && any_w);

  // Placement.
  const std::uint64_t total = max_stage + 1;
  if (total % p != 0) {
    detail::fail(who, ": stage count (highest stage index + 1 = ", total,
                 ") must be a multiple of the rank count (", p, " rows)");
  }
  if (total / p > std::numeric_limits<chunk_index>::max() || total > max_total_chunks) {
    detail::fail(who, ": stage count (", total, ") is too large");
  }
  const auto v = static_cast<std::uint32_t>(total / p);
  if (max_mb + 1 > max_microbatches) {
    detail::fail(who, ": microbatches (m=", max_mb + 1, ") must be at most ", max_microbatches);
  }
  const auto m = static_cast<std::uint32_t>(max_mb + 1);
  constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint32_t> rank_of(total, none);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (const auto& c : rows[r]) {
      auto& owner = rank_of[c.stage];
      if (owner == none) {
        owner = static_cast<std::uint32_t>(r);
      } else if (owner != r) {
        detail::fail(who, ": row ", c.row + 1, ", column ", c.col + 1, ": stage ", c.stage,
                     " is on rank ", owner, " (row ", owner + 1, ") and on rank ", r);
      }
    }
  }
  auto fits = [&](auto&& rank_for) {
    for (std::uint64_t g = 0; g < total; ++g) {
      if (rank_of[g] != none && rank_of[g] != rank_for(g)) {
        return false;
      }
    }
    return true;
  };
  std::optional<placement> pl;
  if (fits([&](std::uint64_t g) { return static_cast<std::uint32_t>(g % p); })) {
    pl = placement::loop(p, v);  // sequential when v == 1
  } else if (v == 2 && fits([&](std::uint64_t g) {
               return static_cast<std::uint32_t>(g < p ? g : 2 * p - 1 - g);
             })) {
    pl = placement::v_shape(p);
  } else {
    // Bucket the stages by rank in one pass: a rank-by-rank scan would take p*total steps.
    std::vector<std::uint32_t> held(p, 0);
    for (std::uint64_t g = 0; g < total; ++g) {
      if (rank_of[g] != none) {
        ++held[rank_of[g]];
      }
    }
    for (std::uint32_t r = 0; r < p; ++r) {
      if (held[r] != v) {
        detail::fail(who, ": rank ", r, " (row ", r + 1, ") holds ", held[r], " stages, expected ",
                     v, " (stages are neither loop- nor V-placed, so every rank must hold exactly ",
                     v, " stage indices)");
      }
    }
    std::vector<global_chunk> table(total);
    std::vector<std::uint32_t> next(p, 0);
    for (std::uint64_t g = 0; g < total; ++g) {
      if (rank_of[g] != none) {
        const std::uint32_t r = rank_of[g];
        table[std::size_t{r} * v + next[r]++] = static_cast<global_chunk>(g);
      }
    }
    pl = placement::custom(p, v, std::move(table));
  }

  schedule out = schedule::on(std::move(name), *pl, m);
  for (std::uint32_t r = 0; r < p; ++r) {
    auto& ops = out.stage_ops(r);
    ops.reserve(rows[r].size());
    for (const auto& c : rows[r]) {
      op_kind k = op_kind::forward;
      if (c.kind == "I") {
        k = op_kind::backward_input;
      } else if (c.kind == "B") {
        k = b_is_input_grad ? op_kind::backward_input : op_kind::backward_full;
      } else {
        k = *parse_op_kind(c.kind);  // F, W, BW, SEND_*, RECV_*: checked above
      }
      const op o = make_op(k, static_cast<microbatch_index>(c.mb),
                           pl->local_of(static_cast<global_chunk>(c.stage)));
      ops.push_back(c.overlap_next ? overlapping_next(o) : o);
    }
  }
  return out;
}

}  // namespace pipesched
