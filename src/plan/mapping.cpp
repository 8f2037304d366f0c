#include "plan/mapping.h"

#include <algorithm>

#include "core/json_reader.h"

namespace hanpu::plan {

using nlohmann::json;

namespace {

struct WorkInfo {
  Work work;
  const char* name;
};
constexpr WorkInfo kWorks[] = {
    {Work::kLoad, "load"},       {Work::kScores, "scores"},       {Work::kSolve, "solve"},
    {Work::kWU, "wu"},           {Work::kPrepareWU, "prepare-wu"}, {Work::kRecurrence, "recurrence"},
    {Work::kOutput, "output"},   {Work::kWarmup, "warm-up"},       {Work::kHandOn, "hand-on"},
    {Work::kSegment, "segment"}, {Work::kHead, "head"},            {Work::kPrepare, "prepare"},
    {Work::kStatePart, "state-part"},
};

std::string item_path(std::size_t i) { return "mapping.items[" + std::to_string(i) + "]"; }

}  // namespace

const char* work_name(Work w) {
  for (const WorkInfo& x : kWorks) {
    if (x.work == w) return x.name;
  }
  return "?";
}

bool parse_work(const std::string& name, Work* out) {
  for (const WorkInfo& x : kWorks) {
    if (name == x.name) {
      *out = x.work;
      return true;
    }
  }
  return false;
}

bool work_is_chain(Work w) {
  return w == Work::kRecurrence || w == Work::kHead || w == Work::kStatePart || w == Work::kHandOn;
}

bool work_slices_columns(Work w) { return w == Work::kHead || w == Work::kPrepare || w == Work::kStatePart; }

int64_t Shape::total_chunks() const {
  int64_t s = 0;
  for (int64_t n = 0; n < sequences(); ++n) s += chunks(n);
  return s;
}

std::vector<std::pair<std::size_t, std::size_t>> Mapping::phase_ranges() const {
  std::vector<std::pair<std::size_t, std::size_t>> r(phases.size());
  std::size_t i = 0;
  for (std::size_t p = 0; p < phases.size(); ++p) {  // items are grouped by phase, in phase order
    const std::size_t begin = i;
    while (i < items.size() && items[i].phase == static_cast<int>(p)) ++i;
    r[p] = {begin, i};
  }
  return r;
}

namespace {

// Per phase and unit, the items' chunk ranges partition the unit's chunks (warm-ups: every segment but the
// last) and, within each chunk range, the column slices partition [0, V).
Status check_coverage(const Mapping& m, int phase, int64_t unit, std::vector<std::size_t>& idx) {
  const Shape& sh = m.shape;
  const Work w = m.phases[phase].work;
  const int64_t n = sh.chunks(unit / sh.HV);
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    const WorkItem &x = m.items[a], &y = m.items[b];
    return std::tie(x.chunk0, x.col0) < std::tie(y.chunk0, y.col0);
  });
  const std::string where = "mapping: phase " + std::to_string(phase) + " (" + work_name(w) + "), sequence " +
                            std::to_string(unit / sh.HV) + " value head " + std::to_string(unit % sh.HV);
  const int64_t seg = m.segment_chunks;
  const int64_t end = w == Work::kWarmup ? (n == 0 ? 0 : (n - 1) / seg * seg) : n;
  int64_t next_chunk = 0;
  std::size_t i = 0;
  if (work_is_chain(w) && n == 0) {
    if (idx.size() != 1) return InvalidArgument(where + ": an empty sequence needs exactly one item");
    return Status::Ok();
  }
  while (i < idx.size()) {
    const WorkItem& first = m.items[idx[i]];
    if (first.chunk0 != next_chunk) {
      return InvalidArgument(where + ": chunks from " + std::to_string(next_chunk) + " are " +
                             (first.chunk0 > next_chunk ? "not covered" : "covered twice") + " (" +
                             item_path(idx[i]) + ")");
    }
    if ((w == Work::kWarmup || w == Work::kSegment) && first.chunks != std::min(seg, n - first.chunk0)) {
      return InvalidArgument(item_path(idx[i]) + ": a segment item covers " + std::to_string(first.chunks) +
                             " chunks, the plan's segments have " + std::to_string(seg));
    }
    int64_t next_col = 0;
    for (; i < idx.size() && m.items[idx[i]].chunk0 == first.chunk0; ++i) {
      const WorkItem& it = m.items[idx[i]];
      if (it.chunks != first.chunks) return InvalidArgument(item_path(idx[i]) + ": overlaps another item's chunks");
      if (it.col0 != next_col) {
        return InvalidArgument(where + ": columns from " + std::to_string(next_col) + " are " +
                               (it.col0 > next_col ? "not covered" : "covered twice") + " (" + item_path(idx[i]) + ")");
      }
      next_col += it.cols;
    }
    if (next_col != sh.V) return InvalidArgument(where + ": columns from " + std::to_string(next_col) + " are not covered");
    next_chunk = first.chunk0 + first.chunks;
  }
  if (next_chunk != end) {
    return InvalidArgument(where + ": chunks " + std::to_string(next_chunk) + ".." + std::to_string(end - 1) +
                           " are not covered");
  }
  return Status::Ok();
}

}  // namespace

