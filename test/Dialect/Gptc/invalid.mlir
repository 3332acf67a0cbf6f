// RUN: gptc-opt %s --split-input-file --verify-diagnostics

func.func @constant_type_mismatch() {
  // expected-error@+1 {{all of {value, result} have same type}}
  %0 = "gptc.constant"() <{value = dense<1.0> : tensor<2xf32>}> : () -> tensor<3xf32>
  return
}

// -----

func.func @constant_dynamic_shape() {
  // expected-error@+1 {{must be statically shaped tensor}}
  %0 = "gptc.constant"() <{value = dense<1.0> : tensor<2xf32>}> : () -> tensor<?xf32>
  return
}

// -----

func.func @iota_dimension_out_of_range() {
  // expected-error@+1 {{dimension 2 is out of range for a rank-2 result}}
  %0 = gptc.iota dim 2 : tensor<4x8xi32>
  return
}

// -----

func.func @iota_float_result() {
  // expected-error@+1 {{must be statically shaped tensor of signless integer values}}
  %0 = gptc.iota dim 0 : tensor<4xf32>
  return
}

// -----

func.func @iota_negative_dimension() {
  // expected-error@+1 {{whose value is non-negative}}
  %0 = gptc.iota dim -1 : tensor<4xi32>
  return
}

// -----

func.func @embedding_rank1_table(%ids: tensor<4xi32>, %t: tensor<100xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{expects a rank-2 table (vocab x width), got rank 1}}
  %0 = gptc.embedding %ids, %t : tensor<4xi32>, tensor<100xf32> -> tensor<4xf32>
  return
}

// -----

func.func @embedding_wrong_result(%ids: tensor<4xi32>, %t: tensor<100x8xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{inferred type(s) 'tensor<4x8xf32>' are incompatible with return type(s) of operation 'tensor<4x9xf32>'}}
  %0 = gptc.embedding %ids, %t : tensor<4xi32>, tensor<100x8xf32> -> tensor<4x9xf32>
  return
}

// -----

func.func @embedding_float_ids(%ids: tensor<4xf32>, %t: tensor<100x8xf32>) {
  // expected-error@+1 {{operand #0 must be statically shaped tensor of signless integer values}}
  %0 = gptc.embedding %ids, %t : tensor<4xf32>, tensor<100x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @linear_feature_mismatch(%x: tensor<4x16xf32>, %w: tensor<32x15xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{input features 16 do not match weight dimension 1 (15)}}
  %0 = gptc.linear %x, %w : tensor<4x16xf32>, tensor<32x15xf32> -> tensor<4x32xf32>
  return
}

// -----

func.func @linear_rank3_weight(%x: tensor<4x16xf32>, %w: tensor<2x32x16xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{expects a rank-2 weight (out x in), got rank 3}}
  %0 = gptc.linear %x, %w : tensor<4x16xf32>, tensor<2x32x16xf32> -> tensor<4x32xf32>
  return
}

// -----

func.func @linear_bias_size(%x: tensor<4x16xf32>, %w: tensor<32x16xf32>, %b: tensor<16xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{expects a rank-1 bias of size 32}}
  %0 = gptc.linear %x, %w, %b : tensor<4x16xf32>, tensor<32x16xf32>, tensor<16xf32> -> tensor<4x32xf32>
  return
}

// -----

func.func @linear_mixed_types(%x: tensor<4x16xf32>, %w: tensor<32x16xbf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{expects input and weight of the same element type}}
  %0 = gptc.linear %x, %w : tensor<4x16xf32>, tensor<32x16xbf16> -> tensor<4x32xf32>
  return
}

// -----

func.func @linear_bias_type(%x: tensor<4x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{expects a bias of the input's element type}}
  %0 = gptc.linear %x, %w, %b : tensor<4x16xf32>, tensor<32x16xf32>, tensor<32xf16> -> tensor<4x32xf32>
  return
}

// -----

func.func @linear_scalar_input(%x: tensor<f32>, %w: tensor<32x16xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{expects an input of rank >= 1}}
  %0 = gptc.linear %x, %w : tensor<f32>, tensor<32x16xf32> -> tensor<32xf32>
  return
}

// -----

func.func @linear_integer_input(%x: tensor<4x16xi32>, %w: tensor<32x16xf32>) {
  // expected-error@+1 {{operand #0 must be statically shaped tensor of floating-point values}}
  %0 = gptc.linear %x, %w : tensor<4x16xi32>, tensor<32x16xf32> -> tensor<4x32xf32>
  return
}

// -----

func.func @linear_dynamic(%x: tensor<?x16xf32>, %w: tensor<32x16xf32>) {
  // expected-error@+1 {{must be statically shaped tensor of floating-point values}}
  %0 = gptc.linear %x, %w : tensor<?x16xf32>, tensor<32x16xf32> -> tensor<?x32xf32>
  return
}

