//===- InputFile.h - Reading a tool's input with bounds ---------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The files gptc reads whole (descriptions, hardware files, ONNX models,
// MLIR) are read with a bound: a regular file no larger than the kind's
// limit, or standard input read up to it. A directory, a FIFO, a device
// (/dev/zero) or a socket is an error naming what it is, before anything
// is read (opening a FIFO would wait for a writer; a device may never end).
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_FRONTEND_INPUTFILE_H
#define GPTC_FRONTEND_INPUTFILE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

#include <cstdint>
#include <memory>
#include <string>

namespace mlir::gptc {

/// The limits: a description or hardware file (text), an ONNX model (a
/// protobuf holds at most 2 GiB; larger weights are external data), MLIR.
constexpr int64_t kMaxDescriptionBytes = int64_t(64) << 20;
constexpr int64_t kMaxOnnxBytes = (int64_t(2) << 30) - 1;
constexpr int64_t kMaxMlirBytes = int64_t(1) << 30;

/// Reads `path` ("-": standard input) whole: `what` ("model description",
/// "hardware description", "ONNX model") names it in the error. Null with
/// `error` set for a path that is not a regular file, one larger than
/// `maxBytes`, or one that cannot be read.
std::unique_ptr<llvm::MemoryBuffer> openBoundedInput(llvm::StringRef path,
                                                     int64_t maxBytes,
                                                     llvm::StringRef what,
                                                     std::string &error);

/// A tool's output file (-o) whose write errors are gptc's diagnostics, not
/// LLVM's "IO failure on output stream" abort: open with openOutput, write
/// to os(), then finish() (flushes, checks and keeps it). A file that was
/// not finished, or whose write failed, is not kept, and the stream's error
/// is cleared so that its destructor does not abort.
class OutputFile {
public:
  static std::unique_ptr<OutputFile> open(llvm::StringRef path,
                                          std::string &error);
  ~OutputFile();
  llvm::raw_ostream &os() { return file->os(); }
  /// False with `error` ("cannot write '/proc/version': ...") where any
  /// write failed.
  bool finish(std::string &error);

private:
  OutputFile() = default;
  std::string path;
  std::unique_ptr<llvm::ToolOutputFile> file;
};

} // namespace mlir::gptc

#endif // GPTC_FRONTEND_INPUTFILE_H
