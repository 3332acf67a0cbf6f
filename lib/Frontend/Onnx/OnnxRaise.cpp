//===- OnnxRaise.cpp - An exported GPT's layers as gptc's fused ops ------===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// An exported transformer reaches gptc as the primitives ONNX has: MatMul
// of a transposed weight plus a broadcast bias, the tanh GELU as six
// elementwise ops, attention as head reshapes, two batched products, a
// scale, a mask and a softmax. gptc's passes (sharding propagation and
// Megatron's layout, kernel formation, the attention kernel) work on its
// own ops, so the importer raises these patterns (docs/Onnx.md, "What
// training raises"):
//
//   matmul(reshape(x), transpose(W)) [+ broadcast(b)]   -> gptc.linear x, W, b
//   0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))    -> gptc.gelu x
//   0.5 x (1 + erf(x / sqrt(2)))                        -> gptc.gelu x exact
//   softmax(mask(Q K^T / sqrt(D))) V over H heads       ->
//   gptc.causal_attention (x - mean) / sqrt(var + eps) * gamma + beta ->
//   gptc.layer_norm
//     (ONNX before opset 17 has no LayerNormalization)
//
// Each rewrite checks what it relies on: the constants (to 1e-6), the
// permutations and shapes, and the mask element by element (every key
// after the query masked, none before). A near miss is left as it is.
//
//===----------------------------------------------------------------------===//

#include "gptc/Frontend/OnnxImporter.h"

#include "OnnxInternal.h"

#include "gptc/Dialect/Gptc/IR/GptcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include <cmath>

using namespace mlir;
using namespace mlir::gptc;

namespace {

RankedTensorType typeOf(Value v) {
  return dyn_cast<RankedTensorType>(v.getType());
}

/// The value `v` is a reshape of (through any chain of reshapes).
Value throughReshapes(Value v) {
  while (auto r = v.getDefiningOp<ReshapeOp>())
    v = r.getInput();
  return v;
}

/// The only user of `v`, or null.
Operation *onlyUser(Value v) {
  if (!v.hasOneUse())
    return nullptr;
  return *v.getUsers().begin();
}

/// Follows `v` forward through single-use reshapes.
Value forwardThroughReshapes(Value v) {
  while (Operation *u = onlyUser(v)) {
    auto r = dyn_cast<ReshapeOp>(u);
    if (!r)
      break;
    v = r.getResult();
  }
  return v;
}

/// `v` is a scalar float constant, or a broadcast of one: its value.
std::optional<double> splat(Value v) {
  while (true) {
    if (auto b = v.getDefiningOp<BroadcastOp>())
      v = b.getInput();
    else if (auto r = v.getDefiningOp<ReshapeOp>())
      v = r.getInput();
    else
      break;
  }
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c)
    return std::nullopt;
  auto dense = dyn_cast<DenseFPElementsAttr>(c.getValue());
  if (!dense || !dense.isSplat())
    return std::nullopt;
  return dense.getSplatValue<APFloat>().convertToDouble();
}

bool near(std::optional<double> x, double want) {
  return x && std::abs(*x - want) <= 1e-6 * std::abs(want);
}

/// The factors of a product tree of `gptc.binary mul`s (and `pow x, 2|3`),
/// looking through at most `depth` levels.
void factors(Value v, SmallVectorImpl<Value> &out, int depth = 4) {
  if (auto op = v.getDefiningOp<BinaryOp>(); op && depth > 0) {
    if (op.getFn() == BinaryFn::mul) {
      factors(op.getLhs(), out, depth - 1);
      factors(op.getRhs(), out, depth - 1);
      return;
    }
    for (int n : {2, 3})
      if (op.getFn() == BinaryFn::pow && near(splat(op.getRhs()), n)) {
        for (int i = 0; i < n; ++i)
          out.push_back(op.getLhs());
        return;
      }
  }
  out.push_back(v);
}

/// Splits `fs` into its splat constants (their product) and the rest.
double constantPart(SmallVectorImpl<Value> &fs) {
  double c = 1;
  SmallVector<Value> rest;
  for (Value f : fs) {
    if (std::optional<double> s = splat(f))
      c *= *s;
    else
      rest.push_back(f);
  }
  fs.assign(rest.begin(), rest.end());
  return c;
}

/// The two operands of the `gptc.add` defining `v`.
std::optional<std::pair<Value, Value>> addOperands(Value v) {
  auto add = v.getDefiningOp<AddOp>();
  if (!add)
    return std::nullopt;
  return std::make_pair(add.getLhs(), add.getRhs());
}