// -----

func.func @matmul_rank_mismatch(%a: tensor<2x4x8xf32>, %b: tensor<8x5xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{expects operands of equal rank >= 2, got 3 and 2}}
  %0 = gptc.matmul %a, %b : tensor<2x4x8xf32>, tensor<8x5xf32> -> tensor<2x4x5xf32>
  return
}

// -----

func.func @matmul_batch_mismatch(%a: tensor<2x4x8xf32>, %b: tensor<3x8x5xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{expects equal batch dimensions}}
  %0 = gptc.matmul %a, %b : tensor<2x4x8xf32>, tensor<3x8x5xf32> -> tensor<2x4x5xf32>
  return
}

// -----

func.func @matmul_contraction_mismatch(%a: tensor<4x8xf32>, %b: tensor<7x5xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{contraction sizes differ: 8 vs 7}}
  %0 = gptc.matmul %a, %b : tensor<4x8xf32>, tensor<7x5xf32> -> tensor<4x5xf32>
  return
}

// -----

func.func @matmul_element_types(%a: tensor<4x8xf32>, %b: tensor<8x5xf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{expects operands of the same element type}}
  %0 = gptc.matmul %a, %b : tensor<4x8xf32>, tensor<8x5xf16> -> tensor<4x5xf32>
  return
}

// -----

func.func @matmul_wrong_result(%a: tensor<4x8xf32>, %b: tensor<5x8xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{inferred type(s) 'tensor<4x5xf32>' are incompatible}}
  %0 = gptc.matmul %a, %b transpose_rhs : tensor<4x8xf32>, tensor<5x8xf32> -> tensor<5x4xf32>
  return
}

// -----

func.func @layer_norm_gamma_size(%x: tensor<4x16xf32>, %g: tensor<8xf32>, %b: tensor<16xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{expects gamma and beta of shape [16]}}
  %0 = gptc.layer_norm %x, %g, %b eps 1.0e-05 : tensor<4x16xf32>, tensor<8xf32>, tensor<16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @layer_norm_beta_type(%x: tensor<4x16xf32>, %g: tensor<16xf32>, %b: tensor<16xbf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{expects gamma and beta of the input's element type}}
  %0 = gptc.layer_norm %x, %g, %b eps 1.0e-05 : tensor<4x16xf32>, tensor<16xf32>, tensor<16xbf16> -> tensor<4x16xf32>
  return
}

// -----

func.func @layer_norm_zero_epsilon(%x: tensor<4x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{epsilon must be positive and finite}}
  %0 = gptc.layer_norm %x, %g, %b eps 0.0 : tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @layer_norm_scalar(%x: tensor<f32>, %g: tensor<1xf32>, %b: tensor<1xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{expects an input of rank >= 1}}
  %0 = gptc.layer_norm %x, %g, %b eps 1.0e-05 : tensor<f32>, tensor<1xf32>, tensor<1xf32> -> tensor<f32>
  return
}

// -----

func.func @gelu_type_change(%x: tensor<4xf32>) {
  // expected-error@+1 {{requires the same type for all operands and results}}
  %0 = "gptc.gelu"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

func.func @gelu_integer(%x: tensor<4xi32>) {
  // expected-error@+1 {{must be statically shaped tensor of floating-point values}}
  %0 = gptc.gelu %x : tensor<4xi32>
  return
}

// -----

func.func @softmax_scalar(%x: tensor<f32>) {
  // expected-error@+1 {{expects an input of rank >= 1}}
  %0 = gptc.softmax %x : tensor<f32>
  return
}

// -----

func.func @add_shape_mismatch(%x: tensor<4xf32>, %y: tensor<5xf32>) {
  // expected-error@+1 {{requires the same type for all operands and results}}
  %0 = "gptc.add"(%x, %y) : (tensor<4xf32>, tensor<5xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @attention_heads_do_not_divide(%q: tensor<2x8x12xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{width 12 is not divisible by 5 heads}}
  %0 = gptc.causal_attention %q, %q, %q heads 5 : tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32> -> tensor<2x8x12xf32>
  return
}

// -----

func.func @attention_zero_heads(%q: tensor<2x8x12xf32>) {
  // expected-error@+1 {{whose value is positive}}
  %0 = gptc.causal_attention %q, %q, %q heads 0 : tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32> -> tensor<2x8x12xf32>
  return
}

// -----

func.func @attention_rank(%q: tensor<8x12xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{expects query of shape batch x seq x width, got rank 2}}
  %0 = gptc.causal_attention %q, %q, %q heads 2 : tensor<8x12xf32>, tensor<8x12xf32>, tensor<8x12xf32> -> tensor<8x12xf32>
  return
}

// -----

func.func @attention_kv_mismatch(%q: tensor<2x8x12xf32>, %k: tensor<2x4x12xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{expects query, key and value of the same type}}
  %0 = gptc.causal_attention %q, %k, %q heads 2 : tensor<2x8x12xf32>, tensor<2x4x12xf32>, tensor<2x8x12xf32> -> tensor<2x8x12xf32>
  return
}

