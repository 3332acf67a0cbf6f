//===- PipelineSchedule.cpp - Pipeline stages and their schedules -===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Analysis/PipelineSchedule.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <map>
#include <ostream>
#include <sstream>
#include <tuple>

using namespace mlir::gptc;

std::optional<PipelineScheduleKind>
mlir::gptc::parsePipelineSchedule(const std::string &s) {
  if (s == "gpipe")
    return PipelineScheduleKind::GPipe;
  if (s == "1f1b")
    return PipelineScheduleKind::OneFOneB;
  if (s == "interleaved")
    return PipelineScheduleKind::Interleaved;
  if (s == "zb-h1")
    return PipelineScheduleKind::ZeroBubbleH1;
  return std::nullopt;
}

const char *mlir::gptc::pipelineScheduleName(PipelineScheduleKind kind) {
  switch (kind) {
  case PipelineScheduleKind::GPipe:
    return "gpipe";
  case PipelineScheduleKind::OneFOneB:
    return "1f1b";
  case PipelineScheduleKind::Interleaved:
    return "interleaved";
  case PipelineScheduleKind::ZeroBubbleH1:
    return "zb-h1";
  }
  return "?";
}

bool mlir::gptc::splitsBackward(PipelineScheduleKind kind) {
  return kind == PipelineScheduleKind::ZeroBubbleH1;
}

//===----------------------------------------------------------------------===//
// Partition
//===----------------------------------------------------------------------===//

std::optional<PipelinePartition> mlir::gptc::partitionPipeline(
    int64_t layers, int64_t stages, int64_t virtualStages, double layerCost,
    double firstCost, double lastCost, std::string &error) {
  if (stages < 1 || virtualStages < 1) {
    error = "pipeline stages and virtual stages must be at least 1";
    return std::nullopt;
  }
  int64_t n = stages * virtualStages;
  if (n > layers) {
    error = std::to_string(stages) + " pipeline stages" +
            (virtualStages > 1
                 ? " x " + std::to_string(virtualStages) + " virtual stages"
                 : std::string()) +
            " need at least " + std::to_string(n) + " layers; the model has " +
            std::to_string(layers);
    return std::nullopt;
  }
  // cost(c, a, b): chunk c holding layers [a, b).
  auto cost = [&](int64_t c, int64_t a, int64_t b) {
    return static_cast<double>(b - a) * layerCost + (c == 0 ? firstCost : 0) +
           (c == n - 1 ? lastCost : 0);
  };
  // best[c][j]: the smallest largest cost of chunks 0..c-1 over layers
  // [0, j); cut[c][j]: where chunk c-1 starts.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(n + 1,
                                        std::vector<double>(layers + 1, inf));
  std::vector<std::vector<int64_t>> cut(n + 1,
                                        std::vector<int64_t>(layers + 1, -1));
  best[0][0] = 0;
  for (int64_t c = 1; c <= n; ++c)
    for (int64_t j = c; j <= layers - (n - c); ++j)
      for (int64_t k = c - 1; k < j; ++k) {
        if (best[c - 1][k] == inf)
          continue;
        double v = std::max(best[c - 1][k], cost(c - 1, k, j));
        // Ties: the later start (earlier chunks take fewer layers).
        if (v < best[c][j] * (1 - 1e-12) ||
            (v <= best[c][j] * (1 + 1e-12) && k > cut[c][j])) {
          best[c][j] = v;
          cut[c][j] = k;
        }
      }
  // The DP minimizes the largest chunk; a stage's load is the sum of its
  // chunks (several with virtual stages), and among partitions with the
  // same bottleneck the others should be even. Move single layers across
  // chunk boundaries while (largest stage, sum of squares) decreases.
  std::vector<int64_t> starts(n + 1, layers);
  for (int64_t c = n, j = layers; c > 0; --c) {
    starts[c] = j;
    j = cut[c][j];
    starts[c - 1] = j;
  }
  auto score = [&](const std::vector<int64_t> &b) {
    std::vector<double> load(stages, 0);
    for (int64_t c = 0; c < n; ++c)
      load[c % stages] += cost(c, b[c], b[c + 1]);
    double worst = 0, squares = 0;
    for (double l : load) {
      worst = std::max(worst, l);
      squares += l * l;
    }
    return std::make_pair(worst, squares);
  };
  auto better = [](std::pair<double, double> a, std::pair<double, double> b) {
    const double eps = 1e-9;
    if (a.first < b.first * (1 - eps))
      return true;
    return a.first <= b.first * (1 + eps) && a.second < b.second * (1 - eps);
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (int64_t c = 1; c < n; ++c)
      for (int64_t d : {-1, 1}) {
        std::vector<int64_t> next = starts;
        next[c] += d;
        if (next[c] <= next[c - 1] || next[c] >= next[c + 1] ||
            !better(score(next), score(starts)))
          continue;
        starts = std::move(next);
        moved = true;
      }
  }
  PipelinePartition p;
  p.stages = stages;
  p.virtualStages = virtualStages;
  p.layers = layers;
  p.chunks.resize(n);
  p.forwardCost.resize(n);
  for (int64_t c = 0; c < n; ++c) {
    p.chunks[c] = {starts[c], starts[c + 1]};
    p.forwardCost[c] = cost(c, starts[c], starts[c + 1]);
  }
  return p;
}

