//===- InputFile.cpp - Reading a tool's input with bounds -------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Frontend/InputFile.h"

#include "llvm/Support/FileSystem.h"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

using namespace mlir::gptc;

static std::string bytesText(int64_t bytes) {
  if (bytes >= (int64_t(1) << 30))
    return std::to_string(bytes >> 30) + " GiB";
  return std::to_string(bytes >> 20) + " MiB";
}

std::unique_ptr<llvm::MemoryBuffer>
mlir::gptc::openBoundedInput(llvm::StringRef path, int64_t maxBytes,
                             llvm::StringRef what, std::string &error) {
  std::string name = path.str();
  auto tooLarge = [&] {
    error = "the " + what.str() + " '" + name + "' is larger than " +
            bytesText(maxBytes) + ", gptc's limit for one";
    return nullptr;
  };
  if (path == "-") {
    // Standard input: read up to the limit (a pipe from /dev/zero ends).
    std::string text;
    char chunk[1 << 16];
    for (;;) {
      ssize_t n = ::read(STDIN_FILENO, chunk, sizeof(chunk));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0) {
        error = "cannot read the " + what.str() +
                " from standard input: " + std::strerror(errno);
        return nullptr;
      }
      if (n == 0)
        break;
      if (static_cast<int64_t>(text.size()) + n > maxBytes) {
        name = "<stdin>";
        return tooLarge();
      }
      text.append(chunk, static_cast<size_t>(n));
    }
    return llvm::MemoryBuffer::getMemBufferCopy(text, "<stdin>");
  }
  struct stat st;
  if (::stat(name.c_str(), &st) != 0) {
    error = "cannot open the " + what.str() + " '" + name +
            "': " + std::strerror(errno);
    return nullptr;
  }
  if (!S_ISREG(st.st_mode)) {
    const char *kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    error = "the " + what.str() + " '" + name + "' is " + kind + ", not a file";
    return nullptr;
  }
  if (st.st_size > maxBytes)
    return tooLarge();
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(name, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/true);
  if (!buffer) {
    error = "cannot read the " + what.str() + " '" + name +
            "': " + buffer.getError().message();
    return nullptr;
  }
  return std::move(*buffer);
}

std::unique_ptr<OutputFile> OutputFile::open(llvm::StringRef path,
                                             std::string &error) {
  std::unique_ptr<OutputFile> out(new OutputFile());
  out->path = path.str();
  std::error_code ec;
  out->file =
      std::make_unique<llvm::ToolOutputFile>(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    error = "cannot open '" + path.str() + "' for writing: " + ec.message();
    out->file->os().clear_error();
    return nullptr;
  }
  return out;
}

OutputFile::~OutputFile() {
  if (file)
    file->os().clear_error();
}

bool OutputFile::finish(std::string &error) {
  llvm::raw_fd_ostream &os = file->os();
  os.flush();
  if (os.has_error()) {
    error = "cannot write '" + path + "': " + os.error().message();
    os.clear_error();
    return false;
  }
  file->keep();
  return true;
}