// -----

func.func @attention_positions_count(%q: tensor<2x4x12xf32>, %k: tensor<2x8x12xf32>, %p: tensor<3xi32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{expects one i32 position per query row, got 3 for 4 rows}}
  %0 = gptc.causal_attention %q, %k, %k positions %p heads 2 : tensor<2x4x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<3xi32> -> tensor<2x4x12xf32>
  return
}

// -----

func.func @attention_positions_kv(%q: tensor<2x4x12xf32>, %k: tensor<2x8x12xf32>, %v: tensor<2x6x12xf32>, %p: tensor<4xi32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{expects key and value of one type, with the query's batch, width and element type}}
  %0 = gptc.causal_attention %q, %k, %v positions %p heads 2 : tensor<2x4x12xf32>, tensor<2x8x12xf32>, tensor<2x6x12xf32>, tensor<4xi32> -> tensor<2x4x12xf32>
  return
}

// -----

func.func @attention_block_key_positions(%q: tensor<2x4x12xf32>, %k: tensor<2x6x12xf32>, %qp: tensor<4xi32>, %kp: tensor<4xi32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{expects one i32 position per query row and per key}}
  %o, %l = gptc.attention_block %q, %k, %k at %qp, %kp heads 3 : tensor<2x4x12xf32>, tensor<2x6x12xf32>, tensor<2x6x12xf32>, tensor<4xi32>, tensor<4xi32> -> tensor<2x4x12xf32>, tensor<2x4x3xf32>
  return
}

// -----

func.func @attention_block_heads(%q: tensor<2x4x12xf32>, %k: tensor<2x6x12xf32>, %qp: tensor<4xi32>, %kp: tensor<6xi32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{width 12 is not divisible by 5 heads}}
  %o, %l = gptc.attention_block %q, %k, %k at %qp, %kp heads 5 : tensor<2x4x12xf32>, tensor<2x6x12xf32>, tensor<2x6x12xf32>, tensor<4xi32>, tensor<6xi32> -> tensor<2x4x12xf32>, tensor<2x4x5xf32>
  return
}

// -----

func.func @attention_block_grad_lse(%q: tensor<2x4x12xf32>, %k: tensor<2x6x12xf32>, %qp: tensor<4xi32>, %kp: tensor<6xi32>, %dl: tensor<2x4x4xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{expects gradients of the output's and the log-sum-exp's types}}
  %d:3 = gptc.attention_block_grad %q, %k, %k at %qp, %kp, %q, %dl heads 3 : tensor<2x4x12xf32>, tensor<2x6x12xf32>, tensor<2x6x12xf32>, tensor<4xi32>, tensor<6xi32>, tensor<2x4x12xf32>, tensor<2x4x4xf32> -> tensor<2x4x12xf32>, tensor<2x6x12xf32>, tensor<2x6x12xf32>
  return
}

// -----

func.func @attention_merge_lse(%a: tensor<2x4x12xf32>, %la: tensor<2x4x5xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{expects two outputs of one type B x T x C and two log-sum-exps of one type B x T x H, H dividing C}}
  %o, %l = gptc.attention_merge %a, %la, %a, %la : tensor<2x4x12xf32>, tensor<2x4x5xf32>, tensor<2x4x12xf32>, tensor<2x4x5xf32> -> tensor<2x4x12xf32>, tensor<2x4x5xf32>
  return
}

// -----

func.func @attention_positions_fewer_keys(%q: tensor<2x4x12xf32>, %k: tensor<2x2x12xf32>, %p: tensor<4xi32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{expects at least as many keys as queries}}
  %0 = gptc.causal_attention %q, %k, %k positions %p heads 2 : tensor<2x4x12xf32>, tensor<2x2x12xf32>, tensor<2x2x12xf32>, tensor<4xi32> -> tensor<2x4x12xf32>
  return
}

// -----

func.func @cross_entropy_labels(%l: tensor<2x8x100xf32>, %y: tensor<2x7xi32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{expects labels shaped like the logits without their last (vocabulary) dimension}}
  %0 = gptc.cross_entropy %l, %y : tensor<2x8x100xf32>, tensor<2x7xi32> -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_nonscalar(%l: tensor<2x8x100xf32>, %y: tensor<2x8xi32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{inferred type(s) 'tensor<f32>' are incompatible with return type(s) of operation 'tensor<1xf32>'}}
  %0 = gptc.cross_entropy %l, %y : tensor<2x8x100xf32>, tensor<2x8xi32> -> tensor<1xf32>
  return
}