Status check_mapping(const Mapping& m) {
  const Shape& sh = m.shape;
  const int64_t N = static_cast<int64_t>(sh.seq_tokens.size());
  if (sh.workers < 1) return InvalidArgument("mapping.shape.workers: expected >= 1");
  if (sh.HV < 1 || sh.V < 1) return InvalidArgument("mapping.shape: value heads and V must be >= 1");
  if (sh.C != 16 && sh.C != 32 && sh.C != 64) return InvalidArgument("mapping.shape.chunk_size: expected 16, 32 or 64");
  for (int64_t t : sh.seq_tokens) {
    if (t < 0) return InvalidArgument("mapping.shape.seq_tokens: negative length");
  }
  if (m.phases.empty()) return InvalidArgument("mapping.phases: expected at least one phase");
  // Every unit has an item in every phase but the warm-ups: more units than items cannot be covered (and
  // would only cost memory to find out).
  bool only_warmups = true;
  for (const Phase& p : m.phases) only_warmups &= p.work == Work::kWarmup;
  if (m.phases.size() > 64) return InvalidArgument("mapping.phases: more than 64 phases");
  if (!only_warmups && sh.units() > static_cast<int64_t>(m.items.size())) {
    return InvalidArgument("mapping.items: " + std::to_string(m.items.size()) + " items cannot cover " +
                           std::to_string(sh.units()) + " units");
  }
  if (m.phases[0].sync != Sync::kLaunch) return InvalidArgument("mapping.phases[0].sync: the first phase is a launch");
  if (m.column_align < 1) return InvalidArgument("mapping.column_align: expected >= 1");
  bool segments = false;
  for (const Phase& p : m.phases) segments |= p.work == Work::kWarmup || p.work == Work::kSegment;
  if (segments && m.segment_chunks < 1) return InvalidArgument("mapping.segment_chunks: expected >= 1");
  std::vector<std::vector<std::vector<std::size_t>>> by(m.phases.size(), std::vector<std::vector<std::size_t>>(sh.units()));
  int last_phase = 0;
  for (std::size_t i = 0; i < m.items.size(); ++i) {
    const WorkItem& it = m.items[i];
    const std::string at = item_path(i);
    if (it.phase < last_phase || it.phase >= static_cast<int>(m.phases.size())) {
      return InvalidArgument(at + ": phase " + std::to_string(it.phase) + " out of order or range");
    }
    last_phase = it.phase;
    if (it.worker < 0 || it.worker >= sh.workers) {
      return InvalidArgument(at + ": worker " + std::to_string(it.worker) + " (the plan has " +
                             std::to_string(sh.workers) + ")");
    }
    if (it.seq < 0 || it.seq >= N || it.hv < 0 || it.hv >= sh.HV) {
      return InvalidArgument(at + ": unit (" + std::to_string(it.seq) + ", " + std::to_string(it.hv) + ") out of range");
    }
    const int64_t n = sh.chunks(it.seq);
    if (it.chunk0 < 0 || it.chunks < 0 || it.chunk0 + it.chunks > n || (it.chunks == 0 && n > 0)) {
      return InvalidArgument(at + ": chunks [" + std::to_string(it.chunk0) + ", " + std::to_string(it.chunk0 + it.chunks) +
                             ") outside the sequence's " + std::to_string(n));
    }
    const Work w = m.phases[it.phase].work;
    if (it.cols < 1 || it.col0 < 0 || it.col0 + it.cols > sh.V || it.col0 % m.column_align != 0) {
      return InvalidArgument(at + ": columns [" + std::to_string(it.col0) + ", " + std::to_string(it.col0 + it.cols) +
                             ") not inside [0, " + std::to_string(sh.V) + ") at a multiple of " +
                             std::to_string(m.column_align));
    }
    if (!work_slices_columns(w) && it.cols != sh.V) {
      return InvalidArgument(at + ": " + work_name(w) + " items take all " + std::to_string(sh.V) + " columns");
    }
    if (work_is_chain(w) && (it.chunk0 != 0 || it.chunks != n)) {
      return InvalidArgument(at + ": " + work_name(w) + " items carry the state through all of a sequence's chunks");
    }
    by[it.phase][it.seq * sh.HV + it.hv].push_back(i);
  }
  for (std::size_t p = 0; p < m.phases.size(); ++p) {
    for (int64_t u = 0; u < sh.units(); ++u) HANPU_RETURN_IF_ERROR(check_coverage(m, static_cast<int>(p), u, by[p][u]));
  }
  return Status::Ok();
}