//===----------------------------------------------------------------------===//
// Programs
//===----------------------------------------------------------------------===//

std::optional<std::vector<std::vector<PipelineOp>>>
mlir::gptc::buildPipelinePrograms(const PipelinePartition &partition,
                                  int64_t microbatches,
                                  PipelineScheduleKind kind,
                                  std::string &error) {
  int64_t p = partition.stages, v = partition.virtualStages, m = microbatches;
  int64_t n = p * v;
  if (m < 1) {
    error = "a pipeline needs at least one microbatch";
    return std::nullopt;
  }
  if (kind == PipelineScheduleKind::Interleaved) {
    if (v < 2) {
      error = "the interleaved schedule needs 2 or more virtual stages per "
              "stage (--virtual-stages)";
      return std::nullopt;
    }
    if (m % p != 0) {
      error = "the interleaved schedule needs the microbatches (" +
              std::to_string(m) +
              ") to be a multiple of the pipeline stages (" +
              std::to_string(p) + ")";
      return std::nullopt;
    }
  } else if (v != 1) {
    error =
        std::string("virtual stages are for the interleaved schedule, not ") +
        pipelineScheduleName(kind);
    return std::nullopt;
  }
  // Each stage's computations in order: (kind, microbatch, chunk).
  using Kind = PipelineOp::Kind;
  const Kind F = PipelineOp::Forward, B = PipelineOp::Backward;
  std::vector<std::vector<std::tuple<Kind, int64_t, int64_t>>> order(p);
  for (int64_t s = 0; s < p; ++s) {
    auto &o = order[s];
    switch (kind) {
    case PipelineScheduleKind::GPipe:
      for (int64_t i = 0; i < m; ++i)
        o.emplace_back(F, i, s);
      for (int64_t i = 0; i < m; ++i)
        o.emplace_back(B, i, s);
      break;
    case PipelineScheduleKind::OneFOneB: {
      int64_t warmup = std::min(p - s - 1, m);
      for (int64_t i = 0; i < warmup; ++i)
        o.emplace_back(F, i, s);
      for (int64_t i = 0; i < m - warmup; ++i) {
        o.emplace_back(F, warmup + i, s);
        o.emplace_back(B, i, s);
      }
      for (int64_t i = m - warmup; i < m; ++i)
        o.emplace_back(B, i, s);
      break;
    }
    case PipelineScheduleKind::ZeroBubbleH1: {
      // 1F1B's forwards and input gradients; the weight gradients follow
      // their B after s more microbatches' B, and the rest at the end.
      int64_t warmup = std::min(p - s - 1, m), w = 0;
      auto weight = [&](int64_t i) {
        if (i >= s)
          o.emplace_back(PipelineOp::BackwardWeight, w++, s);
      };
      for (int64_t i = 0; i < warmup; ++i)
        o.emplace_back(F, i, s);
      for (int64_t i = 0; i < m - warmup; ++i) {
        o.emplace_back(F, warmup + i, s);
        o.emplace_back(PipelineOp::BackwardInput, i, s);
        weight(i);
      }
      for (int64_t i = m - warmup; i < m; ++i) {
        o.emplace_back(PipelineOp::BackwardInput, i, s);
        weight(i);
      }
      while (w < m)
        o.emplace_back(PipelineOp::BackwardWeight, w++, s);
      break;
    }
    case PipelineScheduleKind::Interleaved: {
      // Megatron-LM's order: virtual microbatch k runs chunk
      // (k mod pv) / p of this stage (backwards in reverse chunk order) on
      // microbatch (k / pv) p + k mod p.
      int64_t total = m * v;
      auto micro = [&](int64_t k) { return (k / (p * v)) * p + k % p; };
      auto fchunk = [&](int64_t k) { return ((k % (p * v)) / p) * p + s; };
      auto bchunk = [&](int64_t k) {
        return (v - 1 - (k % (p * v)) / p) * p + s;
      };
      int64_t warmup = std::min((p - s - 1) * 2 + (v - 1) * p, total);
      for (int64_t k = 0; k < warmup; ++k)
        o.emplace_back(F, micro(k), fchunk(k));
      for (int64_t i = 0; i < total - warmup; ++i) {
        o.emplace_back(F, micro(warmup + i), fchunk(warmup + i));
        o.emplace_back(B, micro(i), bchunk(i));
      }
      for (int64_t k = total - warmup; k < total; ++k)
        o.emplace_back(B, micro(k), bchunk(k));
      break;
    }
    }
  }
  // Sends after the computation that produces the message, receives before
  // the one that consumes it (between stages only).
  std::vector<std::vector<PipelineOp>> programs(p);
  auto stageOf = [&](int64_t c) { return c % p; };
  // A weight gradient (W) neither waits for nor sends a message.
  for (int64_t s = 0; s < p; ++s)
    for (auto [k, mb, c] : order[s]) {
      std::vector<PipelineOp> &prog = programs[s];
      if (k == PipelineOp::Forward) {
        if (c > 0 && stageOf(c - 1) != s)
          prog.push_back({PipelineOp::Recv, mb, c, stageOf(c - 1), false});
        prog.push_back({PipelineOp::Forward, mb, c, -1, false});
        if (c < n - 1 && stageOf(c + 1) != s)
          prog.push_back({PipelineOp::Send, mb, c + 1, stageOf(c + 1), false});
      } else if (k == PipelineOp::BackwardWeight) {
        prog.push_back({PipelineOp::BackwardWeight, mb, c, -1, true});
      } else {
        if (c < n - 1 && stageOf(c + 1) != s)
          prog.push_back({PipelineOp::Recv, mb, c, stageOf(c + 1), true});
        prog.push_back({k, mb, c, -1, true});
        if (c > 0 && stageOf(c - 1) != s)
          prog.push_back({PipelineOp::Send, mb, c - 1, stageOf(c - 1), true});
      }
    }
  return programs;
}