// -----

func.func @cross_entropy_scalar_logits(%l: tensor<f32>, %y: tensor<i32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{expects logits of rank >= 1}}
  %0 = gptc.cross_entropy %l, %y : tensor<f32>, tensor<i32> -> tensor<f32>
  return
}

// -----

func.func @reshape_size(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{cannot reshape 32 elements into 30}}
  %0 = gptc.reshape %x : tensor<4x8xf32> -> tensor<3x10xf32>
  return
}

// -----

func.func @reshape_element_type(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{expects the same element type, got 'f32' and 'f16'}}
  %0 = gptc.reshape %x : tensor<4x8xf32> -> tensor<32xf16>
  return
}

// -----

func.func @transpose_not_a_permutation(%x: tensor<4x8xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{permutation is not a permutation of [0, 2)}}
  %0 = gptc.transpose %x [1, 1] : tensor<4x8xf32> -> tensor<8x8xf32>
  return
}

// -----

func.func @transpose_length(%x: tensor<4x8xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{permutation has 3 entries for a rank-2 input}}
  %0 = gptc.transpose %x [1, 0, 2] : tensor<4x8xf32> -> tensor<8x4xf32>
  return
}

// -----

func.func @split_sizes(%x: tensor<4x12xf32>) {
  // expected-error@+1 {{result sizes along axis 1 add up to 10, not 12}}
  %0:2 = gptc.split %x axis 1 : tensor<4x12xf32> -> tensor<4x4xf32>, tensor<4x6xf32>
  return
}

// -----

func.func @split_axis(%x: tensor<4x12xf32>) {
  // expected-error@+1 {{axis 2 is out of range for a rank-2 input}}
  %0:2 = gptc.split %x axis 2 : tensor<4x12xf32> -> tensor<4x6xf32>, tensor<4x6xf32>
  return
}

// -----

func.func @split_other_dimension(%x: tensor<4x12xf32>) {
  // expected-error@+1 {{result dimension 0 differs from the input's}}
  %0:2 = gptc.split %x axis 1 : tensor<4x12xf32> -> tensor<3x6xf32>, tensor<4x6xf32>
  return
}

// -----

func.func @split_element_type(%x: tensor<4x12xf32>) {
  // expected-error@+1 {{expects results of the input's rank and element type}}
  %0:2 = gptc.split %x axis 1 : tensor<4x12xf32> -> tensor<4x6xf16>, tensor<4x6xf32>
  return
}

// -----

func.func @split_no_results(%x: tensor<4x12xf32>) {
  // expected-error@+1 {{expects at least one result}}
  "gptc.split"(%x) <{axis = 1 : i64}> : (tensor<4x12xf32>) -> ()
  return
}

// -----

func.func @cast_shape(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{requires the same shape for all operands and results}}
  %0 = gptc.cast %x : tensor<4x8xf32> -> tensor<8x4xbf16>
  return
}

// -----