//===----------------------------------------------------------------------===//
// Linear layers
//===----------------------------------------------------------------------===//

/// matmul(reshape(x), transpose(W)) [+ broadcast(b)] becomes
/// gptc.linear x, W, b.
bool raiseLinear(MatmulOp mm, OpBuilder &b) {
  if (mm.getTransposeLhs())
    return false;
  auto lhsType = typeOf(mm.getLhs()), outType = typeOf(mm.getResult());
  if (!lhsType || lhsType.getRank() != 2 || !outType)
    return false;
  Value weight;
  if (mm.getTransposeRhs()) {
    weight = mm.getRhs();
  } else {
    auto t = mm.getRhs().getDefiningOp<TransposeOp>();
    if (!t || t.getPermutation() != ArrayRef<int64_t>{1, 0})
      return false;
    weight = t.getInput();
  }
  auto wType = typeOf(weight);
  if (!wType || wType.getRank() != 2)
    return false;
  int64_t n = wType.getDimSize(0), k = wType.getDimSize(1);
  // The input: the rows' original shape (... x K).
  Value x = mm.getLhs();
  if (auto r = x.getDefiningOp<ReshapeOp>()) {
    auto src = typeOf(r.getInput());
    if (src && src.getRank() >= 2 && src.getShape().back() == k)
      x = r.getInput();
  }
  auto xType = typeOf(x);
  if (xType.getShape().back() != k)
    return false;
  SmallVector<int64_t> shape(xType.getShape().drop_back());
  shape.push_back(n);
  auto resultType = RankedTensorType::get(shape, outType.getElementType());
  // The result, reshaped back to x's leading dimensions.
  Value result = mm.getResult();
  if (xType.getRank() != 2) {
    auto r = dyn_cast_or_null<ReshapeOp>(onlyUser(result));
    if (!r || r.getResult().getType() != resultType)
      return false;
    result = r.getResult();
  }
  // An added bias over the last dimension.
  Value bias;
  Operation *biasAdd = nullptr;
  if (auto add = dyn_cast_or_null<AddOp>(onlyUser(result))) {
    Value other = add.getLhs() == result ? add.getRhs() : add.getLhs();
    if (auto bc = other.getDefiningOp<BroadcastOp>()) {
      auto bType = typeOf(bc.getInput());
      SmallVector<int64_t> lead;
      for (int64_t d = 0; d + 1 < resultType.getRank(); ++d)
        lead.push_back(d);
      if (bType && bType.getRank() == 1 && bType.getDimSize(0) == n &&
          bc.getDimensions() == ArrayRef<int64_t>(lead)) {
        bias = bc.getInput();
        biasAdd = add;
      }
    }
  }
  Operation *last = biasAdd ? biasAdd : result.getDefiningOp();
  b.setInsertionPoint(last);
  auto linear = LinearOp::create(b, mm.getLoc(), x, weight, bias);
  last->getResult(0).replaceAllUsesWith(linear.getResult());
  return true;
}

//===----------------------------------------------------------------------===//
// GELU
//===----------------------------------------------------------------------===//

/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) at `v`: x, or null.
Value matchGelu(Value v) {
  SmallVector<Value> outer;
  factors(v, outer);
  if (!near(constantPart(outer), 0.5) || outer.size() != 2)
    return {};
  for (int which = 0; which < 2; ++which) {
    Value x = outer[which], onePlus = outer[1 - which];
    auto sum = addOperands(onePlus);
    if (!sum)
      continue;
    auto [a, c] = *sum;
    Value th = near(splat(a), 1.0) ? c : near(splat(c), 1.0) ? a : Value();
    auto tanh = th ? th.getDefiningOp<UnaryOp>() : UnaryOp();
    if (!tanh || tanh.getFn() != UnaryFn::tanh)
      continue;
    SmallVector<Value> inner;
    factors(tanh.getInput(), inner);
    if (!near(constantPart(inner), std::sqrt(2.0 / M_PI)) || inner.size() != 1)
      continue;
    auto poly = addOperands(inner[0]);
    if (!poly)
      continue;
    for (auto [lin, cube] :
         {*poly, std::make_pair(poly->second, poly->first)}) {
      if (lin != x)
        continue;
      SmallVector<Value> cf;
      factors(cube, cf);
      if (near(constantPart(cf), 0.044715) && cf.size() == 3 &&
          llvm::all_of(cf, [&](Value f) { return f == x; }))
        return x;
    }
  }
  return {};
}

