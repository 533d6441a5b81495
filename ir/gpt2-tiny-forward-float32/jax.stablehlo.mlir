module @jit_forward attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @empty_mesh = <[]> {stablehlo.mesh = {axes = []}}
  func.func public @main(%arg0: tensor<32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}]>}, %arg1: tensor<32x32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}, {}]>}, %arg2: tensor<32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}]>}, %arg3: tensor<32x32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}, {}]>}, %arg4: tensor<32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}]>}, %arg5: tensor<32x32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}, {}]>}, %arg6: tensor<32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}]>}, %arg7: tensor<32x32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}, {}]>}, %arg8: tensor<64xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}]>}, %arg9: tensor<32x64xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}, {}]>}, %arg10: tensor<32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}]>}, %arg11: tensor<64x32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}, {}]>}, %arg12: tensor<32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}]>}, %arg13: tensor<32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}]>}, %arg14: tensor<32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}]>}, %arg15: tensor<32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}]>}, %arg16: tensor<32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}]>}, %arg17: tensor<32x32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}, {}]>}, %arg18: tensor<32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}]>}, %arg19: tensor<32x32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}, {}]>}, %arg20: tensor<32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}]>}, %arg21: tensor<32x32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}, {}]>}, %arg22: tensor<32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}]>}, %arg23: tensor<32x32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}, {}]>}, %arg24: tensor<64xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}]>}, %arg25: tensor<32x64xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}, {}]>}, %arg26: tensor<32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}]>}, %arg27: tensor<64x32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}, {}]>}, %arg28: tensor<32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}]>}, %arg29: tensor<32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}]>}, %arg30: tensor<32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}]>}, %arg31: tensor<32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}]>}, %arg32: tensor<32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}]>}, %arg33: tensor<32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}]>}, %arg34: tensor<32x32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}, {}]>}, %arg35: tensor<96x32xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}, {}]>}, %arg36: tensor<2x16xi32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{}, {}]>}) -> (tensor<2x16x96xf32> {jax.result_info = "result"}) {
    %0 = call @_take(%arg35, %arg36) : (tensor<96x32xf32>, tensor<2x16xi32>) -> tensor<2x16x32xf32>
    %1 = stablehlo.iota dim = 0 : tensor<16xi32>
    %2 = call @_take_0(%arg34, %1) : (tensor<32x32xf32>, tensor<16xi32>) -> tensor<16x32xf32>
    %3 = stablehlo.broadcast_in_dim %2, dims = [1, 2] : (tensor<16x32xf32>) -> tensor<1x16x32xf32>
    %4 = stablehlo.broadcast_in_dim %3, dims = [0, 1, 2] : (tensor<1x16x32xf32>) -> tensor<2x16x32xf32>
    %5 = stablehlo.add %0, %4 : tensor<2x16x32xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %6 = stablehlo.reduce(%5 init: %cst) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %cst_0 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2x16xf32>
    %8 = stablehlo.divide %6, %7 : tensor<2x16xf32>
    %9 = stablehlo.broadcast_in_dim %8, dims = [0, 1] : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %10 = stablehlo.broadcast_in_dim %9, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %11 = stablehlo.subtract %5, %10 : tensor<2x16x32xf32>
    %12 = chlo.square %11 : tensor<2x16x32xf32> -> tensor<2x16x32xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %13 = stablehlo.reduce(%12 init: %cst_1) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %cst_2 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %14 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<2x16xf32>
    %15 = stablehlo.divide %13, %14 : tensor<2x16xf32>
    %16 = stablehlo.reshape %8 : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %17 = stablehlo.reshape %15 : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %18 = stablehlo.broadcast_in_dim %16, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %19 = stablehlo.subtract %5, %18 : tensor<2x16x32xf32>
    %cst_3 = stablehlo.constant dense<9.99999974E-6> : tensor<f32>
    %20 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<2x16x1xf32>
    %21 = stablehlo.add %17, %20 : tensor<2x16x1xf32>
    %22 = stablehlo.rsqrt %21 : tensor<2x16x1xf32>
    %23 = stablehlo.reshape %arg13 : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %24 = stablehlo.broadcast_in_dim %22, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %25 = stablehlo.broadcast_in_dim %23, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %26 = stablehlo.multiply %24, %25 : tensor<2x16x32xf32>
    %27 = stablehlo.multiply %19, %26 : tensor<2x16x32xf32>
    %28 = stablehlo.reshape %arg12 : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %29 = stablehlo.broadcast_in_dim %28, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %30 = stablehlo.add %27, %29 : tensor<2x16x32xf32>
    %31 = stablehlo.dot_general %30, %arg5, contracting_dims = [2] x [0], precision = [HIGHEST, HIGHEST] : (tensor<2x16x32xf32>, tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %32 = stablehlo.reshape %arg4 : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %33 = stablehlo.broadcast_in_dim %32, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %34 = stablehlo.add %31, %33 : tensor<2x16x32xf32>
    %35 = stablehlo.reshape %34 : (tensor<2x16x32xf32>) -> tensor<2x16x4x8xf32>
    %36 = stablehlo.dot_general %30, %arg1, contracting_dims = [2] x [0], precision = [HIGHEST, HIGHEST] : (tensor<2x16x32xf32>, tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %37 = stablehlo.reshape %arg0 : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %38 = stablehlo.broadcast_in_dim %37, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %39 = stablehlo.add %36, %38 : tensor<2x16x32xf32>
    %40 = stablehlo.reshape %39 : (tensor<2x16x32xf32>) -> tensor<2x16x4x8xf32>
    %41 = stablehlo.dot_general %30, %arg7, contracting_dims = [2] x [0], precision = [HIGHEST, HIGHEST] : (tensor<2x16x32xf32>, tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %42 = stablehlo.reshape %arg6 : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %43 = stablehlo.broadcast_in_dim %42, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %44 = stablehlo.add %41, %43 : tensor<2x16x32xf32>
    %45 = stablehlo.reshape %44 : (tensor<2x16x32xf32>) -> tensor<2x16x4x8xf32>
    %46 = stablehlo.reshape %35 : (tensor<2x16x4x8xf32>) -> tensor<2x16x4x1x8xf32>
    %47 = stablehlo.dot_general %46, %40, batching_dims = [0, 2] x [0, 2], contracting_dims = [4] x [3], precision = [HIGHEST, HIGHEST] : (tensor<2x16x4x1x8xf32>, tensor<2x16x4x8xf32>) -> tensor<2x4x16x1x16xf32>
    %cst_4 = stablehlo.constant dense<0.353553385> : tensor<f32>
    %48 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<2x4x16x1x16xf32>
    %49 = stablehlo.multiply %47, %48 : tensor<2x4x16x1x16xf32>
    %c = stablehlo.constant dense<true> : tensor<i1>
    %50 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i1>) -> tensor<2x4x16x16xi1>
    %c_5 = stablehlo.constant dense<true> : tensor<i1>
    %51 = stablehlo.broadcast_in_dim %c_5, dims = [] : (tensor<i1>) -> tensor<16x16xi1>
    %52 = call @tril(%51) : (tensor<16x16xi1>) -> tensor<16x16xi1>
    %53 = stablehlo.broadcast_in_dim %52, dims = [2, 3] : (tensor<16x16xi1>) -> tensor<1x1x16x16xi1>
    %54 = stablehlo.broadcast_in_dim %53, dims = [0, 1, 2, 3] : (tensor<1x1x16x16xi1>) -> tensor<2x4x16x16xi1>
    %55 = stablehlo.and %50, %54 : tensor<2x4x16x16xi1>
    %cst_6 = stablehlo.constant dense<-2.38197633E+38> : tensor<f32>
    %56 = call @_where_2(%55, %49, %cst_6) : (tensor<2x4x16x16xi1>, tensor<2x4x16x1x16xf32>, tensor<f32>) -> tensor<1x2x4x16x16xf32>
    %cst_7 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %57 = stablehlo.reduce(%56 init: %cst_7) applies stablehlo.maximum across dimensions = [4] : (tensor<1x2x4x16x16xf32>, tensor<f32>) -> tensor<1x2x4x16xf32>
    %cst_8 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %58 = stablehlo.broadcast_in_dim %cst_8, dims = [] : (tensor<f32>) -> tensor<1x2x4x16xf32>
    %59 = stablehlo.maximum %58, %57 : tensor<1x2x4x16xf32>
    %60 = stablehlo.broadcast_in_dim %59, dims = [0, 1, 2, 3] : (tensor<1x2x4x16xf32>) -> tensor<1x2x4x16x1xf32>
    %61 = stablehlo.broadcast_in_dim %60, dims = [0, 1, 2, 3, 4] : (tensor<1x2x4x16x1xf32>) -> tensor<1x2x4x16x16xf32>
    %62 = stablehlo.subtract %56, %61 : tensor<1x2x4x16x16xf32>
    %63 = stablehlo.exponential %62 : tensor<1x2x4x16x16xf32>
    %cst_9 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %64 = stablehlo.reduce(%63 init: %cst_9) applies stablehlo.add across dimensions = [4] : (tensor<1x2x4x16x16xf32>, tensor<f32>) -> tensor<1x2x4x16xf32>
    %65 = stablehlo.broadcast_in_dim %64, dims = [0, 1, 2, 3] : (tensor<1x2x4x16xf32>) -> tensor<1x2x4x16x1xf32>
    %66 = stablehlo.broadcast_in_dim %65, dims = [0, 1, 2, 3, 4] : (tensor<1x2x4x16x1xf32>) -> tensor<1x2x4x16x16xf32>
    %67 = stablehlo.divide %63, %66 : tensor<1x2x4x16x16xf32>
    %68 = stablehlo.dot_general %45, %67, batching_dims = [0, 2] x [1, 2], contracting_dims = [1] x [4], precision = [HIGHEST, HIGHEST] : (tensor<2x16x4x8xf32>, tensor<1x2x4x16x16xf32>) -> tensor<2x4x8x1x16xf32>
    %69 = stablehlo.transpose %68, dims = [3, 0, 4, 1, 2] : (tensor<2x4x8x1x16xf32>) -> tensor<1x2x16x4x8xf32>
    %70 = stablehlo.transpose %69, dims = [1, 2, 3, 0, 4] : (tensor<1x2x16x4x8xf32>) -> tensor<2x16x4x1x8xf32>
    %71 = stablehlo.reshape %70 : (tensor<2x16x4x1x8xf32>) -> tensor<2x16x4x8xf32>
    %72 = stablehlo.reshape %71 : (tensor<2x16x4x8xf32>) -> tensor<2x16x32xf32>
    %73 = stablehlo.dot_general %72, %arg3, contracting_dims = [2] x [0], precision = [HIGHEST, HIGHEST] : (tensor<2x16x32xf32>, tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %74 = stablehlo.reshape %arg2 : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %75 = stablehlo.broadcast_in_dim %74, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %76 = stablehlo.add %73, %75 : tensor<2x16x32xf32>
    %77 = stablehlo.add %5, %76 : tensor<2x16x32xf32>
    %cst_10 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %78 = stablehlo.reduce(%77 init: %cst_10) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %cst_11 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %79 = stablehlo.broadcast_in_dim %cst_11, dims = [] : (tensor<f32>) -> tensor<2x16xf32>
    %80 = stablehlo.divide %78, %79 : tensor<2x16xf32>
    %81 = stablehlo.broadcast_in_dim %80, dims = [0, 1] : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %82 = stablehlo.broadcast_in_dim %81, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %83 = stablehlo.subtract %77, %82 : tensor<2x16x32xf32>
    %84 = chlo.square %83 : tensor<2x16x32xf32> -> tensor<2x16x32xf32>
    %cst_12 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %85 = stablehlo.reduce(%84 init: %cst_12) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %cst_13 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %86 = stablehlo.broadcast_in_dim %cst_13, dims = [] : (tensor<f32>) -> tensor<2x16xf32>
    %87 = stablehlo.divide %85, %86 : tensor<2x16xf32>
    %88 = stablehlo.reshape %80 : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %89 = stablehlo.reshape %87 : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %90 = stablehlo.broadcast_in_dim %88, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %91 = stablehlo.subtract %77, %90 : tensor<2x16x32xf32>
    %cst_14 = stablehlo.constant dense<9.99999974E-6> : tensor<f32>
    %92 = stablehlo.broadcast_in_dim %cst_14, dims = [] : (tensor<f32>) -> tensor<2x16x1xf32>
    %93 = stablehlo.add %89, %92 : tensor<2x16x1xf32>
    %94 = stablehlo.rsqrt %93 : tensor<2x16x1xf32>
    %95 = stablehlo.reshape %arg15 : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %96 = stablehlo.broadcast_in_dim %94, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %97 = stablehlo.broadcast_in_dim %95, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %98 = stablehlo.multiply %96, %97 : tensor<2x16x32xf32>
    %99 = stablehlo.multiply %91, %98 : tensor<2x16x32xf32>
    %100 = stablehlo.reshape %arg14 : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %101 = stablehlo.broadcast_in_dim %100, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %102 = stablehlo.add %99, %101 : tensor<2x16x32xf32>
    %103 = stablehlo.dot_general %102, %arg9, contracting_dims = [2] x [0], precision = [HIGHEST, HIGHEST] : (tensor<2x16x32xf32>, tensor<32x64xf32>) -> tensor<2x16x64xf32>
    %104 = stablehlo.reshape %arg8 : (tensor<64xf32>) -> tensor<1x1x64xf32>
    %105 = stablehlo.broadcast_in_dim %104, dims = [0, 1, 2] : (tensor<1x1x64xf32>) -> tensor<2x16x64xf32>
    %106 = stablehlo.add %103, %105 : tensor<2x16x64xf32>
    %107 = stablehlo.multiply %106, %106 : tensor<2x16x64xf32>
    %108 = stablehlo.multiply %107, %106 : tensor<2x16x64xf32>
    %cst_15 = stablehlo.constant dense<4.471500e-02> : tensor<f32>
    %109 = stablehlo.broadcast_in_dim %cst_15, dims = [] : (tensor<f32>) -> tensor<2x16x64xf32>
    %110 = stablehlo.multiply %109, %108 : tensor<2x16x64xf32>
    %111 = stablehlo.add %106, %110 : tensor<2x16x64xf32>
    %cst_16 = stablehlo.constant dense<0.797884583> : tensor<f32>
    %112 = stablehlo.broadcast_in_dim %cst_16, dims = [] : (tensor<f32>) -> tensor<2x16x64xf32>
    %113 = stablehlo.multiply %112, %111 : tensor<2x16x64xf32>
    %114 = stablehlo.tanh %113 : tensor<2x16x64xf32>
    %cst_17 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %115 = stablehlo.broadcast_in_dim %cst_17, dims = [] : (tensor<f32>) -> tensor<2x16x64xf32>
    %116 = stablehlo.add %115, %114 : tensor<2x16x64xf32>
    %cst_18 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %117 = stablehlo.broadcast_in_dim %cst_18, dims = [] : (tensor<f32>) -> tensor<2x16x64xf32>
    %118 = stablehlo.multiply %117, %116 : tensor<2x16x64xf32>
    %119 = stablehlo.multiply %106, %118 : tensor<2x16x64xf32>
    %120 = stablehlo.dot_general %119, %arg11, contracting_dims = [2] x [0], precision = [HIGHEST, HIGHEST] : (tensor<2x16x64xf32>, tensor<64x32xf32>) -> tensor<2x16x32xf32>
    %121 = stablehlo.reshape %arg10 : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %122 = stablehlo.broadcast_in_dim %121, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %123 = stablehlo.add %120, %122 : tensor<2x16x32xf32>
    %124 = stablehlo.add %77, %123 : tensor<2x16x32xf32>
    %cst_19 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %125 = stablehlo.reduce(%124 init: %cst_19) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %cst_20 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %126 = stablehlo.broadcast_in_dim %cst_20, dims = [] : (tensor<f32>) -> tensor<2x16xf32>
    %127 = stablehlo.divide %125, %126 : tensor<2x16xf32>
    %128 = stablehlo.broadcast_in_dim %127, dims = [0, 1] : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %129 = stablehlo.broadcast_in_dim %128, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %130 = stablehlo.subtract %124, %129 : tensor<2x16x32xf32>
    %131 = chlo.square %130 : tensor<2x16x32xf32> -> tensor<2x16x32xf32>
    %cst_21 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %132 = stablehlo.reduce(%131 init: %cst_21) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %cst_22 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %133 = stablehlo.broadcast_in_dim %cst_22, dims = [] : (tensor<f32>) -> tensor<2x16xf32>
    %134 = stablehlo.divide %132, %133 : tensor<2x16xf32>
    %135 = stablehlo.reshape %127 : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %136 = stablehlo.reshape %134 : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %137 = stablehlo.broadcast_in_dim %135, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %138 = stablehlo.subtract %124, %137 : tensor<2x16x32xf32>
    %cst_23 = stablehlo.constant dense<9.99999974E-6> : tensor<f32>
    %139 = stablehlo.broadcast_in_dim %cst_23, dims = [] : (tensor<f32>) -> tensor<2x16x1xf32>
    %140 = stablehlo.add %136, %139 : tensor<2x16x1xf32>
    %141 = stablehlo.rsqrt %140 : tensor<2x16x1xf32>
    %142 = stablehlo.reshape %arg29 : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %143 = stablehlo.broadcast_in_dim %141, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %144 = stablehlo.broadcast_in_dim %142, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %145 = stablehlo.multiply %143, %144 : tensor<2x16x32xf32>
    %146 = stablehlo.multiply %138, %145 : tensor<2x16x32xf32>
    %147 = stablehlo.reshape %arg28 : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %148 = stablehlo.broadcast_in_dim %147, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %149 = stablehlo.add %146, %148 : tensor<2x16x32xf32>
    %150 = stablehlo.dot_general %149, %arg21, contracting_dims = [2] x [0], precision = [HIGHEST, HIGHEST] : (tensor<2x16x32xf32>, tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %151 = stablehlo.reshape %arg20 : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %152 = stablehlo.broadcast_in_dim %151, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %153 = stablehlo.add %150, %152 : tensor<2x16x32xf32>
    %154 = stablehlo.reshape %153 : (tensor<2x16x32xf32>) -> tensor<2x16x4x8xf32>
    %155 = stablehlo.dot_general %149, %arg17, contracting_dims = [2] x [0], precision = [HIGHEST, HIGHEST] : (tensor<2x16x32xf32>, tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %156 = stablehlo.reshape %arg16 : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %157 = stablehlo.broadcast_in_dim %156, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %158 = stablehlo.add %155, %157 : tensor<2x16x32xf32>
    %159 = stablehlo.reshape %158 : (tensor<2x16x32xf32>) -> tensor<2x16x4x8xf32>
    %160 = stablehlo.dot_general %149, %arg23, contracting_dims = [2] x [0], precision = [HIGHEST, HIGHEST] : (tensor<2x16x32xf32>, tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %161 = stablehlo.reshape %arg22 : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %162 = stablehlo.broadcast_in_dim %161, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %163 = stablehlo.add %160, %162 : tensor<2x16x32xf32>
    %164 = stablehlo.reshape %163 : (tensor<2x16x32xf32>) -> tensor<2x16x4x8xf32>
    %165 = stablehlo.reshape %154 : (tensor<2x16x4x8xf32>) -> tensor<2x16x4x1x8xf32>
    %166 = stablehlo.dot_general %165, %159, batching_dims = [0, 2] x [0, 2], contracting_dims = [4] x [3], precision = [HIGHEST, HIGHEST] : (tensor<2x16x4x1x8xf32>, tensor<2x16x4x8xf32>) -> tensor<2x4x16x1x16xf32>
    %cst_24 = stablehlo.constant dense<0.353553385> : tensor<f32>
    %167 = stablehlo.broadcast_in_dim %cst_24, dims = [] : (tensor<f32>) -> tensor<2x4x16x1x16xf32>
    %168 = stablehlo.multiply %166, %167 : tensor<2x4x16x1x16xf32>
    %c_25 = stablehlo.constant dense<true> : tensor<i1>
    %169 = stablehlo.broadcast_in_dim %c_25, dims = [] : (tensor<i1>) -> tensor<2x4x16x16xi1>
    %c_26 = stablehlo.constant dense<true> : tensor<i1>
    %170 = stablehlo.broadcast_in_dim %c_26, dims = [] : (tensor<i1>) -> tensor<16x16xi1>
    %171 = call @tril(%170) : (tensor<16x16xi1>) -> tensor<16x16xi1>
    %172 = stablehlo.broadcast_in_dim %171, dims = [2, 3] : (tensor<16x16xi1>) -> tensor<1x1x16x16xi1>
    %173 = stablehlo.broadcast_in_dim %172, dims = [0, 1, 2, 3] : (tensor<1x1x16x16xi1>) -> tensor<2x4x16x16xi1>
    %174 = stablehlo.and %169, %173 : tensor<2x4x16x16xi1>
    %cst_27 = stablehlo.constant dense<-2.38197633E+38> : tensor<f32>
    %175 = call @_where_2(%174, %168, %cst_27) : (tensor<2x4x16x16xi1>, tensor<2x4x16x1x16xf32>, tensor<f32>) -> tensor<1x2x4x16x16xf32>
    %cst_28 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %176 = stablehlo.reduce(%175 init: %cst_28) applies stablehlo.maximum across dimensions = [4] : (tensor<1x2x4x16x16xf32>, tensor<f32>) -> tensor<1x2x4x16xf32>
    %cst_29 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %177 = stablehlo.broadcast_in_dim %cst_29, dims = [] : (tensor<f32>) -> tensor<1x2x4x16xf32>
    %178 = stablehlo.maximum %177, %176 : tensor<1x2x4x16xf32>
    %179 = stablehlo.broadcast_in_dim %178, dims = [0, 1, 2, 3] : (tensor<1x2x4x16xf32>) -> tensor<1x2x4x16x1xf32>
    %180 = stablehlo.broadcast_in_dim %179, dims = [0, 1, 2, 3, 4] : (tensor<1x2x4x16x1xf32>) -> tensor<1x2x4x16x16xf32>
    %181 = stablehlo.subtract %175, %180 : tensor<1x2x4x16x16xf32>
    %182 = stablehlo.exponential %181 : tensor<1x2x4x16x16xf32>
    %cst_30 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %183 = stablehlo.reduce(%182 init: %cst_30) applies stablehlo.add across dimensions = [4] : (tensor<1x2x4x16x16xf32>, tensor<f32>) -> tensor<1x2x4x16xf32>
    %184 = stablehlo.broadcast_in_dim %183, dims = [0, 1, 2, 3] : (tensor<1x2x4x16xf32>) -> tensor<1x2x4x16x1xf32>
    %185 = stablehlo.broadcast_in_dim %184, dims = [0, 1, 2, 3, 4] : (tensor<1x2x4x16x1xf32>) -> tensor<1x2x4x16x16xf32>
    %186 = stablehlo.divide %182, %185 : tensor<1x2x4x16x16xf32>
    %187 = stablehlo.dot_general %164, %186, batching_dims = [0, 2] x [1, 2], contracting_dims = [1] x [4], precision = [HIGHEST, HIGHEST] : (tensor<2x16x4x8xf32>, tensor<1x2x4x16x16xf32>) -> tensor<2x4x8x1x16xf32>
    %188 = stablehlo.transpose %187, dims = [3, 0, 4, 1, 2] : (tensor<2x4x8x1x16xf32>) -> tensor<1x2x16x4x8xf32>
    %189 = stablehlo.transpose %188, dims = [1, 2, 3, 0, 4] : (tensor<1x2x16x4x8xf32>) -> tensor<2x16x4x1x8xf32>
    %190 = stablehlo.reshape %189 : (tensor<2x16x4x1x8xf32>) -> tensor<2x16x4x8xf32>
    %191 = stablehlo.reshape %190 : (tensor<2x16x4x8xf32>) -> tensor<2x16x32xf32>
    %192 = stablehlo.dot_general %191, %arg19, contracting_dims = [2] x [0], precision = [HIGHEST, HIGHEST] : (tensor<2x16x32xf32>, tensor<32x32xf32>) -> tensor<2x16x32xf32>
    %193 = stablehlo.reshape %arg18 : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %194 = stablehlo.broadcast_in_dim %193, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %195 = stablehlo.add %192, %194 : tensor<2x16x32xf32>
    %196 = stablehlo.add %124, %195 : tensor<2x16x32xf32>
    %cst_31 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %197 = stablehlo.reduce(%196 init: %cst_31) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %cst_32 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %198 = stablehlo.broadcast_in_dim %cst_32, dims = [] : (tensor<f32>) -> tensor<2x16xf32>
    %199 = stablehlo.divide %197, %198 : tensor<2x16xf32>
    %200 = stablehlo.broadcast_in_dim %199, dims = [0, 1] : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %201 = stablehlo.broadcast_in_dim %200, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %202 = stablehlo.subtract %196, %201 : tensor<2x16x32xf32>
    %203 = chlo.square %202 : tensor<2x16x32xf32> -> tensor<2x16x32xf32>
    %cst_33 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %204 = stablehlo.reduce(%203 init: %cst_33) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %cst_34 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %205 = stablehlo.broadcast_in_dim %cst_34, dims = [] : (tensor<f32>) -> tensor<2x16xf32>
    %206 = stablehlo.divide %204, %205 : tensor<2x16xf32>
    %207 = stablehlo.reshape %199 : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %208 = stablehlo.reshape %206 : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %209 = stablehlo.broadcast_in_dim %207, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %210 = stablehlo.subtract %196, %209 : tensor<2x16x32xf32>
    %cst_35 = stablehlo.constant dense<9.99999974E-6> : tensor<f32>
    %211 = stablehlo.broadcast_in_dim %cst_35, dims = [] : (tensor<f32>) -> tensor<2x16x1xf32>
    %212 = stablehlo.add %208, %211 : tensor<2x16x1xf32>
    %213 = stablehlo.rsqrt %212 : tensor<2x16x1xf32>
    %214 = stablehlo.reshape %arg31 : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %215 = stablehlo.broadcast_in_dim %213, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %216 = stablehlo.broadcast_in_dim %214, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %217 = stablehlo.multiply %215, %216 : tensor<2x16x32xf32>
    %218 = stablehlo.multiply %210, %217 : tensor<2x16x32xf32>
    %219 = stablehlo.reshape %arg30 : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %220 = stablehlo.broadcast_in_dim %219, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %221 = stablehlo.add %218, %220 : tensor<2x16x32xf32>
    %222 = stablehlo.dot_general %221, %arg25, contracting_dims = [2] x [0], precision = [HIGHEST, HIGHEST] : (tensor<2x16x32xf32>, tensor<32x64xf32>) -> tensor<2x16x64xf32>
    %223 = stablehlo.reshape %arg24 : (tensor<64xf32>) -> tensor<1x1x64xf32>
    %224 = stablehlo.broadcast_in_dim %223, dims = [0, 1, 2] : (tensor<1x1x64xf32>) -> tensor<2x16x64xf32>
    %225 = stablehlo.add %222, %224 : tensor<2x16x64xf32>
    %226 = stablehlo.multiply %225, %225 : tensor<2x16x64xf32>
    %227 = stablehlo.multiply %226, %225 : tensor<2x16x64xf32>
    %cst_36 = stablehlo.constant dense<4.471500e-02> : tensor<f32>
    %228 = stablehlo.broadcast_in_dim %cst_36, dims = [] : (tensor<f32>) -> tensor<2x16x64xf32>
    %229 = stablehlo.multiply %228, %227 : tensor<2x16x64xf32>
    %230 = stablehlo.add %225, %229 : tensor<2x16x64xf32>
    %cst_37 = stablehlo.constant dense<0.797884583> : tensor<f32>
    %231 = stablehlo.broadcast_in_dim %cst_37, dims = [] : (tensor<f32>) -> tensor<2x16x64xf32>
    %232 = stablehlo.multiply %231, %230 : tensor<2x16x64xf32>
    %233 = stablehlo.tanh %232 : tensor<2x16x64xf32>
    %cst_38 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %234 = stablehlo.broadcast_in_dim %cst_38, dims = [] : (tensor<f32>) -> tensor<2x16x64xf32>
    %235 = stablehlo.add %234, %233 : tensor<2x16x64xf32>
    %cst_39 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %236 = stablehlo.broadcast_in_dim %cst_39, dims = [] : (tensor<f32>) -> tensor<2x16x64xf32>
    %237 = stablehlo.multiply %236, %235 : tensor<2x16x64xf32>
    %238 = stablehlo.multiply %225, %237 : tensor<2x16x64xf32>
    %239 = stablehlo.dot_general %238, %arg27, contracting_dims = [2] x [0], precision = [HIGHEST, HIGHEST] : (tensor<2x16x64xf32>, tensor<64x32xf32>) -> tensor<2x16x32xf32>
    %240 = stablehlo.reshape %arg26 : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %241 = stablehlo.broadcast_in_dim %240, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %242 = stablehlo.add %239, %241 : tensor<2x16x32xf32>
    %243 = stablehlo.add %196, %242 : tensor<2x16x32xf32>
    %cst_40 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %244 = stablehlo.reduce(%243 init: %cst_40) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %cst_41 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %245 = stablehlo.broadcast_in_dim %cst_41, dims = [] : (tensor<f32>) -> tensor<2x16xf32>
    %246 = stablehlo.divide %244, %245 : tensor<2x16xf32>
    %247 = stablehlo.broadcast_in_dim %246, dims = [0, 1] : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %248 = stablehlo.broadcast_in_dim %247, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %249 = stablehlo.subtract %243, %248 : tensor<2x16x32xf32>
    %250 = chlo.square %249 : tensor<2x16x32xf32> -> tensor<2x16x32xf32>
    %cst_42 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %251 = stablehlo.reduce(%250 init: %cst_42) applies stablehlo.add across dimensions = [2] : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16xf32>
    %cst_43 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %252 = stablehlo.broadcast_in_dim %cst_43, dims = [] : (tensor<f32>) -> tensor<2x16xf32>
    %253 = stablehlo.divide %251, %252 : tensor<2x16xf32>
    %254 = stablehlo.reshape %246 : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %255 = stablehlo.reshape %253 : (tensor<2x16xf32>) -> tensor<2x16x1xf32>
    %256 = stablehlo.broadcast_in_dim %254, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %257 = stablehlo.subtract %243, %256 : tensor<2x16x32xf32>
    %cst_44 = stablehlo.constant dense<9.99999974E-6> : tensor<f32>
    %258 = stablehlo.broadcast_in_dim %cst_44, dims = [] : (tensor<f32>) -> tensor<2x16x1xf32>
    %259 = stablehlo.add %255, %258 : tensor<2x16x1xf32>
    %260 = stablehlo.rsqrt %259 : tensor<2x16x1xf32>
    %261 = stablehlo.reshape %arg33 : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %262 = stablehlo.broadcast_in_dim %260, dims = [0, 1, 2] : (tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
    %263 = stablehlo.broadcast_in_dim %261, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %264 = stablehlo.multiply %262, %263 : tensor<2x16x32xf32>
    %265 = stablehlo.multiply %257, %264 : tensor<2x16x32xf32>
    %266 = stablehlo.reshape %arg32 : (tensor<32xf32>) -> tensor<1x1x32xf32>
    %267 = stablehlo.broadcast_in_dim %266, dims = [0, 1, 2] : (tensor<1x1x32xf32>) -> tensor<2x16x32xf32>
    %268 = stablehlo.add %265, %267 : tensor<2x16x32xf32>
    %269 = stablehlo.transpose %arg35, dims = [1, 0] : (tensor<96x32xf32>) -> tensor<32x96xf32>
    %270 = stablehlo.dot_general %268, %269, contracting_dims = [2] x [0], precision = [HIGHEST, HIGHEST] : (tensor<2x16x32xf32>, tensor<32x96xf32>) -> tensor<2x16x96xf32>
    return %270 : tensor<2x16x96xf32>
  }
  func.func private @_take(%arg0: tensor<96x32xf32>, %arg1: tensor<2x16xi32>) -> tensor<2x16x32xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<2x16xi32>
    %1 = stablehlo.compare LT, %arg1, %0, SIGNED : (tensor<2x16xi32>, tensor<2x16xi32>) -> tensor<2x16xi1>
    %c_0 = stablehlo.constant dense<96> : tensor<i32>
    %2 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<2x16xi32>
    %3 = stablehlo.add %arg1, %2 : tensor<2x16xi32>
    %4 = call @_where(%1, %3, %arg1) : (tensor<2x16xi1>, tensor<2x16xi32>, tensor<2x16xi32>) -> tensor<2x16xi32>
    %5 = stablehlo.broadcast_in_dim %4, dims = [0, 1] : (tensor<2x16xi32>) -> tensor<2x16x1xi32>
    %c_1 = stablehlo.constant dense<95> : tensor<1xi32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %6 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<i32>) -> tensor<2x16x1xi32>
    %7 = stablehlo.compare GE, %5, %6, SIGNED : (tensor<2x16x1xi32>, tensor<2x16x1xi32>) -> tensor<2x16x1xi1>
    %8 = stablehlo.broadcast_in_dim %c_1, dims = [2] : (tensor<1xi32>) -> tensor<1x1x1xi32>
    %9 = stablehlo.broadcast_in_dim %8, dims = [0, 1, 2] : (tensor<1x1x1xi32>) -> tensor<2x16x1xi32>
    %10 = stablehlo.compare LE, %5, %9, SIGNED : (tensor<2x16x1xi32>, tensor<2x16x1xi32>) -> tensor<2x16x1xi1>
    %11 = stablehlo.and %7, %10 : tensor<2x16x1xi1>
    %c_3 = stablehlo.constant dense<true> : tensor<i1>
    %12 = stablehlo.reduce(%11 init: %c_3) applies stablehlo.and across dimensions = [2] : (tensor<2x16x1xi1>, tensor<i1>) -> tensor<2x16xi1>
    %13 = "stablehlo.gather"(%arg0, %5) <{dimension_numbers = #stablehlo.gather<offset_dims = [2], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 2>, indices_are_sorted = false, slice_sizes = array<i64: 1, 32>}> : (tensor<96x32xf32>, tensor<2x16x1xi32>) -> tensor<2x16x32xf32>
    %14 = stablehlo.broadcast_in_dim %12, dims = [0, 1] : (tensor<2x16xi1>) -> tensor<2x16x32xi1>
    %cst = stablehlo.constant dense<0x7FC00000> : tensor<f32>
    %15 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x16x32xf32>
    %16 = stablehlo.select %14, %13, %15 : tensor<2x16x32xi1>, tensor<2x16x32xf32>
    return %16 : tensor<2x16x32xf32>
  }
  func.func private @_where(%arg0: tensor<2x16xi1>, %arg1: tensor<2x16xi32>, %arg2: tensor<2x16xi32>) -> tensor<2x16xi32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<2x16xi1>, tensor<2x16xi32>
    return %0 : tensor<2x16xi32>
  }
  func.func private @_take_0(%arg0: tensor<32x32xf32>, %arg1: tensor<16xi32>) -> tensor<16x32xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<16xi32>
    %1 = stablehlo.compare LT, %arg1, %0, SIGNED : (tensor<16xi32>, tensor<16xi32>) -> tensor<16xi1>
    %c_0 = stablehlo.constant dense<32> : tensor<i32>
    %2 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<16xi32>
    %3 = stablehlo.add %arg1, %2 : tensor<16xi32>
    %4 = call @_where_1(%1, %3, %arg1) : (tensor<16xi1>, tensor<16xi32>, tensor<16xi32>) -> tensor<16xi32>
    %5 = stablehlo.broadcast_in_dim %4, dims = [0] : (tensor<16xi32>) -> tensor<16x1xi32>
    %c_1 = stablehlo.constant dense<31> : tensor<1xi32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %6 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<i32>) -> tensor<16x1xi32>
    %7 = stablehlo.compare GE, %5, %6, SIGNED : (tensor<16x1xi32>, tensor<16x1xi32>) -> tensor<16x1xi1>
    %8 = stablehlo.broadcast_in_dim %c_1, dims = [1] : (tensor<1xi32>) -> tensor<1x1xi32>
    %9 = stablehlo.broadcast_in_dim %8, dims = [0, 1] : (tensor<1x1xi32>) -> tensor<16x1xi32>
    %10 = stablehlo.compare LE, %5, %9, SIGNED : (tensor<16x1xi32>, tensor<16x1xi32>) -> tensor<16x1xi1>
    %11 = stablehlo.and %7, %10 : tensor<16x1xi1>
    %c_3 = stablehlo.constant dense<true> : tensor<i1>
    %12 = stablehlo.reduce(%11 init: %c_3) applies stablehlo.and across dimensions = [1] : (tensor<16x1xi1>, tensor<i1>) -> tensor<16xi1>
    %13 = "stablehlo.gather"(%arg0, %5) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 32>}> : (tensor<32x32xf32>, tensor<16x1xi32>) -> tensor<16x32xf32>
    %14 = stablehlo.broadcast_in_dim %12, dims = [0] : (tensor<16xi1>) -> tensor<16x32xi1>
    %cst = stablehlo.constant dense<0x7FC00000> : tensor<f32>
    %15 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<16x32xf32>
    %16 = stablehlo.select %14, %13, %15 : tensor<16x32xi1>, tensor<16x32xf32>
    return %16 : tensor<16x32xf32>
  }
  func.func private @_where_1(%arg0: tensor<16xi1>, %arg1: tensor<16xi32>, %arg2: tensor<16xi32>) -> tensor<16xi32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<16xi1>, tensor<16xi32>
    return %0 : tensor<16xi32>
  }
  func.func private @tril(%arg0: tensor<16x16xi1>) -> tensor<16x16xi1> {
    %0 = stablehlo.iota dim = 0 : tensor<16x16xi32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<16x16xi32>
    %2 = stablehlo.add %0, %1 : tensor<16x16xi32>
    %3 = stablehlo.iota dim = 1 : tensor<16x16xi32>
    %4 = stablehlo.compare GE, %2, %3, SIGNED : (tensor<16x16xi32>, tensor<16x16xi32>) -> tensor<16x16xi1>
    %c_0 = stablehlo.constant dense<false> : tensor<i1>
    %5 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i1>) -> tensor<16x16xi1>
    %6 = stablehlo.select %4, %arg0, %5 : tensor<16x16xi1>, tensor<16x16xi1>
    return %6 : tensor<16x16xi1>
  }
  func.func private @_where_2(%arg0: tensor<2x4x16x16xi1>, %arg1: tensor<2x4x16x1x16xf32>, %arg2: tensor<f32>) -> tensor<1x2x4x16x16xf32> {
    %0 = stablehlo.broadcast_in_dim %arg2, dims = [] : (tensor<f32>) -> tensor<2x4x16x16xf32>
    %1 = stablehlo.broadcast_in_dim %arg0, dims = [1, 2, 3, 4] : (tensor<2x4x16x16xi1>) -> tensor<1x2x4x16x16xi1>
    %2 = stablehlo.broadcast_in_dim %0, dims = [1, 2, 3, 4] : (tensor<2x4x16x16xf32>) -> tensor<1x2x4x16x16xf32>
    %3 = stablehlo.transpose %arg1, dims = [3, 0, 1, 2, 4] : (tensor<2x4x16x1x16xf32>) -> tensor<1x2x4x16x16xf32>
    %4 = stablehlo.select %1, %3, %2 : tensor<1x2x4x16x16xi1>, tensor<1x2x4x16x16xf32>
    return %4 : tensor<1x2x4x16x16xf32>
  }
}