//===----------------------------------------------------------------------===//
// Simulation
//===----------------------------------------------------------------------===//

std::string mlir::gptc::describePipelineOp(const PipelineOp &op, bool chunks) {
  std::ostringstream os;
  std::string mb = std::to_string(op.microbatch) +
                   (chunks ? "." + std::to_string(op.chunk) : std::string());
  switch (op.kind) {
  case PipelineOp::Forward:
    os << "F" << mb;
    break;
  case PipelineOp::Backward:
  case PipelineOp::BackwardInput:
    os << "B" << mb;
    break;
  case PipelineOp::BackwardWeight:
    os << "W" << mb;
    break;
  case PipelineOp::Send:
    os << "send " << (op.gradient ? "grad " : "act ") << mb << " -> "
       << op.peer;
    break;
  case PipelineOp::Recv:
    os << "recv " << (op.gradient ? "grad " : "act ") << mb << " <- "
       << op.peer;
    break;
  }
  return os.str();
}

std::optional<PipelineTimeline> mlir::gptc::simulatePipeline(
    const std::vector<std::vector<PipelineOp>> &programs,
    const std::vector<double> &forwardCost, int64_t virtualStages,
    std::string &error, PipelineStall *stall) {
  int64_t p = static_cast<int64_t>(programs.size());
  bool chunks = virtualStages > 1;
  using Key = std::tuple<bool, int64_t, int64_t>; // gradient, mb, chunk
  // Every message some stage sends, to tell a missing sender from a wait.
  std::map<std::pair<int64_t, Key>, int64_t> senders; // (to, key) -> from
  for (int64_t s = 0; s < p; ++s)
    for (const PipelineOp &op : programs[s])
      if (op.kind == PipelineOp::Send)
        senders[{op.peer, Key{op.gradient, op.microbatch, op.chunk}}] = s;
  std::map<std::pair<int64_t, Key>, double> arrived; // (to, key) -> time
  std::map<std::pair<int64_t, Key>, size_t> message; // -> t.messages
  std::vector<size_t> pc(p, 0);
  std::vector<double> clock(p, 0);
  std::vector<std::map<std::pair<int64_t, int64_t>, bool>> live(p);
  std::vector<double> inFlight(p, 0);
  PipelineTimeline t;
  t.peakInFlight.assign(p, 0);
  double busy = 0;
  bool progress = true;
  while (progress) {
    progress = false;
    for (int64_t s = 0; s < p; ++s) {
      while (pc[s] < programs[s].size()) {
        const PipelineOp &op = programs[s][pc[s]];
        if (op.kind == PipelineOp::Recv) {
          auto it =
              arrived.find({s, Key{op.gradient, op.microbatch, op.chunk}});
          if (it == arrived.end())
            break;
          clock[s] = std::max(clock[s], it->second);
          t.messages[message.at(it->first)].received = clock[s];
        } else if (op.kind == PipelineOp::Send) {
          arrived[{op.peer, Key{op.gradient, op.microbatch, op.chunk}}] =
              clock[s];
          message[{op.peer, Key{op.gradient, op.microbatch, op.chunk}}] =
              t.messages.size();
          t.messages.push_back({s, op.peer, op, clock[s], -1});
        } else {
          if (op.chunk < 0 ||
              op.chunk >= static_cast<int64_t>(forwardCost.size())) {
            error = "stage " + std::to_string(s) + " runs chunk " +
                    std::to_string(op.chunk) + ", which does not exist";
            return std::nullopt;
          }
          bool fwd = op.kind == PipelineOp::Forward;
          double cost =
              forwardCost[op.chunk] * (op.kind == PipelineOp::Backward ? 2 : 1);
          t.intervals.push_back({s, op, clock[s], clock[s] + cost});
          clock[s] += cost;
          busy += cost;
          // A split backward frees the microbatch's activations at W.
          if (op.kind != PipelineOp::BackwardInput)
            inFlight[s] += (fwd ? 1.0 : -1.0) / virtualStages;
          t.peakInFlight[s] = std::max(t.peakInFlight[s], inFlight[s]);
        }
        ++pc[s];
        progress = true;
      }
    }
  }
  // Stuck: every unfinished stage waits on a receive.
  std::vector<int64_t> stuck;
  for (int64_t s = 0; s < p; ++s)
    if (pc[s] < programs[s].size())
      stuck.push_back(s);
  if (!stuck.empty()) {
    auto waitOf = [&](int64_t s) -> std::string {
      const PipelineOp &op = programs[s][pc[s]];
      std::string what = (op.gradient ? "the gradient of microbatch "
                                      : "the activation of microbatch ") +
                         std::to_string(op.microbatch) +
                         (chunks ? " (chunk " + std::to_string(op.chunk) + ")"
                                 : std::string());
      return "stage " + std::to_string(s) + " waits for " + what +
             " from stage " + std::to_string(op.peer);
    };
    for (int64_t s : stuck) {
      const PipelineOp &op = programs[s][pc[s]];
      if (!senders.count({s, Key{op.gradient, op.microbatch, op.chunk}})) {
        if (stall)
          *stall = {s, pc[s]};
        error = "the pipeline schedule deadlocks: " + waitOf(s) +
                ", which never sends it";
        return std::nullopt;
      }
    }
    // Follow the waits from the first stuck stage until one repeats.
    std::string chain;
    std::vector<bool> seen(p, false);
    int64_t s = stuck.front();
    if (stall)
      *stall = {s, pc[s]};
    while (!seen[s] && pc[s] < programs[s].size()) {
      seen[s] = true;
      chain += (chain.empty() ? "" : ", which ") +
               (chain.empty() ? waitOf(s)
                              : waitOf(s).substr(waitOf(s).find("waits")));
      s = programs[s][pc[s]].peer;
    }
    error = "the pipeline schedule deadlocks: " + chain +
            (seen[s] ? " (a cycle)" : "");
    return std::nullopt;
  }
  for (double c : clock)
    t.makespan = std::max(t.makespan, c);
  t.bubbleFraction =
      t.makespan > 0 ? 1 - busy / (static_cast<double>(p) * t.makespan) : 0;
  return t;
}

