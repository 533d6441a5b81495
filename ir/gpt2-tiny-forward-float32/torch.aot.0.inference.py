class <lambda>(torch.nn.Module):
    def forward(self, arg0_1: "i64[2, 16]", arg1_1: "f32[96, 32]", arg2_1: "f32[32, 32]", arg3_1: "f32[32]", arg4_1: "f32[32]", arg5_1: "f32[32, 32]", arg6_1: "f32[32]", arg7_1: "f32[32, 32]", arg8_1: "f32[32]", arg9_1: "f32[32, 32]", arg10_1: "f32[32]", arg11_1: "f32[32, 32]", arg12_1: "f32[32]", arg13_1: "f32[32]", arg14_1: "f32[32]", arg15_1: "f32[64, 32]", arg16_1: "f32[64]", arg17_1: "f32[32, 64]", arg18_1: "f32[32]", arg19_1: "f32[32]", arg20_1: "f32[32]", arg21_1: "f32[32, 32]", arg22_1: "f32[32]", arg23_1: "f32[32, 32]", arg24_1: "f32[32]", arg25_1: "f32[32, 32]", arg26_1: "f32[32]", arg27_1: "f32[32, 32]", arg28_1: "f32[32]", arg29_1: "f32[32]", arg30_1: "f32[32]", arg31_1: "f32[64, 32]", arg32_1: "f32[64]", arg33_1: "f32[32, 64]", arg34_1: "f32[32]", arg35_1: "f32[32]", arg36_1: "f32[32]"):
        # File: /work/main/stackwars/workloads/models/torch_nets.py:161 in hidden, code: x = self.tok_emb(ids)
        embedding: "f32[2, 16, 32]" = torch.ops.aten.embedding.default(arg1_1, arg0_1);  arg0_1 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:163 in hidden, code: x = x + self.pos_emb(torch.arange(T, device=ids.device))
        iota: "i64[16]" = torch.ops.prims.iota.default(16, start = 0, step = 1, dtype = torch.int64, device = device(type='cpu'), requires_grad = False)
        embedding_1: "f32[16, 32]" = torch.ops.aten.embedding.default(arg2_1, iota);  arg2_1 = iota = None
        add: "f32[2, 16, 32]" = torch.ops.aten.add.Tensor(embedding, embedding_1);  embedding = embedding_1 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:118 in forward, code: x = x + self.attn(self.norm1(x), rope)
        var_mean = torch.ops.aten.var_mean.correction(add, [2], correction = 0, keepdim = True)
        getitem: "f32[2, 16, 1]" = var_mean[0]
        getitem_1: "f32[2, 16, 1]" = var_mean[1];  var_mean = None
        add_1: "f32[2, 16, 1]" = torch.ops.aten.add.Tensor(getitem, 1e-05);  getitem = None
        rsqrt: "f32[2, 16, 1]" = torch.ops.aten.rsqrt.default(add_1);  add_1 = None
        sub: "f32[2, 16, 32]" = torch.ops.aten.sub.Tensor(add, getitem_1);  getitem_1 = None
        mul: "f32[2, 16, 32]" = torch.ops.aten.mul.Tensor(sub, rsqrt);  sub = rsqrt = None
        mul_1: "f32[2, 16, 32]" = torch.ops.aten.mul.Tensor(mul, arg3_1);  mul = arg3_1 = None
        add_2: "f32[2, 16, 32]" = torch.ops.aten.add.Tensor(mul_1, arg4_1);  mul_1 = arg4_1 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:65 in forward, code: q = self.q(x).view(B, T, H, hd).transpose(1, 2)  # [B, H, T, hd]
        view: "f32[32, 32]" = torch.ops.aten.view.default(add_2, [32, 32])
        permute: "f32[32, 32]" = torch.ops.aten.permute.default(arg5_1, [1, 0]);  arg5_1 = None
        addmm: "f32[32, 32]" = torch.ops.aten.addmm.default(arg6_1, view, permute);  arg6_1 = view = permute = None
        view_1: "f32[2, 16, 32]" = torch.ops.aten.view.default(addmm, [2, 16, 32]);  addmm = None
        view_2: "f32[2, 16, 4, 8]" = torch.ops.aten.view.default(view_1, [2, 16, 4, 8]);  view_1 = None
        permute_1: "f32[2, 4, 16, 8]" = torch.ops.aten.permute.default(view_2, [0, 2, 1, 3]);  view_2 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:66 in forward, code: k = self.k(x).view(B, T, K, hd).transpose(1, 2)  # [B, K, T, hd]
        view_3: "f32[32, 32]" = torch.ops.aten.view.default(add_2, [32, 32])
        permute_2: "f32[32, 32]" = torch.ops.aten.permute.default(arg7_1, [1, 0]);  arg7_1 = None
        addmm_1: "f32[32, 32]" = torch.ops.aten.addmm.default(arg8_1, view_3, permute_2);  arg8_1 = view_3 = permute_2 = None
        view_4: "f32[2, 16, 32]" = torch.ops.aten.view.default(addmm_1, [2, 16, 32]);  addmm_1 = None
        view_5: "f32[2, 16, 4, 8]" = torch.ops.aten.view.default(view_4, [2, 16, 4, 8]);  view_4 = None
        permute_3: "f32[2, 4, 16, 8]" = torch.ops.aten.permute.default(view_5, [0, 2, 1, 3]);  view_5 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:67 in forward, code: v = self.v(x).view(B, T, K, hd).transpose(1, 2)  # [B, K, T, hd]
        view_6: "f32[32, 32]" = torch.ops.aten.view.default(add_2, [32, 32]);  add_2 = None
        permute_4: "f32[32, 32]" = torch.ops.aten.permute.default(arg9_1, [1, 0]);  arg9_1 = None
        addmm_2: "f32[32, 32]" = torch.ops.aten.addmm.default(arg10_1, view_6, permute_4);  arg10_1 = view_6 = permute_4 = None
        view_7: "f32[2, 16, 32]" = torch.ops.aten.view.default(addmm_2, [2, 16, 32]);  addmm_2 = None
        view_8: "f32[2, 16, 4, 8]" = torch.ops.aten.view.default(view_7, [2, 16, 4, 8]);  view_7 = None
        permute_5: "f32[2, 4, 16, 8]" = torch.ops.aten.permute.default(view_8, [0, 2, 1, 3]);  view_8 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:78 in forward, code: y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal and mask is None,
        _scaled_dot_product_flash_attention_for_cpu = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(permute_1, permute_3, permute_5, 0.0, True, scale = 0.35355339059327373);  permute_1 = permute_3 = permute_5 = None
        getitem_2: "f32[2, 4, 16, 8]" = _scaled_dot_product_flash_attention_for_cpu[0];  _scaled_dot_product_flash_attention_for_cpu = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:88 in forward, code: return self.o(y.transpose(1, 2).reshape(B, T, H * hd))
        permute_6: "f32[2, 16, 4, 8]" = torch.ops.aten.permute.default(getitem_2, [0, 2, 1, 3]);  getitem_2 = None
        view_9: "f32[2, 16, 32]" = torch.ops.aten.view.default(permute_6, [2, 16, 32]);  permute_6 = None
        view_10: "f32[32, 32]" = torch.ops.aten.view.default(view_9, [32, 32]);  view_9 = None
        permute_7: "f32[32, 32]" = torch.ops.aten.permute.default(arg11_1, [1, 0]);  arg11_1 = None
        addmm_3: "f32[32, 32]" = torch.ops.aten.addmm.default(arg12_1, view_10, permute_7);  arg12_1 = view_10 = permute_7 = None
        view_11: "f32[2, 16, 32]" = torch.ops.aten.view.default(addmm_3, [2, 16, 32]);  addmm_3 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:118 in forward, code: x = x + self.attn(self.norm1(x), rope)
        add_3: "f32[2, 16, 32]" = torch.ops.aten.add.Tensor(add, view_11);  add = view_11 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:119 in forward, code: return x + self.mlp(self.norm2(x))
        var_mean_1 = torch.ops.aten.var_mean.correction(add_3, [2], correction = 0, keepdim = True)
        getitem_4: "f32[2, 16, 1]" = var_mean_1[0]
        getitem_5: "f32[2, 16, 1]" = var_mean_1[1];  var_mean_1 = None
        add_4: "f32[2, 16, 1]" = torch.ops.aten.add.Tensor(getitem_4, 1e-05);  getitem_4 = None
        rsqrt_1: "f32[2, 16, 1]" = torch.ops.aten.rsqrt.default(add_4);  add_4 = None
        sub_1: "f32[2, 16, 32]" = torch.ops.aten.sub.Tensor(add_3, getitem_5);  getitem_5 = None
        mul_2: "f32[2, 16, 32]" = torch.ops.aten.mul.Tensor(sub_1, rsqrt_1);  sub_1 = rsqrt_1 = None
        mul_3: "f32[2, 16, 32]" = torch.ops.aten.mul.Tensor(mul_2, arg13_1);  mul_2 = arg13_1 = None
        add_5: "f32[2, 16, 32]" = torch.ops.aten.add.Tensor(mul_3, arg14_1);  mul_3 = arg14_1 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:107 in forward, code: return self.proj(F.gelu(self.fc(x), approximate=self.approximate))
        view_12: "f32[32, 32]" = torch.ops.aten.view.default(add_5, [32, 32]);  add_5 = None
        permute_8: "f32[32, 64]" = torch.ops.aten.permute.default(arg15_1, [1, 0]);  arg15_1 = None
        addmm_4: "f32[32, 64]" = torch.ops.aten.addmm.default(arg16_1, view_12, permute_8);  arg16_1 = view_12 = permute_8 = None
        view_13: "f32[2, 16, 64]" = torch.ops.aten.view.default(addmm_4, [2, 16, 64]);  addmm_4 = None
        mul_4: "f32[2, 16, 64]" = torch.ops.aten.mul.Tensor(view_13, view_13)
        mul_5: "f32[2, 16, 64]" = torch.ops.aten.mul.Tensor(mul_4, view_13);  mul_4 = None
        mul_6: "f32[2, 16, 64]" = torch.ops.aten.mul.Tensor(mul_5, 0.044715);  mul_5 = None
        add_6: "f32[2, 16, 64]" = torch.ops.aten.add.Tensor(view_13, mul_6);  mul_6 = None
        mul_7: "f32[2, 16, 64]" = torch.ops.aten.mul.Tensor(add_6, 0.7978845608028654);  add_6 = None
        mul_8: "f32[2, 16, 64]" = torch.ops.aten.mul.Tensor(view_13, 0.5);  view_13 = None
        tanh: "f32[2, 16, 64]" = torch.ops.aten.tanh.default(mul_7);  mul_7 = None
        add_7: "f32[2, 16, 64]" = torch.ops.aten.add.Tensor(tanh, 1);  tanh = None
        mul_9: "f32[2, 16, 64]" = torch.ops.aten.mul.Tensor(mul_8, add_7);  mul_8 = add_7 = None
        view_14: "f32[32, 64]" = torch.ops.aten.view.default(mul_9, [32, 64]);  mul_9 = None
        permute_9: "f32[64, 32]" = torch.ops.aten.permute.default(arg17_1, [1, 0]);  arg17_1 = None
        addmm_5: "f32[32, 32]" = torch.ops.aten.addmm.default(arg18_1, view_14, permute_9);  arg18_1 = view_14 = permute_9 = None
        view_15: "f32[2, 16, 32]" = torch.ops.aten.view.default(addmm_5, [2, 16, 32]);  addmm_5 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:119 in forward, code: return x + self.mlp(self.norm2(x))
        add_8: "f32[2, 16, 32]" = torch.ops.aten.add.Tensor(add_3, view_15);  add_3 = view_15 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:118 in forward, code: x = x + self.attn(self.norm1(x), rope)
        var_mean_2 = torch.ops.aten.var_mean.correction(add_8, [2], correction = 0, keepdim = True)
        getitem_6: "f32[2, 16, 1]" = var_mean_2[0]
        getitem_7: "f32[2, 16, 1]" = var_mean_2[1];  var_mean_2 = None
        add_9: "f32[2, 16, 1]" = torch.ops.aten.add.Tensor(getitem_6, 1e-05);  getitem_6 = None
        rsqrt_2: "f32[2, 16, 1]" = torch.ops.aten.rsqrt.default(add_9);  add_9 = None
        sub_2: "f32[2, 16, 32]" = torch.ops.aten.sub.Tensor(add_8, getitem_7);  getitem_7 = None
        mul_10: "f32[2, 16, 32]" = torch.ops.aten.mul.Tensor(sub_2, rsqrt_2);  sub_2 = rsqrt_2 = None
        mul_11: "f32[2, 16, 32]" = torch.ops.aten.mul.Tensor(mul_10, arg19_1);  mul_10 = arg19_1 = None
        add_10: "f32[2, 16, 32]" = torch.ops.aten.add.Tensor(mul_11, arg20_1);  mul_11 = arg20_1 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:65 in forward, code: q = self.q(x).view(B, T, H, hd).transpose(1, 2)  # [B, H, T, hd]
        view_16: "f32[32, 32]" = torch.ops.aten.view.default(add_10, [32, 32])
        permute_10: "f32[32, 32]" = torch.ops.aten.permute.default(arg21_1, [1, 0]);  arg21_1 = None
        addmm_6: "f32[32, 32]" = torch.ops.aten.addmm.default(arg22_1, view_16, permute_10);  arg22_1 = view_16 = permute_10 = None
        view_17: "f32[2, 16, 32]" = torch.ops.aten.view.default(addmm_6, [2, 16, 32]);  addmm_6 = None
        view_18: "f32[2, 16, 4, 8]" = torch.ops.aten.view.default(view_17, [2, 16, 4, 8]);  view_17 = None
        permute_11: "f32[2, 4, 16, 8]" = torch.ops.aten.permute.default(view_18, [0, 2, 1, 3]);  view_18 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:66 in forward, code: k = self.k(x).view(B, T, K, hd).transpose(1, 2)  # [B, K, T, hd]
        view_19: "f32[32, 32]" = torch.ops.aten.view.default(add_10, [32, 32])
        permute_12: "f32[32, 32]" = torch.ops.aten.permute.default(arg23_1, [1, 0]);  arg23_1 = None
        addmm_7: "f32[32, 32]" = torch.ops.aten.addmm.default(arg24_1, view_19, permute_12);  arg24_1 = view_19 = permute_12 = None
        view_20: "f32[2, 16, 32]" = torch.ops.aten.view.default(addmm_7, [2, 16, 32]);  addmm_7 = None
        view_21: "f32[2, 16, 4, 8]" = torch.ops.aten.view.default(view_20, [2, 16, 4, 8]);  view_20 = None
        permute_13: "f32[2, 4, 16, 8]" = torch.ops.aten.permute.default(view_21, [0, 2, 1, 3]);  view_21 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:67 in forward, code: v = self.v(x).view(B, T, K, hd).transpose(1, 2)  # [B, K, T, hd]
        view_22: "f32[32, 32]" = torch.ops.aten.view.default(add_10, [32, 32]);  add_10 = None
        permute_14: "f32[32, 32]" = torch.ops.aten.permute.default(arg25_1, [1, 0]);  arg25_1 = None
        addmm_8: "f32[32, 32]" = torch.ops.aten.addmm.default(arg26_1, view_22, permute_14);  arg26_1 = view_22 = permute_14 = None
        view_23: "f32[2, 16, 32]" = torch.ops.aten.view.default(addmm_8, [2, 16, 32]);  addmm_8 = None
        view_24: "f32[2, 16, 4, 8]" = torch.ops.aten.view.default(view_23, [2, 16, 4, 8]);  view_23 = None
        permute_15: "f32[2, 4, 16, 8]" = torch.ops.aten.permute.default(view_24, [0, 2, 1, 3]);  view_24 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:78 in forward, code: y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal and mask is None,
        _scaled_dot_product_flash_attention_for_cpu_1 = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(permute_11, permute_13, permute_15, 0.0, True, scale = 0.35355339059327373);  permute_11 = permute_13 = permute_15 = None
        getitem_8: "f32[2, 4, 16, 8]" = _scaled_dot_product_flash_attention_for_cpu_1[0];  _scaled_dot_product_flash_attention_for_cpu_1 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:88 in forward, code: return self.o(y.transpose(1, 2).reshape(B, T, H * hd))
        permute_16: "f32[2, 16, 4, 8]" = torch.ops.aten.permute.default(getitem_8, [0, 2, 1, 3]);  getitem_8 = None
        view_25: "f32[2, 16, 32]" = torch.ops.aten.view.default(permute_16, [2, 16, 32]);  permute_16 = None
        view_26: "f32[32, 32]" = torch.ops.aten.view.default(view_25, [32, 32]);  view_25 = None
        permute_17: "f32[32, 32]" = torch.ops.aten.permute.default(arg27_1, [1, 0]);  arg27_1 = None
        addmm_9: "f32[32, 32]" = torch.ops.aten.addmm.default(arg28_1, view_26, permute_17);  arg28_1 = view_26 = permute_17 = None
        view_27: "f32[2, 16, 32]" = torch.ops.aten.view.default(addmm_9, [2, 16, 32]);  addmm_9 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:118 in forward, code: x = x + self.attn(self.norm1(x), rope)
        add_11: "f32[2, 16, 32]" = torch.ops.aten.add.Tensor(add_8, view_27);  add_8 = view_27 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:119 in forward, code: return x + self.mlp(self.norm2(x))
        var_mean_3 = torch.ops.aten.var_mean.correction(add_11, [2], correction = 0, keepdim = True)
        getitem_10: "f32[2, 16, 1]" = var_mean_3[0]
        getitem_11: "f32[2, 16, 1]" = var_mean_3[1];  var_mean_3 = None
        add_12: "f32[2, 16, 1]" = torch.ops.aten.add.Tensor(getitem_10, 1e-05);  getitem_10 = None
        rsqrt_3: "f32[2, 16, 1]" = torch.ops.aten.rsqrt.default(add_12);  add_12 = None
        sub_3: "f32[2, 16, 32]" = torch.ops.aten.sub.Tensor(add_11, getitem_11);  getitem_11 = None
        mul_12: "f32[2, 16, 32]" = torch.ops.aten.mul.Tensor(sub_3, rsqrt_3);  sub_3 = rsqrt_3 = None
        mul_13: "f32[2, 16, 32]" = torch.ops.aten.mul.Tensor(mul_12, arg29_1);  mul_12 = arg29_1 = None
        add_13: "f32[2, 16, 32]" = torch.ops.aten.add.Tensor(mul_13, arg30_1);  mul_13 = arg30_1 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:107 in forward, code: return self.proj(F.gelu(self.fc(x), approximate=self.approximate))
        view_28: "f32[32, 32]" = torch.ops.aten.view.default(add_13, [32, 32]);  add_13 = None
        permute_18: "f32[32, 64]" = torch.ops.aten.permute.default(arg31_1, [1, 0]);  arg31_1 = None
        addmm_10: "f32[32, 64]" = torch.ops.aten.addmm.default(arg32_1, view_28, permute_18);  arg32_1 = view_28 = permute_18 = None
        view_29: "f32[2, 16, 64]" = torch.ops.aten.view.default(addmm_10, [2, 16, 64]);  addmm_10 = None
        mul_14: "f32[2, 16, 64]" = torch.ops.aten.mul.Tensor(view_29, view_29)
        mul_15: "f32[2, 16, 64]" = torch.ops.aten.mul.Tensor(mul_14, view_29);  mul_14 = None
        mul_16: "f32[2, 16, 64]" = torch.ops.aten.mul.Tensor(mul_15, 0.044715);  mul_15 = None
        add_14: "f32[2, 16, 64]" = torch.ops.aten.add.Tensor(view_29, mul_16);  mul_16 = None
        mul_17: "f32[2, 16, 64]" = torch.ops.aten.mul.Tensor(add_14, 0.7978845608028654);  add_14 = None
        mul_18: "f32[2, 16, 64]" = torch.ops.aten.mul.Tensor(view_29, 0.5);  view_29 = None
        tanh_1: "f32[2, 16, 64]" = torch.ops.aten.tanh.default(mul_17);  mul_17 = None
        add_15: "f32[2, 16, 64]" = torch.ops.aten.add.Tensor(tanh_1, 1);  tanh_1 = None
        mul_19: "f32[2, 16, 64]" = torch.ops.aten.mul.Tensor(mul_18, add_15);  mul_18 = add_15 = None
        view_30: "f32[32, 64]" = torch.ops.aten.view.default(mul_19, [32, 64]);  mul_19 = None
        permute_19: "f32[64, 32]" = torch.ops.aten.permute.default(arg33_1, [1, 0]);  arg33_1 = None
        addmm_11: "f32[32, 32]" = torch.ops.aten.addmm.default(arg34_1, view_30, permute_19);  arg34_1 = view_30 = permute_19 = None
        view_31: "f32[2, 16, 32]" = torch.ops.aten.view.default(addmm_11, [2, 16, 32]);  addmm_11 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:119 in forward, code: return x + self.mlp(self.norm2(x))
        add_16: "f32[2, 16, 32]" = torch.ops.aten.add.Tensor(add_11, view_31);  add_11 = view_31 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:177 in hidden, code: return self.final_norm(x) if self.cfg.final_norm else x
        var_mean_4 = torch.ops.aten.var_mean.correction(add_16, [2], correction = 0, keepdim = True)
        getitem_12: "f32[2, 16, 1]" = var_mean_4[0]
        getitem_13: "f32[2, 16, 1]" = var_mean_4[1];  var_mean_4 = None
        add_17: "f32[2, 16, 1]" = torch.ops.aten.add.Tensor(getitem_12, 1e-05);  getitem_12 = None
        rsqrt_4: "f32[2, 16, 1]" = torch.ops.aten.rsqrt.default(add_17);  add_17 = None
        sub_4: "f32[2, 16, 32]" = torch.ops.aten.sub.Tensor(add_16, getitem_13);  add_16 = getitem_13 = None
        mul_20: "f32[2, 16, 32]" = torch.ops.aten.mul.Tensor(sub_4, rsqrt_4);  sub_4 = rsqrt_4 = None
        mul_21: "f32[2, 16, 32]" = torch.ops.aten.mul.Tensor(mul_20, arg35_1);  mul_20 = arg35_1 = None
        add_18: "f32[2, 16, 32]" = torch.ops.aten.add.Tensor(mul_21, arg36_1);  mul_21 = arg36_1 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:187 in forward, code: logits = h @ weight.T  # [B, T, vocab]
        permute_20: "f32[32, 96]" = torch.ops.aten.permute.default(arg1_1, [1, 0]);  arg1_1 = None
        view_32: "f32[32, 32]" = torch.ops.aten.view.default(add_18, [32, 32]);  add_18 = None
        mm: "f32[32, 96]" = torch.ops.aten.mm.default(view_32, permute_20);  view_32 = permute_20 = None
        view_33: "f32[2, 16, 96]" = torch.ops.aten.view.default(mm, [2, 16, 96]);  mm = None
        return (view_33,)