json mapping_to_json(const Mapping& m) {
  json phases = json::array();
  for (const Phase& p : m.phases) {
    json kernels = json::array();
    for (int k = 0; k < 32; ++k) {
      if ((p.kernels >> k) & 1u) kernels.push_back(k);
    }
    json ph = {{"work", work_name(p.work)},
               {"sync", p.sync == Sync::kLaunch ? "launch" : "barrier"},
               {"kernels", p.kernels == ~0u ? json("all") : kernels}};
    if (!p.launches.empty()) ph["launches"] = p.launches;
    phases.push_back(ph);
  }
  json rows = json::array();
  for (const WorkItem& it : m.items) rows.push_back({it.phase, it.worker, it.seq, it.hv, it.chunk0, it.chunks, it.col0, it.cols});
  return {{"shape", {{"seq_tokens", m.shape.seq_tokens}, {"chunk_size", m.shape.C}, {"value_heads", m.shape.HV},
                     {"v", m.shape.V}, {"workers", m.shape.workers}}},
          {"column_align", m.column_align},
          {"tail_split", m.tail_split},
          {"segment_chunks", m.segment_chunks},
          {"phases", phases},
          {"item_fields", {"phase", "worker", "seq", "hv", "chunk0", "chunks", "col0", "cols"}},
          {"items", rows}};
}