/// 0.5 x (1 + erf(x / sqrt(2))) at `v` (the division by sqrt(2) or the
/// product with 1/sqrt(2), as PyTorch's exporters write F.gelu): x, or
/// null.
Value matchExactGelu(Value v) {
  SmallVector<Value> outer;
  factors(v, outer);
  if (!near(constantPart(outer), 0.5) || outer.size() != 2)
    return {};
  for (int which = 0; which < 2; ++which) {
    Value x = outer[which], onePlus = outer[1 - which];
    auto sum = addOperands(onePlus);
    if (!sum)
      continue;
    auto [a, c] = *sum;
    Value e = near(splat(a), 1.0) ? c : near(splat(c), 1.0) ? a : Value();
    auto erf = e ? e.getDefiningOp<UnaryOp>() : UnaryOp();
    if (!erf || erf.getFn() != UnaryFn::erf)
      continue;
    Value arg = erf.getInput();
    if (auto div = arg.getDefiningOp<BinaryOp>();
        div && div.getFn() == BinaryFn::div && div.getLhs() == x &&
        near(splat(div.getRhs()), M_SQRT2))
      return x;
    SmallVector<Value> inner;
    factors(arg, inner, 1);
    if (near(constantPart(inner), M_SQRT1_2) && inner.size() == 1 &&
        inner[0] == x)
      return x;
  }
  return {};
}

//===----------------------------------------------------------------------===//
// Layer normalization (ONNX before opset 17: ReduceMean, Sub, Pow, ...)
//===----------------------------------------------------------------------===//

/// `v` = broadcast(p) over the leading dimensions of a rank-`rank` tensor
/// with p of shape [c]: p.
Value vectorOverLast(Value v, int64_t rank, int64_t c) {
  auto bc = v.getDefiningOp<BroadcastOp>();
  if (!bc)
    return {};
  auto t = typeOf(bc.getInput());
  SmallVector<int64_t> lead;
  for (int64_t d = 0; d + 1 < rank; ++d)
    lead.push_back(d);
  if (!t || t.getRank() != 1 || t.getDimSize(0) != c ||
      bc.getDimensions() != ArrayRef<int64_t>(lead))
    return {};
  return bc.getInput();
}

/// `v` = mean over the last dimension of `of` (reduce_sum / C), broadcast
/// back over it: `of`'s statistics source, or null.
Value meanOverLast(Value v, Value &of) {
  auto bc = v.getDefiningOp<BroadcastOp>();
  if (!bc)
    return {};
  auto full = typeOf(bc.getResult());
  int64_t r = full.getRank();
  if (bc.getDimensions() != ArrayRef<int64_t>{r - 1})
    return {};
  Value q = throughReshapes(bc.getInput());
  auto div = q.getDefiningOp<BinaryOp>();
  if (!div || div.getFn() != BinaryFn::div ||
      !near(splat(div.getRhs()), double(full.getShape().back())))
    return {};
  auto sum = throughReshapes(div.getLhs()).getDefiningOp<ReduceSumOp>();
  if (!sum || sum.getDimensions() != ArrayRef<int64_t>{r - 1} ||
      typeOf(sum.getInput()) != full)
    return {};
  of = sum.getInput();
  return of;
}

