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

/// `v + broadcast(b)` with b a vector of `n` over the last dimension of
/// v's rank-`rank` result (either operand order): the add and b.
std::optional<std::pair<AddOp, Value>> biasAddOf(Value v, int64_t n) {
  auto add = dyn_cast_or_null<AddOp>(onlyUser(v));
  if (!add)
    return std::nullopt;
  Value other = add.getLhs() == v ? add.getRhs() : add.getLhs();
  auto bc = other.getDefiningOp<BroadcastOp>();
  if (!bc)
    return std::nullopt;
  auto bType = typeOf(bc.getInput());
  int64_t rank = typeOf(v).getRank();
  SmallVector<int64_t> lead;
  for (int64_t d = 0; d + 1 < rank; ++d)
    lead.push_back(d);
  if (!bType || bType.getRank() != 1 || bType.getDimSize(0) != n ||
      bc.getDimensions() != ArrayRef<int64_t>(lead))
    return std::nullopt;
  return std::make_pair(add, bc.getInput());
}

/// matmul(reshape(x), W') [+ broadcast(b)] [reshaped back to x's leading
/// dimensions, before or after the bias] becomes gptc.linear x, W, b. W'
/// is transpose(W) (nn.Linear as exporters write it), W with the matmul's
/// transpose_rhs (Gemm with transB), or a [K, N] weight itself (Hugging
/// Face's Conv1D, and a weight the exporter stored transposed): then the
/// linear reads transpose(W'), which training makes a parameter of its own
/// (OnnxTraining.cpp).
bool raiseLinear(MatmulOp mm, OpBuilder &b) {
  if (mm.getTransposeLhs())
    return false;
  auto lhsType = typeOf(mm.getLhs()), outType = typeOf(mm.getResult());
  if (!lhsType || lhsType.getRank() != 2 || !outType)
    return false;
  Value weight;
  bool kn = false;
  if (mm.getTransposeRhs()) {
    weight = mm.getRhs();
  } else if (auto t = mm.getRhs().getDefiningOp<TransposeOp>();
             t && t.getPermutation() == ArrayRef<int64_t>{1, 0}) {
    weight = t.getInput();
  } else if (isa<BlockArgument>(mm.getRhs())) {
    weight = mm.getRhs();
    kn = true;
  } else {
    return false;
  }
  auto wType = typeOf(weight);
  if (!wType || wType.getRank() != 2)
    return false;
  int64_t n = wType.getDimSize(kn ? 1 : 0), k = wType.getDimSize(kn ? 0 : 1);
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
  // The bias and the reshape back, in either order.
  Value result = mm.getResult(), bias;
  Operation *last = mm;
  auto takeBias = [&]() {
    if (bias)
      return;
    if (auto found = biasAddOf(result, n)) {
      bias = found->second;
      result = found->first.getResult();
      last = found->first;
    }
  };
  takeBias();
  if (xType.getRank() != 2) {
    auto r = dyn_cast_or_null<ReshapeOp>(onlyUser(result));
    if (!r || r.getResult().getType() != resultType)
      return false;
    result = r.getResult();
    last = r;
  }
  takeBias();
  b.setInsertionPoint(last);
  if (kn)
    weight =
        TransposeOp::create(b, mm.getLoc(), weight, ArrayRef<int64_t>{1, 0});
  auto linear = LinearOp::create(b, mm.getLoc(), x, weight, bias);
  result.replaceAllUsesWith(linear.getResult());
  return true;
}

//===----------------------------------------------------------------------===//
// GELU
//===----------------------------------------------------------------------===//

/// 0.5 x (1 + fn(u)) at `v`, in any grouping and order of its products:
/// x, when `argument(x, u)` holds; null otherwise. Both GELUs have this form.
Value matchHalfXOnePlus(Value v, UnaryFn fn,
                        function_ref<bool(Value x, Value u)> argument) {
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
    Value f = near(splat(a), 1.0) ? c : near(splat(c), 1.0) ? a : Value();
    auto op = f ? f.getDefiningOp<UnaryOp>() : UnaryOp();
    if (op && op.getFn() == fn && argument(x, op.getInput()))
      return x;
  }
  return {};
}