//===----------------------------------------------------------------------===//
// Pictures
//===----------------------------------------------------------------------===//

void mlir::gptc::writePipelineTraceJson(const PipelineTimeline &t,
                                        int64_t stages, bool chunks,
                                        double unitSeconds, std::ostream &os) {
  os << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  for (int64_t s = 0; s < stages; ++s)
    os << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": "
       << s << ", \"args\": {\"name\": \"stage " << s << "\"}},\n";
  os << std::fixed << std::setprecision(3);
  for (size_t i = 0; i < t.intervals.size(); ++i) {
    const auto &iv = t.intervals[i];
    const char *cat = iv.op.kind == PipelineOp::Forward          ? "forward"
                      : iv.op.kind == PipelineOp::BackwardWeight ? "weight"
                                                                 : "backward";
    os << "{\"name\": \"" << describePipelineOp(iv.op, chunks)
       << "\", \"cat\": \"" << cat
       << "\", \"ph\": \"X\", \"pid\": 0, \"tid\": " << iv.stage
       << ", \"ts\": " << iv.start * unitSeconds * 1e6
       << ", \"dur\": " << (iv.end - iv.start) * unitSeconds * 1e6
       << ", \"args\": {\"microbatch\": " << iv.op.microbatch
       << ", \"chunk\": " << iv.op.chunk << "}}"
       << (i + 1 < t.intervals.size() ? ",\n" : "\n");
  }
  os << "]}\n";
}

