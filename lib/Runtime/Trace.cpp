//===- Trace.cpp - A run's timeline as a Chrome trace ----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Trace.h"

#include <cstdio>
#include <fstream>

using namespace gptc::runtime;

void TraceRecorder::slice(std::string name, const char *category, double start,
                          double end, int tid, std::string location) {
  events.push_back(
      {std::move(name), std::move(location), category, start, end, tid});
}

std::string gptc::runtime::jsonEscape(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

bool TraceRecorder::write(const std::string &path, std::string &error) const {
  std::ofstream out(path);
  if (!out) {
    error = "cannot write the trace '" + path + "'";
    return false;
  }
  out << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  out << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " << pid
      << ", \"args\": {\"name\": \"rank " << pid << "\"}},\n";
  out << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " << pid
      << ", \"tid\": 0, \"args\": {\"name\": \"steps\"}},\n";
  out << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " << pid
      << ", \"tid\": 1, \"args\": {\"name\": \"kernels\"}}";
  for (const Event &e : events)
    if (e.tid == 2) {
      out << ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " << pid
          << ", \"tid\": 2, \"args\": {\"name\": \"pipeline\"}}";
      break;
    }
  char num[64];
  for (const Event &e : events) {
    out << ",\n{\"name\": \"" << jsonEscape(e.name) << "\", \"cat\": \""
        << e.category << "\", \"ph\": \"X\", \"pid\": " << pid
        << ", \"tid\": " << e.tid;
    std::snprintf(num, sizeof num, "%.3f", e.start);
    out << ", \"ts\": " << num;
    std::snprintf(num, sizeof num, "%.3f", e.end - e.start);
    out << ", \"dur\": " << num;
    if (!e.location.empty())
      out << ", \"args\": {\"location\": \"" << jsonEscape(e.location) << "\"}";
    out << "}";
  }
  out << "\n]}\n";
  if (!out) {
    error = "cannot write the trace '" + path + "'";
    return false;
  }
  return true;
}
