//===- Passes.td - gptc dialect passes ---------------------*- tablegen -*-===//
//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_DIALECT_GPTC_TRANSFORMS_PASSES_TD
#define GPTC_DIALECT_GPTC_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def GptcModelStatsPass
    : InterfacePass<"gptc-model-stats", "mlir::FunctionOpInterface"> {
  let summary = "Report parameter count and FLOPs of a model function";
  let description = [{
    Counts, for every function whose arguments carry `gptc.param`, the
    parameters (the elements of those arguments), the forward FLOPs (the sum
    of `CostModelOpInterface::getFlopCount` over its ops) and the tokens of
    one batch (the elements of the argument marked `gptc.input = #gptc.input<tokens>`),
    and reports them as a remark on the function:

    ```
    remark: gptc.model: 124439808 parameters in 148 tensors; forward
            1.05e+12 FLOPs for 4096 tokens
    ```
    With `annotate`, the same figures are also attached to the function as
    `gptc.num_params`, `gptc.forward_flops` and `gptc.tokens` attributes so
    later passes and tests can read them. The IR is otherwise unchanged.
  }];
  let options = [
    Option<"annotate", "annotate", "bool", "false",
           "Attach the figures to the function as attributes">,
    Option<"remarks", "remarks", "bool", "true",
           "Emit the figures as a remark on the function">
  ];
}

def GptcVerifyModelPass : Pass<"gptc-verify-model", "mlir::ModuleOp"> {
  let summary = "Check the calling convention of a gptc model module";
  let description = [{
    A model module holds one `func.func @forward` whose arguments are the
    parameters (each with a unique `gptc.param` name), then the `tokens`
    and `labels` inputs (`gptc.input`), and which returns the scalar loss.
    Later passes (autodiff, sharding) rely on this convention; this pass
    states it in one place and reports each violation at the argument or
    op that breaks it.
  }];
}

def GptcAutodiffPass : Pass<"gptc-autodiff", "mlir::ModuleOp"> {
  let summary = "Build a model's forward-backward function by reverse-mode differentiation";
  let description = [{
    Clones the model function (`@forward` by default) into
    `@forward_backward`, which returns the loss and then the gradient of
    every parameter (`gptc.param` argument), in argument order:

    ```mlir
    func.func @forward_backward(%w: tensor<8x4xf32> {gptc.param = "w"}, ...)
        -> (tensor<f32> {gptc.output = #gptc.output<loss>},
            tensor<8x4xf32> {gptc.grad = "w"})
    ```
    The backward ops follow the forward ones in reverse order, seeded with
    `d loss = 1`; each op's rule comes from `AutodiffOpInterface` and
    gradients reaching a value along several uses are summed with
    `gptc.add`. The forward values the backward ops use are the activations
    the step keeps. A parameter that does not reach the loss gets a zero
    gradient. The forward function is left unchanged, for evaluation.

    Under `gptc.precision = #gptc.precision<fp16>` (dynamic loss scaling)
    the seed is a new last argument `{gptc.input = #gptc.input<loss_scale>}`: the gradients are
    those of the loss times the scale, so that small fp16 gradients do not
    flush to zero. The loss returned is the unscaled one. A function that
    takes cotangents (`#gptc.input<cotangent>`, a pipeline chunk's
    vector-Jacobian objective) is seeded with 1: its cotangents carry the
    scale already.
  }];
  let options = [
    Option<"function", "function", "std::string", "\"forward\"",
           "The function to differentiate">,
    Option<"output", "output", "std::string", "\"forward_backward\"",
           "The name of the function to create">
  ];
  let dependentDialects = ["::mlir::gptc::GptcDialect", "::mlir::func::FuncDialect"];
}

def GptcOptimizerPass : Pass<"gptc-optimizer", "mlir::ModuleOp"> {
  let summary = "Build the training step: gradients, clipping, schedule and AdamW";
  let description = [{
    From `@forward_backward` (see gptc-autodiff) and the module's
    `gptc.optimizer` settings, builds

    ```mlir
    func.func @train_step(%params..., %m..., %v..., %step: tensor<i32>,
                          %tokens, %labels)
        -> (%params'..., %m'..., %v'..., %loss, %grad_norm, %lr)
    ```
    whose body is the forward-backward computation followed by
    `gptc.global_norm` of the gradients, `gptc.clip_scale`,
    `gptc.learning_rate` at `step` and one `gptc.adamw` per parameter.
    Weight decay applies to parameters of rank >= 2, except the embedding
    tables (`gptc.embedding_table`) unless `decay_embeddings` is set; each
    `gptc.adamw` shows the decay it uses. Moments are named
    `gptc.state = #gptc.state<m "<param>">` / `#gptc.state<v "<param>">`
    (in the artifact, `m:<param>` and `v:<param>`).

    Gradient accumulation (`accumulation_steps` = A > 1 in the settings):
    the data inputs hold A microbatches stacked on dimension 0; the step
    splits them (`gptc.split`), counts the step's real tokens once
    (`gptc.count_tokens`), runs the forward-backward computation once per
    microbatch with that count as the cross-entropy's normalizer, and adds
    the losses and gradients: the sum is the mean over the whole step's
    tokens, however the padding falls. Each data input records the step's
    batch (`gptc.batch = {rows, microbatches}`) for the runtime, which
    lays out and pads the rows.

    fp16 (`gptc.precision`): dynamic loss scaling. The step takes the
    scaler's state after `step` (`loss_scale`, `loss_scale_good_steps`,
    `optimizer_updates`; `initial_loss_scale` and
    `loss_scale_growth_interval` in the settings) and feeds the scale to
    the backward's seed; `gptc.found_inf` of the scaled norm, all-reduced
    with `max` over the grid, is the overflow flag that makes every
    `gptc.adamw` skip; `gptc.clip_scale ... loss_scale` unscales;
    `gptc.loss_scale_update` gives the next state, returned after `lr`
    with the flag (`gptc.output = #gptc.output<overflow>`).

    `gptc.nan_policy = #gptc.nan_policy<skip>` on the module (the
    description's `nan_policy: SKIP`): without a loss scaler too, `gptc.found_inf` of the
    gradient norm, all-reduced with `max` over the grid, makes every
    `gptc.adamw` skip, and the flag is returned after `lr`
    (`gptc.output = #gptc.output<overflow>`); the runtime reports the skipped step.
  }];
  let dependentDialects = ["::mlir::gptc::GptcDialect", "::mlir::func::FuncDialect",
                           "::mlir::shard::ShardDialect"];
}

