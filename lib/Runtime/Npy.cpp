//===- Npy.cpp - Read and write NumPy .npy files ----------------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Runtime/Npy.h"

#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

using namespace gptc;
using namespace gptc::runtime;

static const char kMagic[] = "\x93NUMPY";

static const char *descrOf(program::DType dtype) {
  switch (dtype) {
  case program::F32:
    return "<f4";
  case program::F64:
    return "<f8";
  case program::I32:
    return "<i4";
  case program::I64:
    return "<i8";
  default:
    return nullptr;
  }
}

bool runtime::writeNpy(const std::string &path, const Tensor &tensor,
                       std::string &error) {
  const char *descr = descrOf(tensor.dtype);
  if (!descr) {
    error = std::string("cannot write ") + dtypeName(tensor.dtype) + " as .npy";
    return false;
  }
  std::ostringstream header;
  header << "{'descr': '" << descr << "', 'fortran_order': False, 'shape': (";
  for (int64_t d : tensor.shape)
    header << d << ", ";
  header << "), }";
  std::string h = header.str();
  // Magic (6) + version (2) + length (2) + header + '\n', padded to 64.
  size_t total = 10 + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  uint16_t length = static_cast<uint16_t>(h.size());
  out.write(kMagic, 6);
  out.put(1);
  out.put(0);
  out.write(reinterpret_cast<const char *>(&length), 2);
  out.write(h.data(), h.size());
  out.write(reinterpret_cast<const char *>(tensor.raw()), tensor.byteSize());
  if (!out) {
    error = "cannot write " + path;
    return false;
  }
  return true;
}

/// The value of `key` in a .npy header dictionary, up to the next `stop`.
static std::string field(const std::string &header, const std::string &key,
                         char stop) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos)
    return "";
  at = header.find(':', at);
  if (at == std::string::npos)
    return "";
  size_t end = header.find(stop, at + 1);
  return header.substr(at + 1, end == std::string::npos ? end : end - at);
}

bool runtime::readNpy(const std::string &path, Tensor &tensor,
                      std::string &error) {
  // A regular file only: opening a FIFO would wait for a writer, and a
  // device need not end.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    error = path + " is not a regular file (a .npy file is read whole)";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot open " + path;
    return false;
  }
  char magic[6];
  unsigned char version[2];
  in.read(magic, 6);
  in.read(reinterpret_cast<char *>(version), 2);
  if (!in || std::memcmp(magic, kMagic, 6) != 0) {
    error = path + " is not a .npy file";
    return false;
  }
  // The file's size bounds every length the header claims: nothing is
  // allocated for bytes the file does not have.
  std::streampos afterMagic = in.tellg();
  in.seekg(0, std::ios::end);
  int64_t fileSize = static_cast<int64_t>(in.tellg());
  in.seekg(afterMagic);
  uint32_t length = 0;
  if (version[0] == 1) {
    uint16_t l16;
    in.read(reinterpret_cast<char *>(&l16), 2);
    length = l16;
  } else {
    in.read(reinterpret_cast<char *>(&length), 4);
  }
  if (!in || static_cast<int64_t>(length) > fileSize) {
    error = path + ": truncated header";
    return false;
  }
  std::string header(length, '\0');
  in.read(header.data(), length);
  if (!in) {
    error = path + ": truncated header";
    return false;
  }
  std::string descr = field(header, "descr", ',');
  std::string order = field(header, "fortran_order", ',');
  std::string shape = field(header, "shape", ')');
  program::DType dtype;
  if (descr.find("<f4") != std::string::npos)
    dtype = program::F32;
  else if (descr.find("<f8") != std::string::npos)
    dtype = program::F64;
  else if (descr.find("<i4") != std::string::npos)
    dtype = program::I32;
  else if (descr.find("<i8") != std::string::npos)
    dtype = program::I64;
  else {
    error = path + ": unsupported dtype " + descr;
    return false;
  }
  if (order.find("False") == std::string::npos) {
    error = path + ": only C-order arrays are supported";
    return false;
  }
  std::vector<int64_t> dims;
  size_t open = shape.find('(');
  std::string list = open == std::string::npos ? "" : shape.substr(open + 1);
  list = list.substr(0, list.find(')'));
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.find_first_not_of(" \t") == std::string::npos)
      continue;
    try {
      dims.push_back(std::stoll(item));
    } catch (...) {
      error = path + ": bad shape";
      return false;
    }
    if (dims.back() < 0) {
      error = path + ": bad shape";
      return false;
    }
  }
  int64_t elementBytes = dtype == program::F64 || dtype == program::I64 ? 8 : 4;
  int64_t bytes = elementBytes;
  for (int64_t d : dims)
    if (__builtin_mul_overflow(bytes, d, &bytes)) {
      error = path + ": the shape in its header overflows 64-bit sizes";
      return false;
    }
  int64_t available = fileSize - static_cast<int64_t>(in.tellg());
  if (bytes > available) {
    error = path + ": its header's shape needs " + std::to_string(bytes) +
            " bytes of data, the file has " + std::to_string(available);
    return false;
  }
  tensor = Tensor(dtype, dims);
  in.read(reinterpret_cast<char *>(tensor.raw()), tensor.byteSize());
  if (!in) {
    error = path + ": truncated data";
    return false;
  }
  return true;
}
