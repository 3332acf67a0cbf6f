//===- TextProto.h - Located protobuf text documents -----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// gptc's inputs (model descriptions, hardware descriptions) are protobuf
// text. Protobuf's parser records the position of every field in a
// ParseInfoTree; TextProtoSource keeps it and turns positions into
// FileLineColLoc (1-based, byte columns) so that every syntax and
// validation error points at its field through MLIR's diagnostics.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_FRONTEND_TEXTPROTO_H
#define GPTC_FRONTEND_TEXTPROTO_H

#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"

#include <memory>
#include <string>
#include <vector>

namespace google::protobuf {
class Descriptor;
class Message;
} // namespace google::protobuf

namespace mlir::gptc {

/// One step of a path to a field: its name and, for repeated fields, the
/// element index.
struct FieldRef {
  llvm::StringRef name;
  int index = -1;
};

class TextProtoSource {
public:
  TextProtoSource(llvm::StringRef text, llvm::StringRef fileName,
                  MLIRContext *context);
  ~TextProtoSource();
  TextProtoSource(TextProtoSource &&) noexcept;
  TextProtoSource &operator=(TextProtoSource &&) noexcept;

  /// Parses the text into `message`, reporting each syntax error at its
  /// place (an unknown field at its name); `what` names the document in
  /// the error when protobuf gives none ("the model description").
  LogicalResult parse(google::protobuf::Message &message, llvm::StringRef what);

  /// The location of the field at `path` from the message of type `root`:
  /// the deepest step that the text wrote (a missing field: its enclosing
  /// block; nothing: the file's first line).
  Location locate(const google::protobuf::Descriptor *root,
                  llvm::ArrayRef<FieldRef> path) const;

  /// Protobuf's 0-based line and tab-expanded column as a location.
  Location toLoc(int line, int column) const;

  llvm::StringRef getText() const;
  llvm::StringRef getFileName() const;
  MLIRContext *getContext() const;

  struct Impl;

private:
  std::unique_ptr<Impl> impl;
};

} // namespace mlir::gptc

#endif // GPTC_FRONTEND_TEXTPROTO_H