def GptcPipelineSplitPass : Pass<"gptc-pipeline-split", "mlir::ModuleOp"> {
  let summary = "Cut @forward into pipeline chunks with their backward objectives";
  let description = [{
    Cuts the model function `@forward` into `boundaries.size() + 1`
    chunks: chunk c holds the ops of layers [boundaries[c-1],
    boundaries[c]) (an op's layer is read from its `h.<i>.` name
    location), the embedding's ops before the first layer in chunk 0, and
    the final norm, head and loss in the last chunk; an op without a layer
    joins the latest chunk of its operands. Each chunk becomes

    ```mlir
    func.func @chunk<c>(%params..., %data..., %in...) -> (%out...)
    ```
    taking the parameters and data inputs it uses and the values that
    cross its incoming boundary (`gptc.pipeline_in = k`, also marked as
    `gptc.param = "pipeline.in.<k>"` so that autodiff differentiates with
    respect to them), and returning the values that cross its outgoing
    boundary (`gptc.output = #gptc.output<boundary k>`; the last chunk:
    the loss). For every chunk but the last,
    `@chunk<c>_objective` takes a cotangent per output
    (`gptc.input = #gptc.input<cotangent k>`) and returns the sum of the
    outputs' dot products with them, a scalar whose gradient is the
    chunk's vector-Jacobian product: gptc-autodiff on it (or on the last
    chunk) gives the backward a pipeline stage runs. A tied parameter
    (`wte`) is an argument of every chunk that uses it; the runtime sums
    its gradients. `@forward` is left as it was.
  }];
  let options = [
    ListOption<"boundaries", "boundaries", "int64_t",
               "The first layer of each chunk after the first">
  ];
  let dependentDialects = ["::mlir::gptc::GptcDialect", "::mlir::func::FuncDialect"];
}

def GptcSplitBackwardPass : Pass<"gptc-split-backward", "mlir::ModuleOp"> {
  let summary = "Split each pipeline chunk's backward into its input-gradient and weight-gradient halves";
  let description = [{
    For the zero-bubble pipeline schedules (zb-h1). Runs after gptc-autodiff
    on the chunks: each `@chunk<c>_backward` becomes

    ```mlir
    func.func @chunk<c>_backward_input(...) -> (%loss?, %in_grads..., %saved...)
    func.func @chunk<c>_backward_weight(..., %saved...) -> (%param_grads...)
    ```
    The input half computes what the previous stage waits for: the
    gradients of the chunk's received values (`gptc.pipeline_in`) and, on
    the last chunk (the one no cotangent seeds), the loss. It is the
    backward's ops those results depend on (the forward's recomputation
    and the chain of input gradients). The weight half is every other op
    the parameters' gradients need (the weight-gradient GEMMs, bias and
    norm-weight reductions, embedding gradients). A value the input half
    computes and the weight half reads is returned as
    `gptc.output = #gptc.output<saved k>` and taken as
    `gptc.input = #gptc.input<saved k>`, unless its op has no operands (a
    constant, an iota), which the weight half computes again. Each half
    takes only the arguments it uses, with their attributes; a chunk
    whose input half has nothing to return (the first: no received value)
    gets an empty one. The two halves compute exactly the backward's
    values: the same ops on the same operands. The original backward is
    erased.
  }];
  let dependentDialects = ["::mlir::gptc::GptcDialect", "::mlir::func::FuncDialect"];
}