Status mapping_from_json(const json& j, Mapping* out) {
  JsonReader r(j, "mapping");
  Mapping m;
  const JsonReader sh = r.child("shape");
  const json& st = sh.array("seq_tokens", true);
  for (std::size_t i = 0; r.ok() && i < st.size(); ++i) {
    if (!st[i].is_number_integer() || st[i].get<int64_t>() < 0) {
      r.fail("mapping.shape.seq_tokens[" + std::to_string(i) + "]", "expected a token count");
    } else {
      m.shape.seq_tokens.push_back(st[i].get<int64_t>());
    }
  }
  m.shape.C = sh.integer("chunk_size", 16, 64);
  m.shape.HV = sh.integer("value_heads", 1, 1 << 20);
  m.shape.V = sh.integer("v", 1, 256);
  m.shape.workers = static_cast<int>(sh.integer("workers", 1, 4096));
  m.column_align = r.integer("column_align", 1, 256);
  m.tail_split = static_cast<int>(r.integer("tail_split", 1, 256));
  m.segment_chunks = r.integer("segment_chunks", 0, int64_t{1} << 40);
  const json& phases = r.array("phases", true);
  for (std::size_t i = 0; r.ok() && i < phases.size(); ++i) {
    const JsonReader p(phases[i], "mapping.phases[" + std::to_string(i) + "]", r);
    Phase ph;
    const std::string w = p.str("work");
    if (r.ok() && !parse_work(w, &ph.work)) p.fail_at("work", "unknown work '" + w + "'");
    const std::string s = p.str("sync");
    if (r.ok() && s != "launch" && s != "barrier") p.fail_at("sync", "expected \"launch\" or \"barrier\"");
    ph.sync = s == "barrier" ? Sync::kBarrier : Sync::kLaunch;
    const json* k = p.get("kernels");
    if (r.ok() && k->is_string() && k->get<std::string>() == "all") {
      ph.kernels = ~0u;
    } else if (r.ok() && k->is_array()) {
      ph.kernels = 0;
      for (const json& x : *k) {
        if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > 31) {
          p.fail_at("kernels", "expected kernel indices 0..31 or \"all\"");
          break;
        }
        ph.kernels |= 1u << x.get<int>();
      }
    } else if (r.ok()) {
      p.fail_at("kernels", "expected kernel indices 0..31 or \"all\"");
    }
    if (r.ok() && phases[i].contains("launches")) {
      const json& l = phases[i]["launches"];
      unsigned covered = 0;
      for (std::size_t q = 0; r.ok() && l.is_array() && q < l.size(); ++q) {
        const unsigned mask = l[q].is_number_unsigned() ? l[q].get<unsigned>() : 0;
        if (mask == 0 || (mask & ~ph.kernels) != 0 || (mask & covered) != 0) break;
        covered |= mask;
        ph.launches.push_back(mask);
      }
      if (!l.is_array() || covered != ph.kernels || ph.launches.size() != l.size()) {
        p.fail_at("launches", "expected disjoint non-empty kernel masks that together make \"kernels\"");
      }
    }
    m.phases.push_back(ph);
  }
  const json& items = r.array("items");
  for (std::size_t i = 0; r.ok() && i < items.size(); ++i) {
    const json& row = items[i];
    bool good = row.is_array() && row.size() == 8;
    for (std::size_t q = 0; good && q < 8; ++q) good = row[q].is_number_integer();
    if (!good) {
      r.fail(item_path(i), "expected [phase, worker, seq, hv, chunk0, chunks, col0, cols] as integers");
      break;
    }
    const int64_t phase = row[0].get<int64_t>(), worker = row[1].get<int64_t>();
    if (phase < 0 || phase > 64 || worker < 0 || worker > 4096) {
      r.fail(item_path(i), "phase or worker out of range");  // before narrowing them to int
      break;
    }
    WorkItem it;
    it.phase = static_cast<int>(phase);
    it.worker = static_cast<int>(worker);
    it.seq = row[2].get<int64_t>();
    it.hv = row[3].get<int64_t>();
    it.chunk0 = row[4].get<int64_t>();
    it.chunks = row[5].get<int64_t>();
    it.col0 = row[6].get<int64_t>();
    it.cols = row[7].get<int64_t>();
    m.items.push_back(it);
  }
  if (!r.ok()) return r.status();
  HANPU_RETURN_IF_ERROR(check_mapping(m));
  *out = std::move(m);
  return Status::Ok();
}

}  // namespace hanpu::plan