/// ((x - mean) / sqrt(mean((x - mean)^2) + eps)) * gamma + beta at `add`.
bool raiseLayerNorm(AddOp add, OpBuilder &b) {
  auto type = typeOf(add.getResult());
  if (!type || type.getRank() < 1)
    return false;
  int64_t r = type.getRank(), c = type.getShape().back();
  for (auto [scaled, shift] : {std::make_pair(add.getLhs(), add.getRhs()),
                               std::make_pair(add.getRhs(), add.getLhs())}) {
    Value beta = vectorOverLast(shift, r, c);
    auto mul = scaled.getDefiningOp<BinaryOp>();
    if (!beta || !mul || mul.getFn() != BinaryFn::mul)
      continue;
    for (auto [normed, g] : {std::make_pair(mul.getLhs(), mul.getRhs()),
                             std::make_pair(mul.getRhs(), mul.getLhs())}) {
      Value gamma = vectorOverLast(g, r, c);
      auto div = normed.getDefiningOp<BinaryOp>();
      if (!gamma || !div || div.getFn() != BinaryFn::div)
        continue;
      // d = x - mean(x)
      Value d = div.getLhs();
      auto sub = d.getDefiningOp<BinaryOp>();
      Value x;
      if (!sub || sub.getFn() != BinaryFn::sub ||
          !meanOverLast(sub.getRhs(), x) || x != sub.getLhs())
        continue;
      // sqrt(mean(d^2) + eps), broadcast over the last dimension.
      auto bc = div.getRhs().getDefiningOp<BroadcastOp>();
      if (!bc || bc.getDimensions() != ArrayRef<int64_t>{r - 1})
        continue;
      auto sqrt = throughReshapes(bc.getInput()).getDefiningOp<UnaryOp>();
      if (!sqrt || sqrt.getFn() != UnaryFn::sqrt)
        continue;
      auto plus = addOperands(sqrt.getInput());
      if (!plus)
        continue;
      for (auto [var, e] : {*plus, std::make_pair(plus->second, plus->first)}) {
        std::optional<double> eps = splat(e);
        auto vdiv = throughReshapes(var).getDefiningOp<BinaryOp>();
        if (!eps || *eps <= 0 || !vdiv || vdiv.getFn() != BinaryFn::div ||
            !near(splat(vdiv.getRhs()), double(c)))
          continue;
        auto vsum = throughReshapes(vdiv.getLhs()).getDefiningOp<ReduceSumOp>();
        if (!vsum || vsum.getDimensions() != ArrayRef<int64_t>{r - 1})
          continue;
        SmallVector<Value> sq;
        factors(vsum.getInput(), sq, 1);
        if (constantPart(sq) != 1.0 || sq.size() != 2 || sq[0] != d ||
            sq[1] != d)
          continue;
        b.setInsertionPoint(add);
        auto ln = LayerNormOp::create(b, add.getLoc(), x, gamma, beta,
                                      b.getF64FloatAttr(*eps));
        add.getResult().replaceAllUsesWith(ln.getResult());
        return true;
      }
    }
  }
  return false;
}

//===----------------------------------------------------------------------===//
// Causal attention
//===----------------------------------------------------------------------===//

/// `v` = transpose(reshape(X, B x T x H x D), perm) with X of B x T x C:
/// X, and the heads.
Value headsOf(Value v, ArrayRef<int64_t> perm, int64_t &heads) {
  auto t = throughReshapes(v).getDefiningOp<TransposeOp>();
  if (!t || t.getPermutation() != perm)
    return {};
  auto split = t.getInput().getDefiningOp<ReshapeOp>();
  if (!split)
    return {};
  auto four = typeOf(split.getResult()), three = typeOf(split.getInput());
  if (!four || !three || four.getRank() != 4 || three.getRank() != 3 ||
      four.getDimSize(0) != three.getDimSize(0) ||
      four.getDimSize(1) != three.getDimSize(1) ||
      four.getDimSize(2) * four.getDimSize(3) != three.getDimSize(2))
    return {};
  heads = four.getDimSize(2);
  return split.getInput();
}

/// The causal mask the importer makes of `masked_fill(tril == 0, -inf)`:
/// each score picked from concat(-inf..., scores) by a known index. The
/// scores' value (B x H x T x T), or null when the mask is not causal.
Value causalMaskInput(Value v) {
  auto e = throughReshapes(v).getDefiningOp<EmbeddingOp>();
  if (!e || e.getOffset())
    return {};
  auto cat = throughReshapes(e.getTable()).getDefiningOp<ConcatOp>();
  if (!cat || cat.getInputs().size() != 2 || cat.getAxis() != 0)
    return {};
  std::optional<double> fill = splat(cat.getInputs()[0]);
  if (!fill || !std::isinf(*fill) || *fill > 0)
    return {};
  Value scores = throughReshapes(cat.getInputs()[1]);
  auto st = typeOf(scores);
  auto ids = e.getIds().getDefiningOp<ConstantOp>();
  if (!st || st.getRank() != 4 || !ids)
    return {};
  auto dense = dyn_cast<DenseIntElementsAttr>(ids.getValue());
  int64_t n = st.getNumElements(), t = st.getDimSize(3);
  if (!dense || dense.getNumElements() != n || st.getDimSize(2) != t ||
      typeOf(cat.getInputs()[0]).getNumElements() != n)
    return {};
  int64_t idx = 0;
  for (const APInt &x : dense.getValues<APInt>()) {
    int64_t i = (idx / t) % t, j = idx % t, got = x.getSExtValue();
    bool kept = j <= i;
    if (kept ? got != n + idx : (got < 0 || got >= n))
      return {};
    ++idx;
  }
  return scores;
}