def GptcPipelineSchedulePass : Pass<"gptc-pipeline-schedule", "mlir::ModuleOp"> {
  let summary = "Each pipeline stage's program as a function: its chunks' calls, sends and receives in schedule order";
  let description = [{
    Runs after gptc-pipeline-split and gptc-autodiff (it needs `@chunk<c>`
    and `@chunk<c>_backward` for every chunk; zb-h1: `@chunk<c>_backward_input`
    and `@chunk<c>_backward_weight` from gptc-split-backward). Reads the stages from the
    `shard.grid`'s axis of kind `pipeline` (`gptc.parallel`); chunk c runs
    on stage c mod p. For each stage s it adds

    ```mlir
    func.func private @stage<s>(%params..., %data...) -> (%grads..., %loss)
        attributes {gptc.pipeline_stage = s}
    ```
    whose body is the stage's program under `schedule` (gpipe, 1f1b,
    interleaved or zb-h1) over `microbatches` microbatches, fully unrolled:

    - `shard.recv` of each boundary value a chunk needs (`source` = the
      stage on the pipeline axis that sends it), and of each gradient of a
      chunk's outputs;
    - `func.call @chunk<c>` (the forward; the last chunk has none: its
      backward computes its loss) and `func.call @chunk<c>_backward` (which
      recomputes the forward) with the microbatch's data arguments; under
      zb-h1, `func.call @chunk<c>_backward_input` where the backward was
      and, later, `func.call @chunk<c>_backward_weight` with the values the
      first saved;
    - `shard.send` of each output to the next chunk's stage, and of each
      input gradient to the previous chunk's stage;
    - `gptc.add` accumulating each parameter's gradient over the
      microbatches; then `shard.all_reduce` over the pipeline axis of each
      tied parameter's gradient (every stage takes part, those that do not
      hold it with zeros), then over the data axis (if any) of every
      gradient: `shard.all_reduce`, or with ZeRO-2 (`gptc.parallel`'s
      zero stage) `shard.reduce_scatter` of dimension 0 where it divides
      by the replicas (each replica updates its slice).

    Calls, sends and receives carry `gptc.microbatch`; sends and receives
    `gptc.chunk` (the chunk that consumes the message) and `gptc.gradient`
    for gradients; data arguments `gptc.input` and `gptc.microbatch`. The
    result is the sum of the microbatches' gradients and losses; the update
    (1/(m x replicas), the norm, AdamW) is @train_step's and runs in the
    runtime. The programs are then checked as gptc-pipeline-verify does.
  }];
  let options = [
    Option<"schedule", "schedule", "::mlir::gptc::PipelineScheduleKind",
           "::mlir::gptc::PipelineScheduleKind::OneFOneB",
           "The schedule (gpipe, 1f1b, interleaved or zb-h1)", [{::llvm::cl::values(
             clEnumValN(::mlir::gptc::PipelineScheduleKind::GPipe, "gpipe",
                        "every microbatch's forward, then the backwards"),
             clEnumValN(::mlir::gptc::PipelineScheduleKind::OneFOneB, "1f1b",
                        "one forward, one backward (the default)"),
             clEnumValN(::mlir::gptc::PipelineScheduleKind::Interleaved,
                        "interleaved", "1F1B over virtual stages"),
             clEnumValN(::mlir::gptc::PipelineScheduleKind::ZeroBubbleH1,
                        "zb-h1", "zero bubble: each backward split in two"))}]>,
    Option<"microbatches", "microbatches", "int64_t", "1",
           "Microbatches per step">
  ];
  let dependentDialects = ["::mlir::gptc::GptcDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::shard::ShardDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
}

