module {
  func.func @main(%arg0: tensor<96x32xf32>, %arg1: tensor<32x32xf32>, %arg2: tensor<32xf32>, %arg3: tensor<32xf32>, %arg4: tensor<32x32xf32>, %arg5: tensor<32xf32>, %arg6: tensor<32x32xf32>, %arg7: tensor<32xf32>, %arg8: tensor<32x32xf32>, %arg9: tensor<32xf32>, %arg10: tensor<32x32xf32>, %arg11: tensor<32xf32>, %arg12: tensor<32xf32>, %arg13: tensor<32xf32>, %arg14: tensor<64x32xf32>, %arg15: tensor<64xf32>, %arg16: tensor<32x64xf32>, %arg17: tensor<32xf32>, %arg18: tensor<32xf32>, %arg19: tensor<32xf32>, %arg20: tensor<32x32xf32>, %arg21: tensor<32xf32>, %arg22: tensor<32x32xf32>, %arg23: tensor<32xf32>, %arg24: tensor<32x32xf32>, %arg25: tensor<32xf32>, %arg26: tensor<32x32xf32>, %arg27: tensor<32xf32>, %arg28: tensor<32xf32>, %arg29: tensor<32xf32>, %arg30: tensor<64x32xf32>, %arg31: tensor<64xf32>, %arg32: tensor<32x64xf32>, %arg33: tensor<32xf32>, %arg34: tensor<32xf32>, %arg35: tensor<32xf32>, %arg36: tensor<2x16xi32>) -> tensor<2x16x96xf32> {
    %c = stablehlo.constant dense<0> : tensor<16x16xi64>
    %c_0 = stablehlo.constant dense<0> : tensor<16xi64>
    %c_1 = stablehlo.constant dense<1> : tensor<16xi64>
    %c_2 = stablehlo.constant dense<16> : tensor<i64>
    %c_3 = stablehlo.constant dense<1> : tensor<i64>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<2x4x16x16xf32>
    %cst_4 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %cst_5 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %c_6 = stablehlo.constant dense<true> : tensor<16x16xi1>
    %c_7 = stablehlo.constant dense<false> : tensor<i1>
    %cst_8 = stablehlo.constant dense<1.000000e+00> : tensor<2x16x64xf32>
    %cst_9 = stablehlo.constant dense<3.000000e+00> : tensor<2x16x64xf32>
    %cst_10 = stablehlo.constant dense<5.000000e-01> : tensor<2x16x64xf32>
    %cst_11 = stablehlo.constant dense<0.636619746> : tensor<2x16x64xf32>
    %cst_12 = stablehlo.constant dense<4.471500e-02> : tensor<2x16x64xf32>
    %cst_13 = arith.constant dense<1> : tensor<1xi64>
    %cst_14 = arith.constant dense<32> : tensor<1xi64>
    %cst_15 = arith.constant dense<1.000000e-05> : tensor<1xf64>
    %cst_16 = arith.constant dense<0.59460355750136051> : tensor<1xf64>
    %cst_17 = arith.constant dense<0xFFF0000000000000> : tensor<1xf64>
    %0 = stablehlo.convert %arg36 : (tensor<2x16xi32>) -> tensor<2x16xi64>
    %1 = "stablehlo.gather"(%arg0, %0) <{dimension_numbers = #stablehlo.gather<offset_dims = [2], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 2>, indices_are_sorted = false, slice_sizes = array<i64: 1, 32>}> : (tensor<96x32xf32>, tensor<2x16xi64>) -> tensor<2x16x32xf32>
    %2 = stablehlo.convert %1 : tensor<2x16x32xf32>
    %3 = stablehlo.convert %c_3 : (tensor<i64>) -> tensor<f64>
    %4 = stablehlo.convert %c_2 : (tensor<i64>) -> tensor<f64>
    %5 = stablehlo.divide %4, %3 : tensor<f64>
    %6 = stablehlo.ceil %5 : tensor<f64>
    %7 = stablehlo.convert %6 : (tensor<f64>) -> tensor<i64>
    %8 = stablehlo.reshape %7 : (tensor<i64>) -> tensor<1xi64>
    %9 = stablehlo.dynamic_iota %8, dim = 0 : (tensor<1xi64>) -> tensor<16xi64>
    %10 = stablehlo.multiply %9, %c_1 : tensor<16xi64>
    %11 = stablehlo.add %10, %c_0 : tensor<16xi64>
    %12 = "stablehlo.gather"(%arg1, %11) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 32>}> : (tensor<32x32xf32>, tensor<16xi64>) -> tensor<16x32xf32>
    %13 = stablehlo.convert %12 : tensor<16x32xf32>
    %14 = stablehlo.broadcast_in_dim %13, dims = [1, 2] : (tensor<16x32xf32>) -> tensor<2x16x32xf32>
    %15 = stablehlo.add %2, %14 : tensor<2x16x32xf32>
    %16 = stablehlo.reduce(%15 init: %cst_4) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %17 = stablehlo.reshape %16 : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %18 = stablehlo.convert %cst_14 : (tensor<1xi64>) -> tensor<1xf32>
    %19 = stablehlo.reshape %18 : (tensor<1xf32>) -> tensor<f32>
    %20 = stablehlo.broadcast_in_dim %19, dims = [] : (tensor<f32>) -> tensor<2x16x1xf32>
    %21 = stablehlo.divide %17, %20 : tensor<2x16x1xf32>
    %22 = stablehlo.broadcast_in_dim %21, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %23 = stablehlo.subtract %15, %22 : tensor<2x16x32xf32>
    %24 = stablehlo.multiply %23, %23 : tensor<2x16x32xf32>
    %25 = stablehlo.reduce(%24 init: %cst_4) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %26 = stablehlo.reshape %25 : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %27 = stablehlo.divide %26, %20 : tensor<2x16x1xf32>
    %28 = stablehlo.convert %cst_15 : (tensor<1xf64>) -> tensor<1xf32>
    %29 = stablehlo.reshape %28 : (tensor<1xf32>) -> tensor<f32>
    %30 = stablehlo.broadcast_in_dim %29, dims = [] : (tensor<f32>) -> tensor<2x16x1xf32>
    %31 = stablehlo.add %27, %30 : tensor<2x16x1xf32>
    %32 = stablehlo.rsqrt %31 : tensor<2x16x1xf32>
    %33 = stablehlo.broadcast_in_dim %32, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %34 = stablehlo.multiply %23, %33 : tensor<2x16x32xf32>
    %35 = stablehlo.broadcast_in_dim %arg2, dims = [2] : (tensor<32xf32>) -> tensor<2x16x32xf32>
    %36 = stablehlo.multiply %34, %35 : tensor<2x16x32xf32>
    %37 = stablehlo.broadcast_in_dim %arg3, dims = [2] : (tensor<32xf32>) -> tensor<2x16x32xf32>
    %38 = stablehlo.add %36, %37 : tensor<2x16x32xf32>
    %39 = stablehlo.transpose %arg4, dims = [1, 0] : (tensor<32x32xf32>) -> tensor<32x32xf32>
    %40 = stablehlo.reshape %38 : (tensor<2x16x32xf32>) -> tensor<32x32xf32>
    %41 = stablehlo.dot_general %40, %39, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST] : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
    %42 = stablehlo.convert %cst_13 : (tensor<1xi64>) -> tensor<1xf32>
    %43 = stablehlo.reshape %42 : (tensor<1xf32>) -> tensor<f32>
    %44 = stablehlo.broadcast_in_dim %43, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %45 = stablehlo.multiply %arg5, %44 : tensor<32xf32>
    %46 = stablehlo.broadcast_in_dim %45, dims = [1] : (tensor<32xf32>) -> tensor<32x32xf32>
    %47 = stablehlo.add %46, %41 : tensor<32x32xf32>
    %48 = stablehlo.reshape %47 : (tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %49 = stablehlo.reshape %48 : (tensor<2x16x32xf32>) -> tensor<2x16x4x8xf32>
    %50 = stablehlo.transpose %49, dims = [0, 2, 1, 3] : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
    %51 = stablehlo.transpose %arg6, dims = [1, 0] : (tensor<32x32xf32>) -> tensor<32x32xf32>
    %52 = stablehlo.dot_general %40, %51, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST] : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
    %53 = stablehlo.multiply %arg7, %44 : tensor<32xf32>
    %54 = stablehlo.broadcast_in_dim %53, dims = [1] : (tensor<32xf32>) -> tensor<32x32xf32>
    %55 = stablehlo.add %54, %52 : tensor<32x32xf32>
    %56 = stablehlo.reshape %55 : (tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %57 = stablehlo.reshape %56 : (tensor<2x16x32xf32>) -> tensor<2x16x4x8xf32>
    %58 = stablehlo.transpose %57, dims = [0, 2, 1, 3] : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
    %59 = stablehlo.transpose %arg8, dims = [1, 0] : (tensor<32x32xf32>) -> tensor<32x32xf32>
    %60 = stablehlo.dot_general %40, %59, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST] : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
    %61 = stablehlo.multiply %arg9, %44 : tensor<32xf32>
    %62 = stablehlo.broadcast_in_dim %61, dims = [1] : (tensor<32xf32>) -> tensor<32x32xf32>
    %63 = stablehlo.add %62, %60 : tensor<32x32xf32>
    %64 = stablehlo.reshape %63 : (tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %65 = stablehlo.reshape %64 : (tensor<2x16x32xf32>) -> tensor<2x16x4x8xf32>
    %66 = stablehlo.transpose %65, dims = [0, 2, 1, 3] : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
    %67 = stablehlo.convert %cst_16 : (tensor<1xf64>) -> tensor<1xf32>
    %68 = stablehlo.reshape %67 : (tensor<1xf32>) -> tensor<f32>
    %69 = stablehlo.broadcast_in_dim %68, dims = [] : (tensor<f32>) -> tensor<2x4x16x8xf32>
    %70 = stablehlo.multiply %50, %69 : tensor<2x4x16x8xf32>
    %71 = stablehlo.reshape %11 : (tensor<16xi64>) -> tensor<1x16xi64>
    %72 = stablehlo.reshape %11 : (tensor<16xi64>) -> tensor<16x1xi64>
    %73 = stablehlo.broadcast_in_dim %71, dims = [0, 1] : (tensor<1x16xi64>) -> tensor<16x16xi64>
    %74 = stablehlo.broadcast_in_dim %72, dims = [0, 1] : (tensor<16x1xi64>) -> tensor<16x16xi64>
    %75 = stablehlo.subtract %73, %74 : tensor<16x16xi64>
    %76 = stablehlo.compare LE, %75, %c, SIGNED : (tensor<16x16xi64>, tensor<16x16xi64>) -> tensor<16x16xi1>
    %77 = stablehlo.and %76, %c_6 : tensor<16x16xi1>
    %78 = stablehlo.broadcast_in_dim %77, dims = [0, 1] : (tensor<16x16xi1>) -> tensor<16x16xi1>
    %79 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<16x16xf32>
    %80 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<16x16xf32>
    %81 = stablehlo.select %78, %79, %80 : tensor<16x16xi1>, tensor<16x16xf32>
    %82 = stablehlo.transpose %58, dims = [0, 1, 3, 2] : (tensor<2x4x16x8xf32>) -> tensor<2x4x8x16xf32>
    %83 = stablehlo.broadcast_in_dim %68, dims = [] : (tensor<f32>) -> tensor<2x4x8x16xf32>
    %84 = stablehlo.multiply %82, %83 : tensor<2x4x8x16xf32>
    %85 = stablehlo.reshape %70 : (tensor<2x4x16x8xf32>) -> tensor<8x16x8xf32>
    %86 = stablehlo.reshape %84 : (tensor<2x4x8x16xf32>) -> tensor<8x8x16xf32>
    %87 = stablehlo.broadcast_in_dim %86, dims = [0, 1, 2] : (tensor<8x8x16xf32>) -> tensor<8x8x16xf32>
    %88 = stablehlo.dot_general %85, %87, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [HIGHEST, HIGHEST] : (tensor<8x16x8xf32>, tensor<8x8x16xf32>) -> tensor<8x16x16xf32>
    %89 = stablehlo.reshape %88 : (tensor<8x16x16xf32>) -> tensor<2x4x16x16xf32>
    %90 = stablehlo.broadcast_in_dim %81, dims = [2, 3] : (tensor<16x16xf32>) -> tensor<2x4x16x16xf32>
    %91 = stablehlo.add %89, %90 : tensor<2x4x16x16xf32>
    %92 = stablehlo.reduce(%91 init: %cst_5) applies stablehlo.maximum across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
    %93 = stablehlo.reshape %92 : (tensor<2x4x16xf32>) -> tensor<2x4x16x1xf32>
    %94 = stablehlo.broadcast_in_dim %93, dims = [0, 1, 2, 3] : (tensor<2x4x16x1xf32>) -> tensor<2x4x16x16xf32>
    %95 = stablehlo.subtract %91, %94 : tensor<2x4x16x16xf32>
    %96 = stablehlo.exponential %95 : tensor<2x4x16x16xf32>
    %97 = stablehlo.reduce(%96 init: %cst_4) applies stablehlo.add across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
    %98 = stablehlo.reshape %97 : (tensor<2x4x16xf32>) -> tensor<2x4x16x1xf32>
    %99 = stablehlo.broadcast_in_dim %98, dims = [0, 1, 2, 3] : (tensor<2x4x16x1xf32>) -> tensor<2x4x16x16xf32>
    %100 = stablehlo.divide %96, %99 : tensor<2x4x16x16xf32>
    %101 = stablehlo.convert %cst_17 : tensor<1xf64>
    %102 = stablehlo.reshape %101 : (tensor<1xf64>) -> tensor<f64>
    %103 = stablehlo.convert %102 : (tensor<f64>) -> tensor<f32>
    %104 = stablehlo.broadcast_in_dim %103, dims = [] : (tensor<f32>) -> tensor<2x4x16x16xf32>
    %105 = stablehlo.compare EQ, %91, %104, FLOAT : (tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xi1>
    %106 = stablehlo.not %105 : tensor<2x4x16x16xi1>
    %107 = stablehlo.reduce(%106 init: %c_7) applies stablehlo.or across dimensions = [3] : (tensor<2x4x16x16xi1>, tensor<i1>) -> tensor<2x4x16xi1>
    %108 = stablehlo.reshape %107 : (tensor<2x4x16xi1>) -> tensor<2x4x16x1xi1>
    %109 = stablehlo.not %108 : tensor<2x4x16x1xi1>
    %110 = stablehlo.broadcast_in_dim %109, dims = [0, 1, 2, 3] : (tensor<2x4x16x1xi1>) -> tensor<2x4x16x16xi1>
    %111 = stablehlo.broadcast_in_dim %cst, dims = [0, 1, 2, 3] : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
    %112 = stablehlo.broadcast_in_dim %100, dims = [0, 1, 2, 3] : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
    %113 = stablehlo.select %110, %111, %112 : tensor<2x4x16x16xi1>, tensor<2x4x16x16xf32>
    %114 = stablehlo.reshape %113 : (tensor<2x4x16x16xf32>) -> tensor<8x16x16xf32>
    %115 = stablehlo.reshape %66 : (tensor<2x4x16x8xf32>) -> tensor<8x16x8xf32>
    %116 = stablehlo.broadcast_in_dim %115, dims = [0, 1, 2] : (tensor<8x16x8xf32>) -> tensor<8x16x8xf32>
    %117 = stablehlo.dot_general %114, %116, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [HIGHEST, HIGHEST] : (tensor<8x16x16xf32>, tensor<8x16x8xf32>) -> tensor<8x16x8xf32>
    %118 = stablehlo.reshape %117 : (tensor<8x16x8xf32>) -> tensor<2x4x16x8xf32>
    %119 = stablehlo.transpose %118, dims = [0, 2, 1, 3] : (tensor<2x4x16x8xf32>) -> tensor<2x16x4x8xf32>
    %120 = stablehlo.reshape %119 : (tensor<2x16x4x8xf32>) -> tensor<2x16x32xf32>
    %121 = stablehlo.transpose %arg10, dims = [1, 0] : (tensor<32x32xf32>) -> tensor<32x32xf32>
    %122 = stablehlo.reshape %120 : (tensor<2x16x32xf32>) -> tensor<32x32xf32>
    %123 = stablehlo.dot_general %122, %121, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST] : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
    %124 = stablehlo.multiply %arg11, %44 : tensor<32xf32>
    %125 = stablehlo.broadcast_in_dim %124, dims = [1] : (tensor<32xf32>) -> tensor<32x32xf32>
    %126 = stablehlo.add %125, %123 : tensor<32x32xf32>
    %127 = stablehlo.reshape %126 : (tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %128 = stablehlo.add %15, %127 : tensor<2x16x32xf32>
    %129 = stablehlo.reduce(%128 init: %cst_4) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %130 = stablehlo.reshape %129 : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %131 = stablehlo.divide %130, %20 : tensor<2x16x1xf32>
    %132 = stablehlo.broadcast_in_dim %131, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %133 = stablehlo.subtract %128, %132 : tensor<2x16x32xf32>
    %134 = stablehlo.multiply %133, %133 : tensor<2x16x32xf32>
    %135 = stablehlo.reduce(%134 init: %cst_4) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %136 = stablehlo.reshape %135 : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %137 = stablehlo.divide %136, %20 : tensor<2x16x1xf32>
    %138 = stablehlo.add %137, %30 : tensor<2x16x1xf32>
    %139 = stablehlo.rsqrt %138 : tensor<2x16x1xf32>
    %140 = stablehlo.broadcast_in_dim %139, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %141 = stablehlo.multiply %133, %140 : tensor<2x16x32xf32>
    %142 = stablehlo.broadcast_in_dim %arg12, dims = [2] : (tensor<32xf32>) -> tensor<2x16x32xf32>
    %143 = stablehlo.multiply %141, %142 : tensor<2x16x32xf32>
    %144 = stablehlo.broadcast_in_dim %arg13, dims = [2] : (tensor<32xf32>) -> tensor<2x16x32xf32>
    %145 = stablehlo.add %143, %144 : tensor<2x16x32xf32>
    %146 = stablehlo.transpose %arg14, dims = [1, 0] : (tensor<64x32xf32>) -> tensor<32x64xf32>
    %147 = stablehlo.reshape %145 : (tensor<2x16x32xf32>) -> tensor<32x32xf32>
    %148 = stablehlo.dot_general %147, %146, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST] : (tensor<32x32xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
    %149 = stablehlo.broadcast_in_dim %43, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %150 = stablehlo.multiply %arg15, %149 : tensor<64xf32>
    %151 = stablehlo.broadcast_in_dim %150, dims = [1] : (tensor<64xf32>) -> tensor<32x64xf32>
    %152 = stablehlo.add %151, %148 : tensor<32x64xf32>
    %153 = stablehlo.reshape %152 : (tensor<32x64xf32>) -> tensor<2x16x64xf32>
    %154 = stablehlo.multiply %153, %cst_10 : tensor<2x16x64xf32>
    %155 = stablehlo.sqrt %cst_11 : tensor<2x16x64xf32>
    %156 = stablehlo.power %153, %cst_9 : tensor<2x16x64xf32>
    %157 = stablehlo.multiply %cst_12, %156 : tensor<2x16x64xf32>
    %158 = stablehlo.add %153, %157 : tensor<2x16x64xf32>
    %159 = stablehlo.multiply %155, %158 : tensor<2x16x64xf32>
    %160 = stablehlo.tanh %159 : tensor<2x16x64xf32>
    %161 = stablehlo.add %160, %cst_8 : tensor<2x16x64xf32>
    %162 = stablehlo.multiply %161, %154 : tensor<2x16x64xf32>
    %163 = stablehlo.transpose %arg16, dims = [1, 0] : (tensor<32x64xf32>) -> tensor<64x32xf32>
    %164 = stablehlo.reshape %162 : (tensor<2x16x64xf32>) -> tensor<32x64xf32>
    %165 = stablehlo.dot_general %164, %163, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST] : (tensor<32x64xf32>, tensor<64x32xf32>) -> tensor<32x32xf32>
    %166 = stablehlo.multiply %arg17, %44 : tensor<32xf32>
    %167 = stablehlo.broadcast_in_dim %166, dims = [1] : (tensor<32xf32>) -> tensor<32x32xf32>
    %168 = stablehlo.add %167, %165 : tensor<32x32xf32>
    %169 = stablehlo.reshape %168 : (tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %170 = stablehlo.add %128, %169 : tensor<2x16x32xf32>
    %171 = stablehlo.reduce(%170 init: %cst_4) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %172 = stablehlo.reshape %171 : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %173 = stablehlo.divide %172, %20 : tensor<2x16x1xf32>
    %174 = stablehlo.broadcast_in_dim %173, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %175 = stablehlo.subtract %170, %174 : tensor<2x16x32xf32>
    %176 = stablehlo.multiply %175, %175 : tensor<2x16x32xf32>
    %177 = stablehlo.reduce(%176 init: %cst_4) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %178 = stablehlo.reshape %177 : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %179 = stablehlo.divide %178, %20 : tensor<2x16x1xf32>
    %180 = stablehlo.add %179, %30 : tensor<2x16x1xf32>
    %181 = stablehlo.rsqrt %180 : tensor<2x16x1xf32>
    %182 = stablehlo.broadcast_in_dim %181, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %183 = stablehlo.multiply %175, %182 : tensor<2x16x32xf32>
    %184 = stablehlo.broadcast_in_dim %arg18, dims = [2] : (tensor<32xf32>) -> tensor<2x16x32xf32>
    %185 = stablehlo.multiply %183, %184 : tensor<2x16x32xf32>
    %186 = stablehlo.broadcast_in_dim %arg19, dims = [2] : (tensor<32xf32>) -> tensor<2x16x32xf32>
    %187 = stablehlo.add %185, %186 : tensor<2x16x32xf32>
    %188 = stablehlo.transpose %arg20, dims = [1, 0] : (tensor<32x32xf32>) -> tensor<32x32xf32>
    %189 = stablehlo.reshape %187 : (tensor<2x16x32xf32>) -> tensor<32x32xf32>
    %190 = stablehlo.dot_general %189, %188, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST] : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
    %191 = stablehlo.multiply %arg21, %44 : tensor<32xf32>
    %192 = stablehlo.broadcast_in_dim %191, dims = [1] : (tensor<32xf32>) -> tensor<32x32xf32>
    %193 = stablehlo.add %192, %190 : tensor<32x32xf32>
    %194 = stablehlo.reshape %193 : (tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %195 = stablehlo.reshape %194 : (tensor<2x16x32xf32>) -> tensor<2x16x4x8xf32>
    %196 = stablehlo.transpose %195, dims = [0, 2, 1, 3] : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
    %197 = stablehlo.transpose %arg22, dims = [1, 0] : (tensor<32x32xf32>) -> tensor<32x32xf32>
    %198 = stablehlo.dot_general %189, %197, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST] : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
    %199 = stablehlo.multiply %arg23, %44 : tensor<32xf32>
    %200 = stablehlo.broadcast_in_dim %199, dims = [1] : (tensor<32xf32>) -> tensor<32x32xf32>
    %201 = stablehlo.add %200, %198 : tensor<32x32xf32>
    %202 = stablehlo.reshape %201 : (tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %203 = stablehlo.reshape %202 : (tensor<2x16x32xf32>) -> tensor<2x16x4x8xf32>
    %204 = stablehlo.transpose %203, dims = [0, 2, 1, 3] : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
    %205 = stablehlo.transpose %arg24, dims = [1, 0] : (tensor<32x32xf32>) -> tensor<32x32xf32>
    %206 = stablehlo.dot_general %189, %205, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST] : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
    %207 = stablehlo.multiply %arg25, %44 : tensor<32xf32>
    %208 = stablehlo.broadcast_in_dim %207, dims = [1] : (tensor<32xf32>) -> tensor<32x32xf32>
    %209 = stablehlo.add %208, %206 : tensor<32x32xf32>
    %210 = stablehlo.reshape %209 : (tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %211 = stablehlo.reshape %210 : (tensor<2x16x32xf32>) -> tensor<2x16x4x8xf32>
    %212 = stablehlo.transpose %211, dims = [0, 2, 1, 3] : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
    %213 = stablehlo.multiply %196, %69 : tensor<2x4x16x8xf32>
    %214 = stablehlo.transpose %204, dims = [0, 1, 3, 2] : (tensor<2x4x16x8xf32>) -> tensor<2x4x8x16xf32>
    %215 = stablehlo.multiply %214, %83 : tensor<2x4x8x16xf32>
    %216 = stablehlo.reshape %213 : (tensor<2x4x16x8xf32>) -> tensor<8x16x8xf32>
    %217 = stablehlo.reshape %215 : (tensor<2x4x8x16xf32>) -> tensor<8x8x16xf32>
    %218 = stablehlo.broadcast_in_dim %217, dims = [0, 1, 2] : (tensor<8x8x16xf32>) -> tensor<8x8x16xf32>
    %219 = stablehlo.dot_general %216, %218, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [HIGHEST, HIGHEST] : (tensor<8x16x8xf32>, tensor<8x8x16xf32>) -> tensor<8x16x16xf32>
    %220 = stablehlo.reshape %219 : (tensor<8x16x16xf32>) -> tensor<2x4x16x16xf32>
    %221 = stablehlo.add %220, %90 : tensor<2x4x16x16xf32>
    %222 = stablehlo.reduce(%221 init: %cst_5) applies stablehlo.maximum across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
    %223 = stablehlo.reshape %222 : (tensor<2x4x16xf32>) -> tensor<2x4x16x1xf32>
    %224 = stablehlo.broadcast_in_dim %223, dims = [0, 1, 2, 3] : (tensor<2x4x16x1xf32>) -> tensor<2x4x16x16xf32>
    %225 = stablehlo.subtract %221, %224 : tensor<2x4x16x16xf32>
    %226 = stablehlo.exponential %225 : tensor<2x4x16x16xf32>
    %227 = stablehlo.reduce(%226 init: %cst_4) applies stablehlo.add across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
    %228 = stablehlo.reshape %227 : (tensor<2x4x16xf32>) -> tensor<2x4x16x1xf32>
    %229 = stablehlo.broadcast_in_dim %228, dims = [0, 1, 2, 3] : (tensor<2x4x16x1xf32>) -> tensor<2x4x16x16xf32>
    %230 = stablehlo.divide %226, %229 : tensor<2x4x16x16xf32>
    %231 = stablehlo.compare EQ, %221, %104, FLOAT : (tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xi1>
    %232 = stablehlo.not %231 : tensor<2x4x16x16xi1>
    %233 = stablehlo.reduce(%232 init: %c_7) applies stablehlo.or across dimensions = [3] : (tensor<2x4x16x16xi1>, tensor<i1>) -> tensor<2x4x16xi1>
    %234 = stablehlo.reshape %233 : (tensor<2x4x16xi1>) -> tensor<2x4x16x1xi1>
    %235 = stablehlo.not %234 : tensor<2x4x16x1xi1>
    %236 = stablehlo.broadcast_in_dim %235, dims = [0, 1, 2, 3] : (tensor<2x4x16x1xi1>) -> tensor<2x4x16x16xi1>
    %237 = stablehlo.broadcast_in_dim %230, dims = [0, 1, 2, 3] : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
    %238 = stablehlo.select %236, %111, %237 : tensor<2x4x16x16xi1>, tensor<2x4x16x16xf32>
    %239 = stablehlo.reshape %238 : (tensor<2x4x16x16xf32>) -> tensor<8x16x16xf32>
    %240 = stablehlo.reshape %212 : (tensor<2x4x16x8xf32>) -> tensor<8x16x8xf32>
    %241 = stablehlo.broadcast_in_dim %240, dims = [0, 1, 2] : (tensor<8x16x8xf32>) -> tensor<8x16x8xf32>
    %242 = stablehlo.dot_general %239, %241, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [HIGHEST, HIGHEST] : (tensor<8x16x16xf32>, tensor<8x16x8xf32>) -> tensor<8x16x8xf32>
    %243 = stablehlo.reshape %242 : (tensor<8x16x8xf32>) -> tensor<2x4x16x8xf32>
    %244 = stablehlo.transpose %243, dims = [0, 2, 1, 3] : (tensor<2x4x16x8xf32>) -> tensor<2x16x4x8xf32>
    %245 = stablehlo.reshape %244 : (tensor<2x16x4x8xf32>) -> tensor<2x16x32xf32>
    %246 = stablehlo.transpose %arg26, dims = [1, 0] : (tensor<32x32xf32>) -> tensor<32x32xf32>
    %247 = stablehlo.reshape %245 : (tensor<2x16x32xf32>) -> tensor<32x32xf32>
    %248 = stablehlo.dot_general %247, %246, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST] : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
    %249 = stablehlo.multiply %arg27, %44 : tensor<32xf32>
    %250 = stablehlo.broadcast_in_dim %249, dims = [1] : (tensor<32xf32>) -> tensor<32x32xf32>
    %251 = stablehlo.add %250, %248 : tensor<32x32xf32>
    %252 = stablehlo.reshape %251 : (tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %253 = stablehlo.add %170, %252 : tensor<2x16x32xf32>
    %254 = stablehlo.reduce(%253 init: %cst_4) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %255 = stablehlo.reshape %254 : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %256 = stablehlo.divide %255, %20 : tensor<2x16x1xf32>
    %257 = stablehlo.broadcast_in_dim %256, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %258 = stablehlo.subtract %253, %257 : tensor<2x16x32xf32>
    %259 = stablehlo.multiply %258, %258 : tensor<2x16x32xf32>
    %260 = stablehlo.reduce(%259 init: %cst_4) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %261 = stablehlo.reshape %260 : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %262 = stablehlo.divide %261, %20 : tensor<2x16x1xf32>
    %263 = stablehlo.add %262, %30 : tensor<2x16x1xf32>
    %264 = stablehlo.rsqrt %263 : tensor<2x16x1xf32>
    %265 = stablehlo.broadcast_in_dim %264, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %266 = stablehlo.multiply %258, %265 : tensor<2x16x32xf32>
    %267 = stablehlo.broadcast_in_dim %arg28, dims = [2] : (tensor<32xf32>) -> tensor<2x16x32xf32>
    %268 = stablehlo.multiply %266, %267 : tensor<2x16x32xf32>
    %269 = stablehlo.broadcast_in_dim %arg29, dims = [2] : (tensor<32xf32>) -> tensor<2x16x32xf32>
    %270 = stablehlo.add %268, %269 : tensor<2x16x32xf32>
    %271 = stablehlo.transpose %arg30, dims = [1, 0] : (tensor<64x32xf32>) -> tensor<32x64xf32>
    %272 = stablehlo.reshape %270 : (tensor<2x16x32xf32>) -> tensor<32x32xf32>
    %273 = stablehlo.dot_general %272, %271, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST] : (tensor<32x32xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
    %274 = stablehlo.multiply %arg31, %149 : tensor<64xf32>
    %275 = stablehlo.broadcast_in_dim %274, dims = [1] : (tensor<64xf32>) -> tensor<32x64xf32>
    %276 = stablehlo.add %275, %273 : tensor<32x64xf32>
    %277 = stablehlo.reshape %276 : (tensor<32x64xf32>) -> tensor<2x16x64xf32>
    %278 = stablehlo.multiply %277, %cst_10 : tensor<2x16x64xf32>
    %279 = stablehlo.power %277, %cst_9 : tensor<2x16x64xf32>
    %280 = stablehlo.multiply %cst_12, %279 : tensor<2x16x64xf32>
    %281 = stablehlo.add %277, %280 : tensor<2x16x64xf32>
    %282 = stablehlo.multiply %155, %281 : tensor<2x16x64xf32>
    %283 = stablehlo.tanh %282 : tensor<2x16x64xf32>
    %284 = stablehlo.add %283, %cst_8 : tensor<2x16x64xf32>
    %285 = stablehlo.multiply %284, %278 : tensor<2x16x64xf32>
    %286 = stablehlo.transpose %arg32, dims = [1, 0] : (tensor<32x64xf32>) -> tensor<64x32xf32>
    %287 = stablehlo.reshape %285 : (tensor<2x16x64xf32>) -> tensor<32x64xf32>
    %288 = stablehlo.dot_general %287, %286, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST] : (tensor<32x64xf32>, tensor<64x32xf32>) -> tensor<32x32xf32>
    %289 = stablehlo.multiply %arg33, %44 : tensor<32xf32>
    %290 = stablehlo.broadcast_in_dim %289, dims = [1] : (tensor<32xf32>) -> tensor<32x32xf32>
    %291 = stablehlo.add %290, %288 : tensor<32x32xf32>
    %292 = stablehlo.reshape %291 : (tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %293 = stablehlo.add %253, %292 : tensor<2x16x32xf32>
    %294 = stablehlo.reduce(%293 init: %cst_4) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %295 = stablehlo.reshape %294 : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %296 = stablehlo.divide %295, %20 : tensor<2x16x1xf32>
    %297 = stablehlo.broadcast_in_dim %296, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %298 = stablehlo.subtract %293, %297 : tensor<2x16x32xf32>
    %299 = stablehlo.multiply %298, %298 : tensor<2x16x32xf32>
    %300 = stablehlo.reduce(%299 init: %cst_4) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %301 = stablehlo.reshape %300 : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %302 = stablehlo.divide %301, %20 : tensor<2x16x1xf32>
    %303 = stablehlo.add %302, %30 : tensor<2x16x1xf32>
    %304 = stablehlo.rsqrt %303 : tensor<2x16x1xf32>
    %305 = stablehlo.broadcast_in_dim %304, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %306 = stablehlo.multiply %298, %305 : tensor<2x16x32xf32>
    %307 = stablehlo.broadcast_in_dim %arg34, dims = [2] : (tensor<32xf32>) -> tensor<2x16x32xf32>
    %308 = stablehlo.multiply %306, %307 : tensor<2x16x32xf32>
    %309 = stablehlo.broadcast_in_dim %arg35, dims = [2] : (tensor<32xf32>) -> tensor<2x16x32xf32>
    %310 = stablehlo.add %308, %309 : tensor<2x16x32xf32>
    %311 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<96x32xf32>) -> tensor<32x96xf32>
    %312 = stablehlo.reshape %310 : (tensor<2x16x32xf32>) -> tensor<32x32xf32>
    %313 = stablehlo.dot_general %312, %311, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST] : (tensor<32x32xf32>, tensor<32x96xf32>) -> tensor<32x96xf32>
    %314 = stablehlo.reshape %313 : (tensor<32x96xf32>) -> tensor<2x16x96xf32>
    return %314 : tensor<2x16x96xf32>
  }
}