func.func @cast_to_integer(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{result #0 must be statically shaped tensor of floating-point values}}
  %0 = gptc.cast %x : tensor<4x8xf32> -> tensor<4x8xi32>
  return
}

// -----

func.func @reduce_sum_dims_not_increasing(%x: tensor<4x8xf32>) {
  // expected-error@+2 {{dimensions must be strictly increasing within [0, 2)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = gptc.reduce_sum %x [1, 0] : tensor<4x8xf32> -> tensor<f32>
  return
}

// -----

func.func @reduce_sum_dim_out_of_range(%x: tensor<4x8xf32>) {
  // expected-error@+2 {{dimensions must be strictly increasing within [0, 2)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = gptc.reduce_sum %x [2] : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @broadcast_count(%x: tensor<8xf32>) {
  // expected-error@+1 {{dimensions must be strictly increasing, within the result's rank, and add the missing 2 dimensions}}
  %0 = gptc.broadcast %x [0] : tensor<8xf32> -> tensor<2x3x8xf32>
  return
}

// -----

func.func @broadcast_mismatch(%x: tensor<8xf32>) {
  // expected-error@+1 {{result dimension 1 does not match input dimension 0}}
  %0 = gptc.broadcast %x [0] : tensor<8xf32> -> tensor<2x7xf32>
  return
}

// -----

func.func @broadcast_element_type(%x: tensor<8xf32>) {
  // expected-error@+1 {{expects the input's element type}}
  %0 = gptc.broadcast %x [0] : tensor<8xf32> -> tensor<2x8xf16>
  return
}

// -----

func.func @concat_sizes(%x: tensor<4x4xf32>) {
  // expected-error@+1 {{input sizes along axis 1 add up to 8, not 12}}
  %0 = gptc.concat %x, %x axis 1 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x12xf32>
  return
}

// -----

func.func @concat_axis(%x: tensor<4x4xf32>) {
  // expected-error@+1 {{axis 2 is out of range for a rank-2 result}}
  %0 = gptc.concat %x axis 2 : tensor<4x4xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @concat_other_dimension(%x: tensor<4x4xf32>, %y: tensor<3x4xf32>) {
  // expected-error@+1 {{input dimension 0 differs from the result's}}
  %0 = gptc.concat %x, %y axis 1 : tensor<4x4xf32>, tensor<3x4xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @concat_element_type(%x: tensor<4x4xf32>, %y: tensor<4x4xf16>) {
  // expected-error@+1 {{expects inputs of the result's rank and element type}}
  %0 = gptc.concat %x, %y axis 1 : tensor<4x4xf32>, tensor<4x4xf16> -> tensor<4x8xf32>
  return
}

// -----

func.func @concat_no_inputs() {
  // expected-error@+1 {{expects at least one input}}
  %0 = "gptc.concat"() <{axis = 0 : i64}> : () -> tensor<4xf32>
  return
}

// -----

func.func @embedding_grad_shape(%ids: tensor<2x8xi32>, %g: tensor<2x8x12xf32>) {
  // expected-error@+1 {{expects a gradient shaped like the ids with the width appended}}
  %0 = gptc.embedding_grad %ids, %g : tensor<2x8xi32>, tensor<2x8x12xf32> -> tensor<100x10xf32>
  return
}

// -----

func.func @embedding_grad_rank(%ids: tensor<2x8xi32>, %g: tensor<2x8x12xf32>) {
  // expected-error@+1 {{expects a rank-2 result (vocab x width)}}
  %0 = gptc.embedding_grad %ids, %g : tensor<2x8xi32>, tensor<2x8x12xf32> -> tensor<12xf32>
  return
}

// -----

func.func @embedding_grad_type(%ids: tensor<2x8xi32>, %g: tensor<2x8x12xf32>) {
  // expected-error@+1 {{expects the gradient's element type}}
  %0 = gptc.embedding_grad %ids, %g : tensor<2x8xi32>, tensor<2x8x12xf32> -> tensor<100x12xbf16>
  return
}

// -----

func.func @layer_norm_grad_gamma(%x: tensor<2x12xf32>, %g: tensor<11xf32>) {
  // expected-error@+2 {{expects gamma of shape [12] and the input's element type}}
  // expected-error@+1 {{failed to infer returned types}}
  %0:3 = gptc.layer_norm_grad %x, %g, %x eps 1.0e-05 : tensor<2x12xf32>, tensor<11xf32>, tensor<2x12xf32> -> tensor<2x12xf32>, tensor<11xf32>, tensor<11xf32>
  return
}

// -----

func.func @layer_norm_grad_grad_type(%x: tensor<2x12xf32>, %g: tensor<12xf32>, %d: tensor<2x11xf32>) {
  // expected-error@+2 {{expects a gradient of the input's type, rank >= 1}}
  // expected-error@+1 {{failed to infer returned types}}
  %0:3 = gptc.layer_norm_grad %x, %g, %d eps 1.0e-05 : tensor<2x12xf32>, tensor<12xf32>, tensor<2x11xf32> -> tensor<2x12xf32>, tensor<12xf32>, tensor<12xf32>
  return
}

// -----

func.func @gelu_grad_mismatch(%x: tensor<4xf32>, %d: tensor<5xf32>) {
  // expected-error@+1 {{requires the same type for all operands and results}}
  %0 = "gptc.gelu_grad"(%x, %d) : (tensor<4xf32>, tensor<5xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @softmax_grad_scalar(%x: tensor<f32>) {
  // expected-error@+1 {{expects an input of rank >= 1}}
  %0 = gptc.softmax_grad %x, %x : tensor<f32>
  return
}

// -----

func.func @attention_grad_heads(%q: tensor<2x8x12xf32>) {
  // expected-error@+2 {{'gptc.causal_attention_grad' op width 12 is not divisible by 5 heads}}
  // expected-error@+1 {{failed to infer returned types}}
  %0:3 = gptc.causal_attention_grad %q, %q, %q, %q heads 5 : tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32> -> tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32>
  return
}

// -----

func.func @attention_grad_grad_type(%q: tensor<2x8x12xf32>, %d: tensor<2x4x12xf32>) {
  // expected-error@+2 {{expects a gradient of the query's type}}
  // expected-error@+1 {{failed to infer returned types}}
  %0:3 = gptc.causal_attention_grad %q, %q, %q, %d heads 3 : tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<2x4x12xf32> -> tensor<2x8x12xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32>
  return
}

// -----

func.func @cross_entropy_grad_nonscalar(%l: tensor<2x8x100xf32>, %y: tensor<2x8xi32>, %d: tensor<1xf32>) {
  // expected-error@+2 {{expects a scalar gradient of the logits' element type}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = gptc.cross_entropy_grad %l, %y, %d : tensor<2x8x100xf32>, tensor<2x8xi32>, tensor<1xf32> -> tensor<2x8x100xf32>
  return
}

// -----

func.func @cross_entropy_grad_labels(%l: tensor<2x8x100xf32>, %y: tensor<2x7xi32>, %d: tensor<f32>) {
  // expected-error@+2 {{expects labels shaped like the logits without their last (vocabulary) dimension}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = gptc.cross_entropy_grad %l, %y, %d : tensor<2x8x100xf32>, tensor<2x7xi32>, tensor<f32> -> tensor<2x8x100xf32>
  return
}

// -----

func.func @global_norm_no_inputs() {
  // expected-error@+1 {{expects at least one input}}
  %0 = "gptc.global_norm"() : () -> tensor<f32>
  return
}

// -----

func.func @learning_rate_decay(%s: tensor<i32>) {
  // expected-error@+1 {{expected string or keyword containing one of the following enum values for attribute 'decay' [cosine, linear, constant]}}
  %0 = gptc.learning_rate %s peak 1.0 min 0.1 warmup 0 total 10 step
  return
}

// -----

func.func @learning_rate_negative_warmup(%s: tensor<i32>) {
  // expected-error@+1 {{warmup and total must not be negative}}
  %0 = gptc.learning_rate %s peak 1.0 min 0.1 warmup -1 total 10 cosine
  return
}

// -----

func.func @adamw_beta(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i32>) {
  // expected-error@+1 {{betas must be in [0, 1)}}
  %0:3 = gptc.adamw %p, %p, %p, %p lr %lr step %s scale %lr beta1 1.0 beta2 0.9 eps 1.0e-8 decay 0.0 : tensor<4xf32>
  return
}

// -----

func.func @adamw_eps(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i32>) {
  // expected-error@+1 {{eps must be positive}}
  %0:3 = gptc.adamw %p, %p, %p, %p lr %lr step %s scale %lr beta1 0.9 beta2 0.9 eps 0.0 decay 0.0 : tensor<4xf32>
  return
}

// -----

func.func @adamw_decay(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i32>) {
  // expected-error@+1 {{weight decay must not be negative}}
  %0:3 = gptc.adamw %p, %p, %p, %p lr %lr step %s scale %lr beta1 0.9 beta2 0.9 eps 1.0e-8 decay -1.0 : tensor<4xf32>
  return
}

// -----

func.func @adamw_types(%p: tensor<4xf32>, %q: tensor<5xf32>, %lr: tensor<f32>, %s: tensor<i32>) {
  // expected-error@+1 {{all of {param, grad, m, v, new_param, new_m, new_v} have same type}}
  %0:3 = "gptc.adamw"(%p, %q, %p, %p, %lr, %s, %lr) <{beta1 = 0.9 : f64, beta2 = 0.9 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64}> : (tensor<4xf32>, tensor<5xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @clip_scale_vector(%n: tensor<2xf32>) {
  // expected-error@+1 {{operand #0 must be 0D tensor of 32-bit float values}}
  %0 = "gptc.clip_scale"(%n) <{max_norm = 1.0 : f64}> : (tensor<2xf32>) -> tensor<f32>
  return
}

// -----

func.func @sum_squares_no_inputs() {
  // expected-error@+1 {{expects at least one input}}
  %0 = "gptc.sum_squares"() : () -> tensor<f32>
  return
}

// -----

func.func @accumulate_uneven(%t: tensor<5x8xi32>) {
  // expected-error@+1 {{expects input 0 to stack 2 microbatches on dimension 0, got 'tensor<5x8xi32>'}}
  %0 = gptc.accumulate %t microbatches 2 : (tensor<5x8xi32>) -> (tensor<f32>) {
  ^bb0(%m: tensor<2x8xi32>):
    %c = gptc.count_tokens %m : tensor<2x8xi32>
    gptc.yield %c : tensor<f32>
  }
  return
}

// -----

func.func @accumulate_block_argument(%t: tensor<4x8xi32>) {
  // expected-error@+1 {{expects block argument 0 of type 'tensor<2x8xi32>', got 'tensor<4x8xi32>'}}
  %0 = gptc.accumulate %t microbatches 2 : (tensor<4x8xi32>) -> (tensor<f32>) {
  ^bb0(%m: tensor<4x8xi32>):
    %c = gptc.count_tokens %m : tensor<4x8xi32>
    gptc.yield %c : tensor<f32>
  }
  return
}

// -----

func.func @accumulate_yield_types(%t: tensor<4x8xi32>, %g: tensor<3xf32>) {
  // expected-error@+1 {{expects the region to yield the result types}}
  %0 = gptc.accumulate %t microbatches 2 : (tensor<4x8xi32>) -> (tensor<f32>) {
  ^bb0(%m: tensor<2x8xi32>):
    gptc.yield %g : tensor<3xf32>
  }
  return
}

// -----

func.func @yield_outside_accumulate(%g: tensor<3xf32>) {
  // expected-error@+1 {{expects parent op to be one of 'gptc.accumulate, gptc.kernel, gptc.fused_gemm'}}
  gptc.yield %g : tensor<3xf32>
}

// -----

func.func @count_tokens_float(%l: tensor<4xf32>) {
  // expected-error@+1 {{operand #0 must be statically shaped tensor of signless integer values}}
  %0 = "gptc.count_tokens"(%l) : (tensor<4xf32>) -> tensor<f32>
  return
}

// -----

func.func @kernel_block_arguments(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{expects one block argument of each input's type}}
  %r = gptc.kernel "k" (%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<8xf32>):
    %g = gptc.gelu %x : tensor<8xf32>
    gptc.yield %g : tensor<8xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @kernel_yield_types(%a: tensor<4xf32>) -> tensor<4xf64> {
  // expected-error@+1 {{expects the region to yield the result types}}
  %r = gptc.kernel "k" (%a) : (tensor<4xf32>) -> tensor<4xf64> {
  ^bb0(%x: tensor<4xf32>):
    gptc.yield %x : tensor<4xf32>
  }
  return %r : tensor<4xf64>
}

// -----

func.func @kernel_name(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{expects a kernel name}}
  %r = gptc.kernel "" (%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    gptc.yield %x : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @loss_scale_backoff(%s: tensor<f32>, %n: tensor<i32>) {
  // expected-error@+1 {{backoff must be in (0, 1)}}
  %0:3 = gptc.loss_scale_update %s, %n, %n, %s growth 2.0 backoff 1.0 interval 10
  return
}

// -----

func.func @loss_scale_growth(%s: tensor<f32>, %n: tensor<i32>) {
  // expected-error@+1 {{growth must be at least 1}}
  %0:3 = gptc.loss_scale_update %s, %n, %n, %s growth 0.5 backoff 0.5 interval 10
  return
}

// -----

func.func @loss_scale_interval(%s: tensor<f32>, %n: tensor<i32>) {
  // expected-error@+1 {{interval must be at least 1}}
  %0:3 = gptc.loss_scale_update %s, %n, %n, %s growth 2.0 backoff 0.5 interval 0
  return
}

// -----

func.func @found_inf_result(%x: tensor<4xf32>) {
  // expected-error@+1 {{result #0 must be 0D tensor of 32-bit float values}}
  %0 = "gptc.found_inf"(%x) : (tensor<4xf32>) -> tensor<i32>
  return
}

// -----

func.func @multi_adamw_counts(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>, %step: tensor<i32>, %s: tensor<f32>) {
  // expected-error@+1 {{needs one gradient, two moments and one decay per parameter, got 2 parameters, 2 gradients, 2 and 2 moments, 1 decays}}
  %r:6 = gptc.multi_adamw (%p, %p) grads (%g, %g) m (%g, %g) v (%g, %g) lr %lr step %step scale %s beta1 0.9 beta2 0.95 eps 1.0e-8 decays [0.1] : tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @multi_adamw_betas(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>, %step: tensor<i32>, %s: tensor<f32>) {
  // expected-error@+1 {{betas must be in [0, 1)}}
  %r:3 = gptc.multi_adamw (%p) grads (%g) m (%g) v (%g) lr %lr step %step scale %s beta1 1.5 beta2 0.95 eps 1.0e-8 decays [0.1] : tensor<4xf32>
  return
}

// -----

func.func @unary_unknown_function(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{expected string or keyword containing one of the following enum values for attribute 'fn' [neg, sqrt, exp, log, tanh, erf, reciprocal, relu, sigmoid, abs, step, sign]}}
  %0 = gptc.unary cosh %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @binary_types_differ(%x: tensor<4xf32>, %y: tensor<4xf64>) -> tensor<4xf32> {
  // expected-error@+1 {{requires the same type for all operands and results}}
  %0 = "gptc.binary"(%x, %y) {fn = 0 : i32} : (tensor<4xf32>, tensor<4xf64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @unary_integer(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error@+1 {{must be statically shaped tensor of floating-point values}}
  %0 = gptc.unary neg %x : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

shard.grid @mesh(shape = 2)
func.func @bucket_mixed_types(%x: tensor<4xf32>, %y: tensor<4xbf16>) {
  // expected-error@+1 {{operand #1 has element type 'bf16' where the bucket's is 'f32' (one message has one element type)}}
  %r:2 = gptc.bucket_all_reduce %x, %y on @mesh grid_axes = [0] : tensor<4xf32>, tensor<4xbf16>
  return
}

// -----

shard.grid @mesh(shape = 2)
func.func @bucket_empty() {
  // expected-error@+1 {{needs at least one tensor to reduce}}
  "gptc.bucket_all_reduce"() {grid = @mesh, grid_axes = array<i16: 0>} : () -> ()
  return
}

// -----

shard.grid @mesh(shape = 2x2)
func.func @bucket_repeated_axis(%x: tensor<4xf32>) {
  // expected-error@+1 {{grid axis 1 is repeated}}
  %r = gptc.bucket_all_reduce %x on @mesh grid_axes = [1, 1] : tensor<4xf32>
  return
}

// -----

shard.grid @mesh(shape = 2x2)
func.func @bucket_axis_out_of_range(%x: tensor<4xf32>) {
  // expected-error@+1 {{grid axis 2 is out of range for @mesh of rank 2}}
  %r = gptc.bucket_all_reduce %x on @mesh grid_axes = [2] : tensor<4xf32>
  return
}

// -----

func.func @bucket_unknown_grid(%x: tensor<4xf32>) {
  // expected-error@+1 {{refers to 'nowhere', which is not a shard.grid}}
  %r = gptc.bucket_all_reduce %x on @nowhere grid_axes = [0] : tensor<4xf32>
  return
}

// -----

shard.grid @mesh(shape = 2)
func.func @gather_bucket_group(%x: tensor<4x3xf32>, %y: tensor<2xf32>) {
  // expected-error@+1 {{tensor #1: dimension 0 of the result must be 2 (the group's size) times the operand's}}
  %r:2 = gptc.bucket_all_gather %x, %y on @mesh grid_axes = [0] : tensor<4x3xf32>, tensor<2xf32> -> tensor<8x3xf32>, tensor<2xf32>
  return
}

// -----

shard.grid @mesh(shape = 2)
func.func @scatter_bucket_group(%x: tensor<8xf32>) {
  // expected-error@+1 {{tensor #0: dimension 0 of the operand must be 2 (the group's size) times the result's}}
  %r = gptc.bucket_reduce_scatter %x on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
  return
}

// -----

shard.grid @mesh(shape = 2)
func.func @gather_bucket_inner(%x: tensor<4x3xf32>) {
  // expected-error@+1 {{tensor #0: 'tensor<4x3xf32>' and 'tensor<8x4xf32>' must differ in dimension 0 only}}
  %r = gptc.bucket_all_gather %x on @mesh grid_axes = [0] : tensor<4x3xf32> -> tensor<8x4xf32>
  return
}

// -----

shard.grid @mesh(shape = 2)
func.func @gather_bucket_types(%x: tensor<4xf32>, %y: tensor<4xbf16>) {
  // expected-error@+1 {{tensor #1 is not of the bucket's element type 'f32' (one message has one element type)}}
  %r:2 = gptc.bucket_all_gather %x, %y on @mesh grid_axes = [0] : tensor<4xf32>, tensor<4xbf16> -> tensor<8xf32>, tensor<8xbf16>
  return
}

// -----

shard.grid @mesh(shape = 2)
func.func @scatter_bucket_count(%x: tensor<4xf32>, %y: tensor<4xf32>) {
  // expected-error@+1 {{has 2 operands but 1 results (one each)}}
  %r = gptc.bucket_reduce_scatter %x, %y on @mesh grid_axes = [0] : tensor<4xf32>, tensor<4xf32> -> tensor<2xf32>
  return
}

// -----

shard.grid @mesh(shape = 2x2)
func.func @gather_bucket_axis(%x: tensor<4xf32>) {
  // expected-error@+1 {{grid axis 2 is out of range for @mesh of rank 2}}
  %r = gptc.bucket_all_gather %x on @mesh grid_axes = [2] : tensor<4xf32> -> tensor<8xf32>
  return
}

// -----

shard.grid @mesh(shape = 2)
func.func @bucket_result_types(%x: tensor<4xf32>) {
  // expected-error@+2 {{inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<8xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %r = "gptc.bucket_all_reduce"(%x) {grid = @mesh, grid_axes = array<i16: 0>} : (tensor<4xf32>) -> tensor<8xf32>
  return
}