def GptcPipelineVerifyPass : Pass<"gptc-pipeline-verify", "mlir::ModuleOp"> {
  let summary = "Check that the stage functions' sends and receives cannot deadlock";
  let description = [{
    Reads each `@stage<s>` function (gptc-pipeline-schedule's form) as a
    program of forwards, backwards, sends and receives and simulates it
    with buffered sends: every receive must be matched by a send of the
    same microbatch, chunk and kind from the stage it names, and the
    programs must finish. A receive that waits forever is reported at its
    location with the chain of waits ("stage 0 waits for the gradient of
    microbatch 0 from stage 1, which waits for the activation of
    microbatch 0 from stage 0 (a cycle)"). Changes nothing.
  }];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def GptcVerifyCollectivesPass : Pass<"gptc-verify-collectives", "mlir::ModuleOp"> {
  let summary = "Prove that every group of ranks issues the same collectives in the same order";
  let description = [{
    For a module with a device mesh (`shard.grid @mesh`), proves that the
    ranks' programs cannot disagree on a collective: every group of ranks
    that meets in a collective (the ranks that differ only in its grid
    axes) issues the same collectives, in the same order, with the same
    op, axes, operand and result types and reduction, and no rank waits
    in a collective or a receive forever.

    The ranks' programs are the pipeline's `@stage<s>` functions (rank ->
    its stage's, by its coordinate on the pipeline axis) or, without a
    pipeline, the one step every rank runs (`@train_step`, else every
    public function). Each is read as its sequence of communication in
    program order, calls (the chunks) and regions (the accumulation loop)
    followed. A collective whose group lies within one stage (its axes
    exclude the pipeline axis) is issued by ranks running the same
    program at the same point of it, and agrees by construction; the
    stages are then simulated together, sends buffered, receives matched
    by peer, microbatch, chunk and direction, and a collective over the
    pipeline axis a barrier of the stages that compares their ops. A
    mismatch is an error at one rank's op naming the other's; a wait that
    never ends is an error naming what every stage waits in. Changes
    nothing; `gptc train` and every `--emit` run it on each compiled plan.
  }];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def GptcRecomputePass : Pass<"gptc-recompute", "mlir::ModuleOp"> {
  let summary = "Recomputes activations in the backward instead of keeping "
                "them";
  let description = [{
    Rewrites a function gptc-autodiff wrote (`@forward_backward`: the
    forward up to the loss, then the backward) so that forward values the
    backward reads are recomputed just before their first use in the
    backward instead of being kept from the forward. The mode is the
    option, or the module's `gptc.recompute` (the description's
    `parallel { recompute: ... }`, `gptc train --recompute`):

    - **none**: nothing changes.
    - **selective**: layer norms, GELUs and casts of activations (and
      chains of them: a norm and its bf16 cast) whose inputs the backward
      keeps anyway (a norm's input for its gradient, GELU's
      pre-activation). Nothing is kept longer than before; the cost is a
      few memory-bound passes. (gptc's attention already recomputes its
      probabilities in its backward, what Megatron's selective
      recomputation saves.)
    - **full**: every op of a transformer layer (by its name location,
      `h.<n>...`) except the values another layer or the head reads (the
      layer's output, its checkpoint): each layer's backward starts by
      recomputing its forward from the layer's input, one more forward
      pass in all but the last layer (its backward follows its forward at
      once, so recomputing it would lower no peak). Tensor-parallel
      collectives inside a layer are recomputed with it.

    Ops whose operands are all arguments (a parameter's cast) are never
    recomputed. The clones carry `gptc.rematerialize`, so CSE does not
    merge them back into the forward's ops. The clones are the same ops on the same inputs, so the
    gradients equal those without recomputation. `gptc --emit=summary`
    reports the bytes the backward keeps under each mode.
  }];
  let options = [
    Option<"mode", "mode", "::mlir::gptc::RecomputeMode",
           "::mlir::gptc::RecomputeMode::FromModule",
           "What to recompute", [{::llvm::cl::values(
             clEnumValN(::mlir::gptc::RecomputeMode::FromModule, "module",
                        "the module's gptc.recompute, none without it (the "
                        "default)"),
             clEnumValN(::mlir::gptc::RecomputeMode::None, "none", "nothing"),
             clEnumValN(::mlir::gptc::RecomputeMode::Selective, "selective",
                        "norms and GELUs"),
             clEnumValN(::mlir::gptc::RecomputeMode::Full, "full",
                        "each layer's forward again in its backward"))}]>,
    Option<"function", "function", "std::string", "\"forward_backward\"",
           "The differentiated function to rewrite">,
  ];
}

def GptcShardingPropagationPass
    : Pass<"gptc-sharding-propagation", "mlir::ModuleOp"> {
  let summary = "Derives @forward's tensor-parallel layout from a few seeds";
  let description = [{
    Reads the module's `gptc.parallel` and `shard.grid`; with a tensor axis
    larger than 1, decides how every value of `@forward` sits on it (whole,
    or split into equal blocks along one dimension) and writes the
    decision for each layer gptc-tensor-parallel partitions:
    `gptc.tensor_parallel = #gptc.tensor_parallel<column>`, `<row>` or
    `<vocab>`.

    **Seeds** are upstream annotations on values of `@forward` (usually
    parameters), over the tensor axis only:

    ```mlir
    %s = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
    %w = shard.shard %arg2 to %s : tensor<32x32xf32>
    ```

    The pass reads and removes them. Without any, it seeds Megatron's
    layout from the graph's structure: the weight of the linear layer that
    produces each `gptc.causal_attention`'s query, the weight of the linear
    layer before each `gptc.gelu`, and the vocabulary table (the table of
    an embedding of the step's given ids, read only by lookups and heads
    that feed only `gptc.cross_entropy`), each split on dimension 0.
    A graph without annotations (from any frontend) is sharded this way.

    **Rules**, run forward and backward to a fixpoint: a `gptc.linear`
    whose weight is split on dimension 0 takes a whole input and gives an
    output split on its last dimension, its bias split too (column); split
    on dimension 1, it takes an input split on its last dimension and gives
    a whole output, its bias whole (row: the partial products are summed);
    with an unknown weight, a split input makes it row and a split output
    or bias column. `gptc.causal_attention`'s query, key, value and output
    share one layout (whole, or split by heads); `gptc.gelu` keeps its
    input's; a `gptc.embedding` table may split by vocabulary (its output
    is whole); `gptc.cross_entropy` takes logits split by vocabulary from a
    linear head. Every other op computes on whole values. What no rule
    reaches is whole, and the rules run again as checks.

    So seeding the query weight alone splits key and value (attention),
    the output projection (row), and seeding the MLP's first weight splits
    its second: Megatron's layout from two seeds per block.

    A layout two rules disagree on is an error at the op that needs the
    other layout, with a note at the op that made it: the pass does not
    insert resharding collectives (an all-gather before a whole-value op).
    Seeds on other grid axes, with halos or uneven blocks, two different
    seeds of one value, and seeds outside `@forward` are errors at the
    seed.
  }];
  let options = [
    Option<"defaultSeeds", "default-seeds", "bool", "true",
           "Without shard.shard seeds, seed Megatron's layout from the "
           "graph's structure (false: everything whole)">,
  ];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def GptcTensorParallelPass : Pass<"gptc-tensor-parallel", "mlir::ModuleOp"> {
  let summary = "Megatron tensor parallelism of @forward's transformer blocks";
  let description = [{
    Reads the module's `gptc.parallel` (the axis of kind `tensor`) and
    `shard.grid`, and rewrites `@forward` (before gptc-autodiff) into the
    computation of one tensor-parallel rank, following the
    `gptc.tensor_parallel` role gptc-sharding-propagation wrote on each
    `gptc.linear` and `gptc.embedding`:

    - **column** (query, key, value, MLP up-projection): the weight and bias
      are this rank's rows (`gptc.sharding` on the arguments, dimension 0
      split over the tensor axis), so the output holds this rank's heads or
      hidden units; the input passes through `gptc.grad_all_reduce`
      (Megatron's "f": identity forward, all-reduce of the gradient);
    - between them, `gptc.causal_attention` runs this rank's heads
      (`heads / P`) and `gptc.gelu` its units;
    - **row** (attention and MLP output projections): the weight is this
      rank's columns (dimension 1 split), the partial products are summed
      by `shard.all_reduce` (Megatron's "g": its gradient is the identity),
      and the replicated bias is added after the sum.

    One all-reduce forward and one backward per column/row pair.

    - **vocab** (the token embedding and the language-model head): the
      table holds a block of the vocabulary (padded by the importer to a
      multiple of P); the embedding looks up the ids of its block
      (`offset` from `gptc.shard_offset`, zeros for other ranks' ids) and an
      all-reduce completes the rows; the head computes the block's logits
      from the replicated hidden state ("f"); the cross-entropy becomes
      `gptc.row_max` + a max all-reduce, `gptc.vocab_parallel_partials` +
      two sum all-reduces, and `gptc.vocab_parallel_loss`.
    - **sequence parallelism** (`sequence_parallel`): between the
      tensor-parallel regions the residual stream is this rank's shard of
      the sequence; each "g" becomes `shard.reduce_scatter` along the
      sequence and each "f" `shard.all_gather`, the position embedding is
      cut by `shard.all_slice`, and norm weights and row-parallel biases
      pass through `gptc.grad_all_reduce` (each rank sees one shard).

    Norms and the position embedding stay replicated. An op it cannot run
    on a split activation is an error at the op; heads, units or a
    sequence that do not divide are reported earlier, by the description's
    validation. A module without a tensor axis of size > 1 is unchanged.
  }];
  let dependentDialects = ["::mlir::gptc::GptcDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::shard::ShardDialect"];
}

def GptcContextParallelPass : Pass<"gptc-context-parallel", "mlir::ModuleOp"> {
  let summary = "Context parallelism: @forward on this rank's part of the sequence";
  let description = [{
    Reads the module's `gptc.parallel` (the axis of kind `context`, size P)
    and `shard.grid`, and rewrites `@forward` (after gptc-tensor-parallel,
    before gptc-autodiff) into the computation of one context-parallel
    rank:

    - the sequence (dimension 1 of the token and label inputs, length T)
      is cut into 2P chunks and rank r keeps chunks r and 2P-1-r, the
      load-balanced split for causal attention (each rank's queries see
      the same number of keys in total): `gptc.split`, `gptc.concat` into
      the ranks' order, then `shard.all_slice` over the context axis. The
      position ids (`gptc.iota` along the sequence) are cut the same way,
      so the position embedding looks up this rank's positions;
    - every token-wise op (embeddings, linear layers, norms, GELU, adds,
      casts, the loss and tensor parallelism's collectives) runs on the
      rank's 2T/2P tokens;
    - `gptc.causal_attention` becomes ring attention (the default): P
      steps of `gptc.attention_block`, step j attending the keys and
      values of rank r - j at their positions, which the previous rank
      passed on (`shard.shift` by one along the context axis, with rotate,
      the keys' positions passed with them); each step's output and
      log-sum-exp are merged into the running ones by
      `gptc.attention_merge` (the online softmax across blocks). The next
      block is passed before the current step's attention. Its gradient,
      from the rules of these ops, shifts the passed blocks' key and value
      gradients back (offset -1) to the ranks that hold those tokens;
    - with `context_all_gather` in `gptc.parallel` (`--context-attention=
      all-gather`), attention instead gathers the keys and values of the
      whole sequence (`shard.all_gather` over the context axis, then
      `gptc.split`/`gptc.concat` back into sequence order) and attends
      from the rank's queries, whose positions in the sequence it takes
      as `positions`. Its gradient reduce-scatters the keys' and values'
      gradients back to their ranks (the rule of `shard.all_gather`).

    The loss is then this rank's part of the mean; gptc-data-parallel sums
    it, the token count and the parameters' gradients over the data and
    context axes together (and shards ZeRO's state over both). An op that
    is not token-wise on a part of the sequence is an error at the op; a
    sequence that 2P does not divide is an error. A module without a
    context axis of size > 1 is unchanged.
  }];
  let dependentDialects = ["::mlir::gptc::GptcDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::shard::ShardDialect"];
}

def GptcDataParallelPass : Pass<"gptc-data-parallel", "mlir::ModuleOp"> {
  let summary = "Shard @train_step's batch over the data axis: weighted gradient all-reduce and ZeRO 1-3";
  let description = [{
    Reads the module's `gptc.parallel` (the axis of kind `data` and the
    ZeRO stage) and the `shard.grid`, and turns the one-device
    `@train_step` (built by gptc-optimizer) into the program every
    data-parallel rank runs:

    - the data inputs become this rank's rows of the step's batch
      (`gptc.batch` gains the grid axes; the runtime distributes rows as
      evenly as possible and pads with the ignored label);
    - the step's token count is summed over the data axis
      (`shard.all_reduce`) and normalizes every rank's cross-entropy, so
      that each rank's gradient is weighted by its share of the real
      tokens and the sum of the ranks' gradients is the full-batch
      gradient, even when ranks hold different numbers of tokens;
    - with a context axis, `@forward` (evaluation) normalizes its
      cross-entropy by its whole labels' `gptc.count_tokens` and sums its
      loss over the context axis, so that every rank has the one-device
      mean;
    - the loss is summed over the data axis; gradients are synchronized
      once per step, after accumulation:
      - stage 0: `shard.all_reduce` of every gradient;
      - stage 1: the same, then each rank updates its slice of every
        parameter (`shard.all_slice` of parameter and gradient, moments
        held as slices) and `shard.all_gather` rebuilds the parameter;
      - stage 2: `shard.reduce_scatter` instead of the all-reduce, so
        that each rank only ever holds its slice of the summed gradient;
        the gradient norm adds the ranks' sums of squares
        (`gptc.sum_squares`, `shard.all_reduce`, `gptc.sqrt`);
      - stage 3: parameters are held as slices as well: an
        `shard.all_gather` before the forward computation rebuilds each,
        and another (marked `gptc.rematerialize`) before its backward uses,
        so the whole copy is released in between; the updated slice is the
        step's result. A phase that reads the parameter only through
        mixed precision's 16-bit `gptc.cast` casts the slice and gathers
        the 16-bit slices instead (half the bytes; the cast is exact
        either way).

    With gradient accumulation (`gptc.accumulate`), the gradients leave
    the microbatch loop whole and are synchronized once per step; with
    `reduce-each-microbatch` (ZeRO 2 and 3), each microbatch's gradient is
    reduce-scattered inside the loop and the loop sums slices, so that no
    whole gradient outlives its microbatch.

    Slices split dimension 0 of a tensor over the data axis; a parameter
    whose dimension 0 does not divide stays replicated (reported as a
    remark). Every sharded argument and result records its slicing as
    `gptc.sharding = {shape, axes}` (global shape, grid axes per
    dimension). A module without a data axis of size > 1 is unchanged.
  }];
  let options = [
    Option<"tokenWeighting", "token-weighting", "bool", "true",
           "Weight each rank by its share of the step's real tokens. "
           "false: the plain mean of the ranks' means (PyTorch DDP's "
           "average), which differs from the full-batch gradient when "
           "ranks hold different numbers of tokens; kept to show that "
           "difference in tests">,
    Option<"reduceEachMicrobatch", "reduce-each-microbatch", "bool",
           "false",
           "ZeRO 2 and 3 with gradient accumulation: reduce-scatter each "
           "microbatch's gradients inside the loop and sum the slices "
           "(DeepSpeed's and FSDP's default: the slice's memory, the "
           "reduce-scatter's bytes once per microbatch) instead of summing "
           "whole gradients over the microbatches and reduce-scattering "
           "once per step (FSDP's no_sync)">,
  ];
  let dependentDialects = ["::mlir::gptc::GptcDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::shard::ShardDialect"];
}

def GptcBucketAllReducesPass
    : InterfacePass<"gptc-bucket-all-reduces", "mlir::FunctionOpInterface"> {
  let summary = "Combine consecutive collectives into buckets (all-reduces, ZeRO's gathers and reduce-scatters)";
  let description = [{
    Walks each block (not a `gptc.kernel`'s) in program order and gathers
    collectives of one kind with the same grid, grid axes and element type
    into a bucket of at most `bucket-bytes` bytes (whole tensors): sum
    `shard.all_reduce` ops whose result type is their operand's,
    `shard.all_gather` ops along dimension 0, and sum `shard.reduce_scatter`
    ops along dimension 0. One bucket is open per key at a time (ZeRO-3's
    backward interleaves gathers and reduce-scatters); a bucket closes when
    the next member would not fit or before the first op that uses one of
    its results. A bucket of two or more becomes one
    `gptc.bucket_all_reduce`, `gptc.bucket_all_gather` or
    `gptc.bucket_reduce_scatter` at the place of its last member: every
    operand is ready there, and no
    user of a result comes before it, so the program computes the same
    values; one tensor larger than the limit is a bucket of its own and
    stays a `shard.all_reduce`. After `gptc-data-parallel`, whose gradient
    all-reduces follow each gradient's computation in the backward pass,
    this is PyTorch DDP's bucketing decided at compile time: one collective
    per bucket, each issued as soon as its last gradient is computed, so
    that on a GPU it overlaps the gradients still to come. Tensor
    parallelism's activation all-reduces, used right away, stay single.
    ZeRO's parameter gathers (ZeRO-1 after the update, ZeRO-3 before each
    phase) and gradient reduce-scatters travel the same way: FSDP's and
    DeepSpeed's buckets.

    Gathers whose operand is there from the block's start, or is a cast of
    such a value that only the gather reads (ZeRO-3's parameter gathers,
    which `gptc-data-parallel` places just before each phase's first use,
    of the slices or of their 16-bit casts; the cast moves with its
    gather) are scheduled first (`prefetch`, on by default): bucketed in
    the order of their first uses, each element type in buckets of its
    own, and each bucket moved to just before the first reader of the
    previous bucket of its type, so that the gathered
    copies of at most two buckets wait at a time (not the whole model) and
    the next bucket's gather overlaps the current one's computation on a
    GPU, as FSDP's prefetch does. `bucket-bytes=0` makes no buckets (with
    `prefetch`, each such gather still moves one gather ahead).

    ```mlir
    %a = shard.all_reduce %dw on @mesh grid_axes = [0] : tensor<64x256xf32> -> tensor<64x256xf32>
    %b = shard.all_reduce %db on @mesh grid_axes = [0] : tensor<64xf32> -> tensor<64xf32>
    // becomes
    %g:2 = gptc.bucket_all_reduce %dw, %db on @mesh grid_axes = [0] : tensor<64x256xf32>, tensor<64xf32>
    ```
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", "26214400",
           "Largest bucket in bytes (default 25 MiB, PyTorch DDP's); 0: no "
           "buckets">,
    Option<"prefetch", "prefetch", "bool", "true",
           "Issue each bucket of parameter gathers one bucket ahead of its "
           "first use (ZeRO-3)">
  ];
  let dependentDialects = ["::mlir::gptc::GptcDialect"];
}

def GptcPlanBuffersPass
    : InterfacePass<"gptc-plan-buffers", "mlir::FunctionOpInterface"> {
  let summary = "Place every intermediate value in one arena, reusing memory by liveness";
  let description = [{
    A value lives from the op that defines it to its last use (to the end
    for returned values). Values are placed, largest first, at the lowest
    `alignment`-aligned offset that overlaps no placed value alive at the
    same time (greedy best-fit on the interval graph). The plan is part of
    the IR: each op gets `gptc.offsets` (one byte offset per result) and the
    function `gptc.arena_bytes`; the exporter copies both into the runtime
    artifact. Function arguments are bound by the caller and not planned.
    A reshape is a view: its result shares its operand's offset. The
    values inside a `gptc.kernel` never reach memory and are not planned.

    ```mlir
    %0 = gptc.gelu %x {gptc.offsets = array<i64: 0>} : tensor<4x8xf32>
    %1 = gptc.add %0, %x {gptc.offsets = array<i64: 128>} : tensor<4x8xf32>
    ```
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", "64",
           "Byte alignment of every offset">
  ];
}

def GptcMixedPrecisionPass : Pass<"gptc-mixed-precision", "mlir::ModuleOp"> {
  let summary = "Run the forward graph's GEMMs and attention in bf16 or fp16 with fp32 everywhere else";
  let description = [{
    Driven by the module's `gptc.precision` (the description's
    `precision`): with `bf16`, every f32 `gptc.linear`, `gptc.matmul` and
    `gptc.causal_attention` of `@forward` takes bf16 copies of its
    operands (weights included) and gives a bf16 result that is cast back
    to f32 (autocast's policy); the products accumulate in fp32 (oneDNN on
    the CPU, tensor cores on the GPU). Ring attention's steps
    (`gptc.attention_block`) take bf16 copies of the queries, keys and
    values and give fp32 outputs and log-sum-exps, which the merges
    accumulate in fp32. Everything else (embeddings, layer
    norm, softmax, the loss, residual adds) stays fp32, and the parameters
    stay fp32 master weights. A projection's bf16 result feeds attention
    directly once canonicalization folds the cast to f32 and back. Runs before `gptc-autodiff`, so
    the backward GEMMs are bf16 too (the cast's gradient is a cast back)
    and every parameter's gradient, the clipping and AdamW are fp32: the
    update is on the master copy. `fp16` places the casts alike with f16
    (its loss scaling is built by `gptc-autodiff` and `gptc-optimizer`);
    with `fp32` the module is unchanged.

    ```mlir
    %y = gptc.linear %x, %w, %b : ... -> tensor<8x64xf32>
    // becomes
    %xh = gptc.cast %x : tensor<8x32xf32> -> tensor<8x32xbf16>
    %wh = gptc.cast %w : tensor<64x32xf32> -> tensor<64x32xbf16>
    %bh = gptc.cast %b : tensor<64xf32> -> tensor<64xbf16>
    %yh = gptc.linear %xh, %wh, %bh : ... -> tensor<8x64xbf16>
    %y = gptc.cast %yh : tensor<8x64xbf16> -> tensor<8x64xf32>
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", "\"forward\"",
           "The function whose GEMMs run in 16 bits">
  ];
}

def GptcHoistInvariantsPass
    : InterfacePass<"gptc-hoist-invariants", "mlir::FunctionOpInterface"> {
  let summary = "Compute what every microbatch shares once, before the loop";
  let description = [{
    An op of a `gptc.accumulate` body (not of regions nested in it) that
    reads only values defined outside the loop computes the same value in
    every microbatch: mixed precision's casts of the parameters to 16
    bits, their reshapes, ZeRO-3's casts of a rank's slices before their
    gathers. Such an op moves before the `gptc.accumulate`, so that it
    runs once a step instead of once a microbatch, when it is a gptc op
    free of memory effects and regions whose result has no more elements
    than its largest operand: a value that grows (a broadcast, the
    positions' embedding of an iota) stays in the loop, where it is
    cheaper to recompute than to keep. Its value then stays alive for the
    whole loop (the step's buffers, not the microbatch's). Runs after
    gptc-data-parallel, before kernels form.

    ```mlir
    %loss, %dw = gptc.accumulate %tokens microbatches 8 ... {
    ^bb0(%t: tensor<8x64xi32>):
      %w16 = gptc.cast %w : tensor<64x64xf32> -> tensor<64x64xbf16>
      ...
    }
    // becomes
    %w16 = gptc.cast %w : tensor<64x64xf32> -> tensor<64x64xbf16>
    %loss, %dw = gptc.accumulate %tokens microbatches 8 ... {
    ^bb0(%t: tensor<8x64xi32>):
      ...
    }
    ```
  }];
}

def GptcFuseOptimizerPass
    : InterfacePass<"gptc-fuse-optimizer", "mlir::FunctionOpInterface"> {
  let summary = "Merge the step's AdamW updates into one multi-tensor kernel";
  let description = [{
    The `gptc.adamw` ops of a block that share the learning rate, step,
    clipping scale, skip flag, betas and eps become one
    `gptc.multi_adamw` (weight decay per parameter), placed where the last
    of them was; an update whose results are used before that point stays
    as it is. The runtime then runs the whole optimizer step as one kernel
    (one parallel region over every parameter, balanced by elements)
    instead of one kernel per parameter. Runs after gptc-data-parallel,
    so ZeRO's sliced updates are merged too.

    ```mlir
    %w1, %mw1, %vw1 = gptc.adamw %w, %gw, %mw, %vw lr %lr step %t scale %s
        beta1 0.9 beta2 0.95 eps 1.0e-08 decay 0.1 : tensor<8x4xf32>
    %b1, %mb1, %vb1 = gptc.adamw %b, %gb, %mb, %vb lr %lr step %t scale %s
        beta1 0.9 beta2 0.95 eps 1.0e-08 decay 0.0 : tensor<4xf32>
    // becomes
    %r:6 = gptc.multi_adamw (%w, %b) grads (%gw, %gb) m (%mw, %mb)
        v (%vw, %vb) lr %lr step %t scale %s beta1 0.9 beta2 0.95
        eps 1.0e-08 decays [0.1, 0.0] : tensor<8x4xf32>, tensor<4xf32>
    ```
  }];
}

def GptcFuseGemmEpiloguesPass
    : InterfacePass<"gptc-fuse-gemm-epilogues", "mlir::FunctionOpInterface"> {
  let summary = "Fold GELU, its gradient and bias gradients into GEMM calls";
  let description = [{
    Moves the elementwise work next to a GEMM into a `gptc.fused_gemm`
    region with it, where the GEMM library does it in its epilogue
    (cuBLASLt's GELU_AUX_BIAS, DGELU_BGRAD and BGRADB, as Megatron and
    Transformer Engine call them) instead of a kernel of its own that
    reads the product back from memory. In each block (not a
    `gptc.kernel`'s), in this order:

    1. `gelu_aux`: a `gptc.linear` whose result feeds a `gptc.gelu` (through
       an exact cast to f32 and a cast back, under mixed precision, where
       the gelu has no other use). The fused op yields the activation and
       the linear's result, which the backward pass reads: stored in the
       product's 16-bit type where the unfused program kept an f32 copy.
    2. `dgelu` / `dgelu_bgrad`: a 2-D `gptc.matmul` whose only use is,
       through a reshape and casts, the gradient operand of a
       `gptc.gelu_grad`; with the bias gradient when a `gptc.reduce_sum`
       over every dimension but the last (of the gradient, or of its 2-D
       view) reads the result.
    3. `bgrad`: a 2-D `gptc.matmul transpose_lhs` (a weight gradient,
       `dW = dY^T X`) and a `gptc.reduce_sum [0]` of the same `dY` in the
       same block (its bias gradient).

    Every fused value is computed by the same ops as before (the region
    holds them), so the program's arithmetic is unchanged; where it runs
    is the target's choice. Run after autodiff, recomputation and
    canonicalization, before `gptc-form-kernels` (which leaves the regions
    alone).

    ```mlir
    %h = gptc.linear %x, %w, %b : ... -> tensor<1024x256xf32>
    %a = gptc.gelu %h : tensor<1024x256xf32>
    // becomes
    %a, %h = gptc.fused_gemm gelu_aux (%x, %w, %b) : (...) -> (...) {
      ...
    }
    ```
  }];
}

def GptcFormKernelsPass
    : InterfacePass<"gptc-form-kernels", "mlir::FunctionOpInterface"> {
  let summary = "Group the ops code generation lowers into gptc.kernel regions";
  let description = [{
    Every op with a lowering to linalg (`hasLinalgLowering`: today the
    elementwise family add, gelu, gelu_grad and cast) goes into a
    `gptc.kernel`; an op joins the kernel of one of its producers when
    that keeps the program acyclic (every use of the kernel's values
    outside it comes after the op), so producer-consumer chains become one
    kernel whose intermediate values never reach memory. The kernels of
    its other producers merge into that one under the same condition,
    where the move holds no more bytes alive until the op (their inputs
    against their values the op reads: a sum of casts from bf16 merges, a
    column sum of a large gradient does not). Kernels are
    named `<function>_k<N>_<ops>`; blocks of `gptc.accumulate` regions
    are grouped as well. GEMMs, attention, the row reductions, the
    optimizer and collectives stay library calls of the runtime.

    With `target=cuda` the kernels also take every other op that lowers
    to linalg and that the GPU target maps (row reductions, the loss, the
    optimizer, data movement, scalar arithmetic): everything but the
    GEMMs (for cuBLASLt), attention (for cuDNN or a flash kernel), the
    embedding's scatter-add gradient (atomics), reshapes (views) and the
    collectives.

    ```mlir
    %s = gptc.add %a, %b : tensor<8x64xf32>
    %g = gptc.gelu %s : tensor<8x64xf32>
    // becomes
    %g = gptc.kernel "f_k0_add_gelu" (%a, %b) : (...) -> tensor<8x64xf32> {
    ^bb0(%x: tensor<8x64xf32>, %y: tensor<8x64xf32>):
      %0 = gptc.add %x, %y : tensor<8x64xf32>
      %1 = gptc.gelu %0 : tensor<8x64xf32>
      gptc.yield %1 : tensor<8x64xf32>
    }
    ```
  }];
  let options = [
    Option<"target", "target", "::mlir::gptc::KernelTarget",
           /*default=*/"::mlir::gptc::KernelTarget::Cpu",
           "The target whose code generation the kernels are for",
           [{::llvm::cl::values(
               clEnumValN(::mlir::gptc::KernelTarget::Cpu, "cpu",
                          "elementwise chains"),
               clEnumValN(::mlir::gptc::KernelTarget::Cuda, "cuda",
                          "every op the GPU target maps"))}]>
  ];
}

def GptcOutlineKernelsPass : Pass<"gptc-outline-kernels", "mlir::ModuleOp"> {
  let summary = "Copy each gptc.kernel region into a function of a kernel module";
  let description = [{
    Appends `builtin.module @gptc_kernels` holding one `func.func` per
    `gptc.kernel` of the module, named after the kernel, whose arguments
    are the kernel's operands and whose results are what its region
    yields. That module is what the CPU target compiles
    (`gptc-kernel-lowering-pipeline`); the kernels in the program are left
    as they are, so the program still says what every kernel computes.

    With `share`, kernels whose bodies are the same (operand, result and
    value types, ops and their attributes, locations aside) get one
    function, the first such kernel's: every layer's copy of a kernel is
    compiled once. `kernelFunctionNames` says which function each kernel
    runs; the artifact's exporter writes it as the kernel's symbol.
  }];
  let options = [
    Option<"share", "share", "bool", /*default=*/"false",
           "One function for kernels with the same body, named after the "
           "first">
  ];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

#endif // GPTC_DIALECT_GPTC_TRANSFORMS_PASSES_TD
