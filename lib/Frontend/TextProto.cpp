//===- TextProto.cpp - Located protobuf text documents ----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Frontend/TextProto.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

using namespace mlir;
using namespace mlir::gptc;
namespace pb = google::protobuf;

struct TextProtoSource::Impl {
  std::string text;
  std::string fileName;
  MLIRContext *context = nullptr;
  pb::TextFormat::ParseInfoTree tree;
  /// Byte offset of the start of each line of `text`.
  std::vector<size_t> lineStarts;

  Impl(StringRef text, StringRef fileName, MLIRContext *context)
      : text(text.str()), fileName(fileName.str()), context(context) {
    lineStarts.push_back(0);
    for (size_t i = 0, e = this->text.size(); i < e; ++i)
      if (this->text[i] == '\n')
        lineStarts.push_back(i + 1);
  }

  /// Converts protobuf's 0-based line and tab-expanded column into a
  /// 1-based line and byte column.
  Location toLoc(int line, int column) const {
    if (line < 0 || static_cast<size_t>(line) >= lineStarts.size())
      return FileLineColLoc::get(context, fileName, 1, 1);
    size_t begin = lineStarts[line];
    // The tokenizer advances a tab to the next multiple of 8.
    int visual = 0;
    size_t byte = begin;
    while (byte < text.size() && text[byte] != '\n' && visual < column) {
      visual = text[byte] == '\t' ? (visual / 8 + 1) * 8 : visual + 1;
      ++byte;
    }
    return FileLineColLoc::get(context, fileName, line + 1, byte - begin + 1);
  }
};

TextProtoSource::TextProtoSource(StringRef text, StringRef fileName,
                                 MLIRContext *context)
    : impl(std::make_unique<Impl>(text, fileName, context)) {}
TextProtoSource::~TextProtoSource() = default;
TextProtoSource::TextProtoSource(TextProtoSource &&) noexcept = default;
TextProtoSource &
TextProtoSource::operator=(TextProtoSource &&) noexcept = default;

StringRef TextProtoSource::getText() const { return impl->text; }
StringRef TextProtoSource::getFileName() const { return impl->fileName; }
MLIRContext *TextProtoSource::getContext() const { return impl->context; }
Location TextProtoSource::toLoc(int line, int column) const {
  return impl->toLoc(line, column);
}

Location TextProtoSource::locate(const pb::Descriptor *descriptor,
                                 ArrayRef<FieldRef> path) const {
  const pb::TextFormat::ParseInfoTree *tree = &impl->tree;
  Location best = impl->toLoc(-1, 0);
  for (const FieldRef &step : path) {
    const pb::FieldDescriptor *field =
        descriptor->FindFieldByName(std::string(step.name));
    if (!field || !tree)
      break;
    int index = field->is_repeated() ? std::max(step.index, 0) : -1;
    pb::TextFormat::ParseLocation where = tree->GetLocation(field, index);
    if (where.line < 0)
      break;
    best = impl->toLoc(where.line, where.column);
    if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE)
      break;
    tree = tree->GetTreeForNested(field, index);
    descriptor = field->message_type();
  }
  return best;
}

namespace {
/// Forwards protobuf's syntax errors to MLIR diagnostics.
class DiagnosticCollector : public pb::io::ErrorCollector {
public:
  explicit DiagnosticCollector(const TextProtoSource::Impl &impl)
      : impl(impl) {}

  void AddError(int line, pb::io::ColumnNumber column,
                const std::string &message) override {
    hadError = true;
    emitError(atName(line, column, message)) << rephrase(message);
  }
  void AddWarning(int line, pb::io::ColumnNumber column,
                  const std::string &message) override {
    emitWarning(impl.toLoc(line, column)) << rephrase(message);
  }

  bool hadError = false;

private:
  /// Protobuf reports an unknown field or enum value at the token after it;
  /// point at the name itself when it is on the same line.
  Location atName(int line, int column, StringRef message) const {
    StringRef name;
    for (StringRef key : {"named \"", "enumeration value of \""}) {
      size_t open = message.find(key);
      if (open == StringRef::npos)
        continue;
      size_t begin = open + key.size();
      size_t close = message.find('"', begin);
      if (close != StringRef::npos)
        name = message.slice(begin, close);
    }
    if (name.empty() || line < 0 ||
        static_cast<size_t>(line) >= impl.lineStarts.size())
      return impl.toLoc(line, column);
    // The name is on the reported line or, when protobuf read past a line
    // end to find the next token, on one of the lines before it.
    StringRef text = impl.text;
    for (int l = line; l >= 0 && l >= line - 3; --l) {
      StringRef lineText = text.substr(impl.lineStarts[l]).split('\n').first;
      if (l == line)
        lineText = lineText.take_front(column);
      size_t at = lineText.rfind(name);
      if (at != StringRef::npos)
        return FileLineColLoc::get(impl.context, impl.fileName, l + 1, at + 1);
    }
    return impl.toLoc(line, column);
  }

  /// Protobuf names message types by their full name; users know the field
  /// they wrote, so say it in their words.
  static std::string rephrase(StringRef message) {
    if (message.ends_with("got: "))
      return "unexpected end of input: a block is not closed with '}'";
    std::string text = message.str();
    for (StringRef prefix :
         {"Message type \"gptc.spec.", "Enum type \"gptc.spec.",
          "Message type \"gptc.hardware.", "Enum type \"gptc.hardware."}) {
      size_t at = text.find(prefix.str());
      if (at != std::string::npos)
        text.replace(at, prefix.size(),
                     prefix.starts_with("Message") ? "message \"" : "enum \"");
    }
    return text;
  }

  const TextProtoSource::Impl &impl;
};
} // namespace

LogicalResult TextProtoSource::parse(pb::Message &message, StringRef what) {
  DiagnosticCollector collector(*impl);
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&collector);
  parser.WriteLocationsTo(&impl->tree);
  bool parsed = parser.ParseFromString(impl->text, &message);
  if (!parsed || collector.hadError) {
    if (!collector.hadError)
      emitError(impl->toLoc(-1, 0)) << "cannot parse " << what;
    return failure();
  }
  return success();
}
