// RUN: gptc-opt %s | FileCheck %s
// RUN: gptc-opt %s | gptc-opt | FileCheck %s
// The typed roles of arguments and results (gptc.input, gptc.output,
// gptc.state), parameter initializers and tensor-parallel splits print and
// parse back.

// CHECK-LABEL: func.func @step
// CHECK-SAME: gptc.init = #gptc.init<kind = normal, std = 2.000000e-02, rows = 3>
// CHECK-SAME: gptc.state = #gptc.state<m "wte">
// CHECK-SAME: gptc.state = #gptc.state<v "wte">
// CHECK-SAME: gptc.input = #gptc.input<step>
// CHECK-SAME: gptc.init = #gptc.init<kind = constant, value = 1.024000e+03>
// CHECK-SAME: gptc.state = #gptc.state<loss_scale>
// CHECK-SAME: gptc.input = #gptc.input<tokens>
// CHECK-SAME: gptc.input = #gptc.input<cotangent 2>
// CHECK-SAME: gptc.input = #gptc.input<graph "input_ids">
// CHECK-SAME: gptc.input = #gptc.input<saved 0>
// CHECK-SAME: gptc.output = #gptc.output<loss>
// CHECK-SAME: gptc.output = #gptc.output<boundary 1>
// CHECK-SAME: gptc.output = #gptc.output<graph "logits">
// CHECK-SAME: gptc.output = #gptc.output<saved 3>
// CHECK-SAME: gptc.state = #gptc.state<optimizer_updates>
// CHECK: gptc.linear {{.*}}gptc.tensor_parallel = #gptc.tensor_parallel<column>
func.func @step(%w: tensor<4x4xf32> {gptc.param = "wte", gptc.init = #gptc.init<kind = normal, std = 0.02, rows = 3>},
                %m: tensor<4x4xf32> {gptc.state = #gptc.state<m "wte">},
                %v: tensor<4x4xf32> {gptc.state = #gptc.state<v "wte">},
                %s: tensor<i32> {gptc.input = #gptc.input<step>},
                %ls: tensor<f32> {gptc.init = #gptc.init<kind = constant, value = 1024.0>, gptc.state = #gptc.state<loss_scale>},
                %t: tensor<2x4xi32> {gptc.input = #gptc.input<tokens>},
                %c: tensor<2x4xf32> {gptc.input = #gptc.input<cotangent 2>},
                %g: tensor<2x4xi32> {gptc.input = #gptc.input<graph "input_ids">},
                %sv: tensor<2x4xf32> {gptc.input = #gptc.input<saved 0>})
    -> (tensor<f32> {gptc.output = #gptc.output<loss>},
        tensor<2x4xf32> {gptc.output = #gptc.output<boundary 1>},
        tensor<2x4xf32> {gptc.output = #gptc.output<graph "logits">},
        tensor<2x4xf32> {gptc.output = #gptc.output<saved 3>},
        tensor<i32> {gptc.state = #gptc.state<optimizer_updates>}) {
  %y = gptc.linear %c, %w {gptc.tensor_parallel = #gptc.tensor_parallel<column>} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  return %ls, %y, %y, %sv, %s : tensor<f32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<i32>
}