/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) at `v`: x, or null.
Value matchGelu(Value v) {
  return matchHalfXOnePlus(v, UnaryFn::tanh, [](Value x, Value u) {
    SmallVector<Value> inner;
    factors(u, inner);
    if (!near(constantPart(inner), std::sqrt(2.0 / M_PI)) || inner.size() != 1)
      return false;
    auto poly = addOperands(inner[0]);
    if (!poly)
      return false;
    for (auto [lin, cube] :
         {*poly, std::make_pair(poly->second, poly->first)}) {
      SmallVector<Value> cf;
      factors(cube, cf);
      if (lin == x && near(constantPart(cf), 0.044715) && cf.size() == 3 &&
          llvm::all_of(cf, [&](Value f) { return f == x; }))
        return true;
    }
    return false;
  });
}

/// 0.5 x (1 + erf(x / sqrt(2))) at `v` (the division by sqrt(2) or the
/// product with 1/sqrt(2), as PyTorch's exporters write F.gelu): x, or
/// null.
Value matchExactGelu(Value v) {
  return matchHalfXOnePlus(v, UnaryFn::erf, [](Value x, Value u) {
    if (auto div = u.getDefiningOp<BinaryOp>();
        div && div.getFn() == BinaryFn::div && div.getLhs() == x &&
        near(splat(div.getRhs()), M_SQRT2))
      return true;
    SmallVector<Value> inner;
    factors(u, inner, 1);
    return near(constantPart(inner), M_SQRT1_2) && inner.size() == 1 &&
           inner[0] == x;
  });
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

/// An additive causal mask at `v`: a constant (through broadcasts over
/// leading dimensions and reshapes that keep the last two) whose last two
/// dimensions are T x T, 0 for every key up to the query and -inf or a
/// value at most -1e30 (finfo.min, which Hugging Face's mask builders and
/// PyTorch's scaled_dot_product_attention decomposition use) after it.
bool isAdditiveCausalMask(Value v, int64_t t) {
  while (true) {
    if (auto bc = v.getDefiningOp<BroadcastOp>()) {
      int64_t r = typeOf(bc.getResult()).getRank();
      if (llvm::any_of(bc.getDimensions(),
                       [&](int64_t d) { return d >= r - 2; }))
        return false;
      v = bc.getInput();
    } else if (auto rs = v.getDefiningOp<ReshapeOp>()) {
      auto in = typeOf(rs.getInput()), out = typeOf(rs.getResult());
      if (!in || in.getRank() < 2 || out.getRank() < 2 ||
          in.getShape().take_back(2) != out.getShape().take_back(2))
        return false;
      v = rs.getInput();
    } else {
      break;
    }
  }
  auto c = v.getDefiningOp<ConstantOp>();
  auto type = typeOf(v);
  if (!c || !type || type.getRank() < 2 ||
      type.getShape().take_back(2) != ArrayRef<int64_t>{t, t})
    return false;
  auto dense = dyn_cast<DenseFPElementsAttr>(c.getValue());
  if (!dense)
    return false;
  if (dense.isSplat())
    return false; // a splat is no causal mask (T > 1) or no mask at all
  int64_t idx = 0;
  for (const APFloat &x : dense.getValues<APFloat>()) {
    int64_t i = (idx / t) % t, j = idx % t;
    double value = x.convertToDouble();
    bool ok = j <= i ? value == 0 : (value <= -1e30);
    if (!ok)
      return false;
    ++idx;
  }
  return true;
}

/// The scores under a causal mask at `v` (through reshapes): the masked
/// fill the importer makes a gather of, or `scores + mask` with an additive
/// causal mask; null otherwise.
Value maskedScores(Value v) {
  if (Value scores = causalMaskInput(v))
    return scores;
  auto add = throughReshapes(v).getDefiningOp<AddOp>();
  if (!add)
    return {};
  for (auto [scores, mask] : {std::make_pair(add.getLhs(), add.getRhs()),
                              std::make_pair(add.getRhs(), add.getLhs())}) {
    auto st = typeOf(scores);
    if (st && st.getRank() >= 2 &&
        isAdditiveCausalMask(mask, st.getShape().back()))
      return scores;
  }
  return {};
}

/// `v` through reshapes and products with splat constants: the one other
/// factor (null if there are several), the constants multiplied into
/// `scale`.
Value stripScale(Value v, double &scale) {
  SmallVector<Value> fs;
  factors(throughReshapes(v), fs, 2);
  scale *= constantPart(fs);
  return fs.size() == 1 ? throughReshapes(fs[0]) : Value();
}

/// The keys transposed for Q K^T as the exporters write it: the heads
/// (transpose(reshape(K, B x T x H x D), [0, 2, 3, 1])), or the heads in
/// B x H x T x D transposed in their last two dimensions (as a 3-D
/// [B H, T, D] view, [0, 2, 1], or 4-D, [0, 1, 3, 2]): K, and the heads.
Value transposedKeyHeads(Value v, int64_t &heads) {
  if (Value k = headsOf(v, {0, 2, 3, 1}, heads))
    return k;
  auto t = throughReshapes(v).getDefiningOp<TransposeOp>();
  if (!t)
    return {};
  auto in = typeOf(t.getInput());
  ArrayRef<int64_t> perm = t.getPermutation();
  bool lastTwo = (in.getRank() == 3 && perm == ArrayRef<int64_t>{0, 2, 1}) ||
                 (in.getRank() == 4 && perm == ArrayRef<int64_t>{0, 1, 3, 2});
  if (!lastTwo)
    return {};
  Value k = headsOf(t.getInput(), {0, 2, 1, 3}, heads);
  if (!k)
    return {};
  auto kt = typeOf(k);
  int64_t tk = kt.getDimSize(1), d = kt.getDimSize(2) / heads;
  if (in.getShape().take_back(2) != ArrayRef<int64_t>{tk, d})
    return {};
  return k;
}

/// softmax(mask(Q K^T / sqrt(D))) V: replaces the heads' merged output.
/// The scale may be applied to the scores or split over Q and K^T (PyTorch's
/// scaled_dot_product_attention decomposition multiplies each by
/// D^-1/4); a NaN guard between softmax and P V (`unless_nan p, p`) is
/// dropped with it (a causal row always has its own key).
bool raiseAttention(SoftmaxOp softmax, OpBuilder &b) {
  Value scores = maskedScores(softmax.getInput());
  if (!scores)
    return false;
  double scale = 1.0;
  Value product = stripScale(scores, scale);
  auto qk = product ? product.getDefiningOp<MatmulOp>() : MatmulOp();
  if (!qk || qk.getTransposeLhs() || qk.getTransposeRhs())
    return false;
  Value qHeads = stripScale(qk.getLhs(), scale);
  Value kHeads = stripScale(qk.getRhs(), scale);
  int64_t hq = 0, hk = 0, hv = 0;
  Value q = qHeads ? headsOf(qHeads, {0, 2, 1, 3}, hq) : Value();
  Value k = kHeads ? transposedKeyHeads(kHeads, hk) : Value();
  if (!q || !k || hq != hk)
    return false;
  auto qType = typeOf(q);
  int64_t d = qType.getDimSize(2) / hq;
  if (!near(scale, 1.0 / std::sqrt(static_cast<double>(d))))
    return false;
  // P V, past a NaN guard.
  Value p = forwardThroughReshapes(softmax.getResult());
  if (!p.use_empty()) {
    auto guard = dyn_cast<BinaryOp>(*p.getUsers().begin());
    if (guard && guard.getFn() == BinaryFn::unless_nan && guard.getLhs() == p &&
        guard.getRhs() == p && llvm::all_of(p.getUsers(), [&](Operation *u) {
          return u == guard.getOperation();
        }))
      p = forwardThroughReshapes(guard.getResult());
  }
  auto pv = dyn_cast_or_null<MatmulOp>(onlyUser(p));
  if (!pv || pv.getLhs() != p || pv.getTransposeLhs() || pv.getTransposeRhs())
    return false;
  Value v = headsOf(pv.getRhs(), {0, 2, 1, 3}, hv);
  if (!v || hv != hq || typeOf(v) != qType || typeOf(k) != qType)
    return false;
  // The heads merged back: transpose to B x T x H x D, reshape to B x T x C
  // (or to the rows, B T x C, as Hugging Face's view before c_proj).
  Value o = forwardThroughReshapes(pv.getResult());
  auto back = dyn_cast_or_null<TransposeOp>(onlyUser(o));
  if (!back || back.getPermutation() != ArrayRef<int64_t>{0, 2, 1, 3})
    return false;
  auto merged = dyn_cast_or_null<ReshapeOp>(onlyUser(back.getResult()));
  if (!merged)
    return false;
  auto mType = typeOf(merged.getResult());
  if (mType.getNumElements() != qType.getNumElements() ||
      mType.getShape().back() != qType.getShape().back())
    return false;
  b.setInsertionPoint(merged);
  Value attn = CausalAttentionOp::create(b, softmax.getLoc(), q, k, v,
                                         b.getI64IntegerAttr(hq), Value());
  if (mType != qType)
    attn = ReshapeOp::create(b, softmax.getLoc(), mType, attn);
  merged.getResult().replaceAllUsesWith(attn);
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