/// softmax(mask(Q K^T / sqrt(D))) V: replaces the heads' merged output.
bool raiseAttention(SoftmaxOp softmax, OpBuilder &b) {
  Value scaled = causalMaskInput(softmax.getInput());
  if (!scaled)
    return false;
  // The scale.
  SmallVector<Value> fs;
  factors(scaled, fs, 1);
  double scale = constantPart(fs);
  if (fs.size() != 1)
    return false;
  auto qk = throughReshapes(fs[0]).getDefiningOp<MatmulOp>();
  if (!qk || qk.getTransposeLhs() || qk.getTransposeRhs())
    return false;
  int64_t hq = 0, hk = 0, hv = 0;
  Value q = headsOf(qk.getLhs(), {0, 2, 1, 3}, hq);
  Value k = headsOf(qk.getRhs(), {0, 2, 3, 1}, hk);
  if (!q || !k || hq != hk)
    return false;
  auto qType = typeOf(q);
  int64_t d = qType.getDimSize(2) / hq;
  if (!near(scale, 1.0 / std::sqrt(static_cast<double>(d))))
    return false;
  // P V.
  Value p = forwardThroughReshapes(softmax.getResult());
  auto pv = dyn_cast_or_null<MatmulOp>(onlyUser(p));
  if (!pv || pv.getLhs() != p || pv.getTransposeLhs() || pv.getTransposeRhs())
    return false;
  Value v = headsOf(pv.getRhs(), {0, 2, 1, 3}, hv);
  if (!v || hv != hq || typeOf(v) != qType || typeOf(k) != qType)
    return false;
  // The heads merged back: transpose to B x T x H x D, reshape to B x T x C.
  Value o = forwardThroughReshapes(pv.getResult());
  auto back = dyn_cast_or_null<TransposeOp>(onlyUser(o));
  if (!back || back.getPermutation() != ArrayRef<int64_t>{0, 2, 1, 3})
    return false;
  auto merged = dyn_cast_or_null<ReshapeOp>(onlyUser(back.getResult()));
  if (!merged || merged.getResult().getType() != qType)
    return false;
  b.setInsertionPoint(merged);
  auto attn = CausalAttentionOp::create(b, softmax.getLoc(), q, k, v,
                                        b.getI64IntegerAttr(hq));
  merged.getResult().replaceAllUsesWith(attn.getResult());
  return true;
}

} // namespace

void mlir::gptc::onnx_detail::eraseDeadOps(Block &body) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (!op.hasTrait<OpTrait::IsTerminator>() && op.use_empty() &&
          isPure(&op)) {
        op.erase();
        changed = true;
      }
  }
}

OnnxRaiseCounts mlir::gptc::raiseGptPatterns(func::FuncOp func) {
  OnnxRaiseCounts counts;
  OpBuilder b(func.getContext());
  Block &body = func.getBody().front();
  // Layer norms (older opsets decompose them).
  SmallVector<AddOp> adds;
  func.walk([&](AddOp op) { adds.push_back(op); });
  for (AddOp op : adds)
    counts.layerNorm += raiseLayerNorm(op, b);
  onnx_detail::eraseDeadOps(body);
  // Attention next: its products must not become linears.
  SmallVector<SoftmaxOp> softmaxes;
  func.walk([&](SoftmaxOp op) { softmaxes.push_back(op); });
  for (SoftmaxOp op : softmaxes)
    counts.attention += raiseAttention(op, b);
  onnx_detail::eraseDeadOps(body);
  SmallVector<MatmulOp> matmuls;
  func.walk([&](MatmulOp op) { matmuls.push_back(op); });
  for (MatmulOp op : matmuls)
    counts.linear += raiseLinear(op, b);
  onnx_detail::eraseDeadOps(body);
  // GELU: outermost first (each mul is tried as the top of the pattern).
  SmallVector<BinaryOp> muls;
  func.walk([&](BinaryOp op) {
    if (op.getFn() == BinaryFn::mul)
      muls.push_back(op);
  });
  for (BinaryOp op : llvm::reverse(muls)) {
    if (op.getResult().use_empty())
      continue; // inside a GELU already raised
    Value x = matchGelu(op.getResult());
    bool exact = !x;
    if (exact)
      x = matchExactGelu(op.getResult());
    if (!x)
      continue;
    b.setInsertionPoint(op);
    auto gelu = GeluOp::create(b, op.getLoc(), x, exact);
    op.getResult().replaceAllUsesWith(gelu.getResult());
    ++counts.gelu;
  }
  onnx_detail::eraseDeadOps(body);
  return counts;
}
