//===- TextProto.cpp - Located protobuf text documents ----------*- C++ -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "gptc/Frontend/TextProto.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/STLExtras.h"

#include <google/protobuf/descriptor.h>
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
  DiagnosticCollector(const TextProtoSource::Impl &impl,
                      const pb::Descriptor *root)
      : impl(impl), root(root) {}

  void AddError(int line, pb::io::ColumnNumber column,
                const std::string &message) override {
    hadError = true;
    std::string text = rephrase(message), hint = suggestion(message);
    if (!hint.empty() && StringRef(text).ends_with("."))
      text.pop_back();
    emitError(atName(line, column, message)) << text << hint;
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

  /// The text between `key` and the next quote in `message`, or "".
  static StringRef quoted(StringRef message, StringRef key) {
    size_t open = message.find(key);
    if (open == StringRef::npos)
      return "";
    size_t begin = open + key.size();
    size_t close = message.find('"', begin);
    return close == StringRef::npos ? "" : message.slice(begin, close);
  }

  /// The candidate nearest `word` (case aside, within 2 edits, or a
  /// third of its length up to 3), or "".
  static std::string nearest(StringRef word, ArrayRef<std::string> candidates) {
    std::string best;
    unsigned bestDistance =
        std::min<unsigned>(3, std::max<size_t>(2, word.size() / 3)) + 1;
    for (const std::string &c : candidates) {
      unsigned d = StringRef(c).edit_distance_insensitive(word);
      if (d < bestDistance) {
        best = c;
        bestDistance = d;
      }
    }
    return best;
  }

  /// The enum of the first field named `field` in `message` or the
  /// messages it holds (the parser names the field, not its type).
  static const pb::EnumDescriptor *
  enumOfField(const pb::Descriptor *message, StringRef field,
              std::vector<const pb::Descriptor *> &seen) {
    if (!message || llvm::is_contained(seen, message))
      return nullptr;
    seen.push_back(message);
    for (int i = 0; i < message->field_count(); ++i) {
      const pb::FieldDescriptor *f = message->field(i);
      if (f->name() == field.str() && f->enum_type())
        return f->enum_type();
      if (const pb::EnumDescriptor *e =
              enumOfField(f->message_type(), field, seen))
        return e;
    }
    return nullptr;
  }

  /// "; did you mean "num_heads"?" for a misspelt field or enum value.
  std::string suggestion(StringRef message) const {
    std::vector<std::string> names;
    StringRef word;
    if (StringRef type = quoted(message, "Message type \""); !type.empty()) {
      word = quoted(message, "has no field named \"");
      const pb::Descriptor *d =
          pb::DescriptorPool::generated_pool()->FindMessageTypeByName(
              type.str());
      for (int i = 0; d && i < d->field_count(); ++i)
        names.push_back(std::string(d->field(i)->name()));
    } else if (StringRef field = quoted(message, "for field \"");
               !field.empty()) {
      word = quoted(message, "enumeration value of \"");
      std::vector<const pb::Descriptor *> seen;
      if (const pb::EnumDescriptor *e = enumOfField(root, field, seen))
        for (int i = 0; i < e->value_count(); ++i)
          names.push_back(std::string(e->value(i)->name()));
    }
    if (word.empty())
      return "";
    std::string best = nearest(word, names);
    return best.empty() ? "" : "; did you mean \"" + best + "\"?";
  }

  const TextProtoSource::Impl &impl;
  const pb::Descriptor *root;
};
} // namespace

LogicalResult TextProtoSource::parse(pb::Message &message, StringRef what) {
  DiagnosticCollector collector(*impl, message.GetDescriptor());
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