void mlir::gptc::writePipelineSvg(const PipelineTimeline &t, int64_t stages,
                                  bool chunks, const std::string &title,
                                  std::ostream &os) {
  const double width = 960, left = 70, row = 28, top = 34;
  double scale = t.makespan > 0 ? (width - left - 10) / t.makespan : 1;
  double height = top + stages * row + 30;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width
     << "\" height=\"" << height << "\" font-family=\"sans-serif\" "
     << "font-size=\"11\">\n";
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os << "<text x=\"" << left << "\" y=\"20\" font-size=\"14\">" << title
     << "</text>\n";
  os << std::fixed << std::setprecision(2);
  for (int64_t s = 0; s < stages; ++s)
    os << "<text x=\"8\" y=\"" << top + s * row + row * 0.65 << "\">stage " << s
       << "</text>\n";
  bool weights = false;
  for (const auto &iv : t.intervals) {
    weights |= iv.op.kind == PipelineOp::BackwardWeight;
    const char *fill = iv.op.kind == PipelineOp::Forward          ? "#4e79a7"
                       : iv.op.kind == PipelineOp::BackwardWeight ? "#59a14f"
                                                                  : "#f28e2b";
    double x = left + iv.start * scale, w = (iv.end - iv.start) * scale;
    double y = top + iv.stage * row + 2;
    os << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << w
       << "\" height=\"" << row - 4 << "\" fill=\"" << fill
       << "\" stroke=\"white\" stroke-width=\"0.5\"><title>"
       << describePipelineOp(iv.op, chunks) << "</title></rect>\n";
    std::string label = std::to_string(iv.op.microbatch);
    if (w > 7.0 * label.size())
      os << "<text x=\"" << x + w / 2 << "\" y=\"" << y + row * 0.6
         << "\" text-anchor=\"middle\" fill=\"white\">" << label << "</text>\n";
  }
  double y = top + stages * row + 18;
  os << "<rect x=\"" << left << "\" y=\"" << y - 10
     << "\" width=\"12\" height=\"12\" fill=\"#4e79a7\"/><text x=\""
     << left + 16 << "\" y=\"" << y << "\">forward</text>\n";
  os << "<rect x=\"" << left + 90 << "\" y=\"" << y - 10
     << "\" width=\"12\" height=\"12\" fill=\"#f28e2b\"/><text x=\""
     << left + 106 << "\" y=\"" << y << "\">"
     << (weights ? "input gradient" : "backward") << "</text>\n";
  double at = left + (weights ? 210 : 180);
  if (weights) {
    os << "<rect x=\"" << at << "\" y=\"" << y - 10
       << "\" width=\"12\" height=\"12\" fill=\"#59a14f\"/><text x=\""
       << at + 16 << "\" y=\"" << y << "\">weight gradient</text>\n";
    at += 120;
  }
  os << "<text x=\"" << at << "\" y=\"" << y
     << "\">(microbatch numbers; bubble " << std::setprecision(1)
     << 100 * t.bubbleFraction << "%)</text>\n";
  os << "</svg>\n";
}
