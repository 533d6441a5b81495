class GraphModule(torch.nn.Module):
    def forward(self, L_batch_ids_: "i64[2, 16]", L_model_modules_tok_emb_parameters_weight_: "f32[96, 32]", L_model_modules_pos_emb_parameters_weight_: "f32[32, 32]", L_model_modules_blocks_modules_0_modules_norm1_parameters_weight_: "f32[32]", L_model_modules_blocks_modules_0_modules_norm1_parameters_bias_: "f32[32]", L_model_modules_blocks_modules_0_modules_attn_modules_q_parameters_weight_: "f32[32, 32]", L_model_modules_blocks_modules_0_modules_attn_modules_q_parameters_bias_: "f32[32]", L_model_modules_blocks_modules_0_modules_attn_modules_k_parameters_weight_: "f32[32, 32]", L_model_modules_blocks_modules_0_modules_attn_modules_k_parameters_bias_: "f32[32]", L_model_modules_blocks_modules_0_modules_attn_modules_v_parameters_weight_: "f32[32, 32]", L_model_modules_blocks_modules_0_modules_attn_modules_v_parameters_bias_: "f32[32]", L_model_modules_blocks_modules_0_modules_attn_modules_o_parameters_weight_: "f32[32, 32]", L_model_modules_blocks_modules_0_modules_attn_modules_o_parameters_bias_: "f32[32]", L_model_modules_blocks_modules_0_modules_norm2_parameters_weight_: "f32[32]", L_model_modules_blocks_modules_0_modules_norm2_parameters_bias_: "f32[32]", L_model_modules_blocks_modules_0_modules_mlp_modules_fc_parameters_weight_: "f32[64, 32]", L_model_modules_blocks_modules_0_modules_mlp_modules_fc_parameters_bias_: "f32[64]", L_model_modules_blocks_modules_0_modules_mlp_modules_proj_parameters_weight_: "f32[32, 64]", L_model_modules_blocks_modules_0_modules_mlp_modules_proj_parameters_bias_: "f32[32]", L_model_modules_blocks_modules_1_modules_norm1_parameters_weight_: "f32[32]", L_model_modules_blocks_modules_1_modules_norm1_parameters_bias_: "f32[32]", L_model_modules_blocks_modules_1_modules_attn_modules_q_parameters_weight_: "f32[32, 32]", L_model_modules_blocks_modules_1_modules_attn_modules_q_parameters_bias_: "f32[32]", L_model_modules_blocks_modules_1_modules_attn_modules_k_parameters_weight_: "f32[32, 32]", L_model_modules_blocks_modules_1_modules_attn_modules_k_parameters_bias_: "f32[32]", L_model_modules_blocks_modules_1_modules_attn_modules_v_parameters_weight_: "f32[32, 32]", L_model_modules_blocks_modules_1_modules_attn_modules_v_parameters_bias_: "f32[32]", L_model_modules_blocks_modules_1_modules_attn_modules_o_parameters_weight_: "f32[32, 32]", L_model_modules_blocks_modules_1_modules_attn_modules_o_parameters_bias_: "f32[32]", L_model_modules_blocks_modules_1_modules_norm2_parameters_weight_: "f32[32]", L_model_modules_blocks_modules_1_modules_norm2_parameters_bias_: "f32[32]", L_model_modules_blocks_modules_1_modules_mlp_modules_fc_parameters_weight_: "f32[64, 32]", L_model_modules_blocks_modules_1_modules_mlp_modules_fc_parameters_bias_: "f32[64]", L_model_modules_blocks_modules_1_modules_mlp_modules_proj_parameters_weight_: "f32[32, 64]", L_model_modules_blocks_modules_1_modules_mlp_modules_proj_parameters_bias_: "f32[32]", L_model_modules_final_norm_parameters_weight_: "f32[32]", L_model_modules_final_norm_parameters_bias_: "f32[32]"):
        l_batch_ids_ = L_batch_ids_
        l_model_modules_tok_emb_parameters_weight_ = L_model_modules_tok_emb_parameters_weight_
        l_model_modules_pos_emb_parameters_weight_ = L_model_modules_pos_emb_parameters_weight_
        l_model_modules_blocks_modules_0_modules_norm1_parameters_weight_ = L_model_modules_blocks_modules_0_modules_norm1_parameters_weight_
        l_model_modules_blocks_modules_0_modules_norm1_parameters_bias_ = L_model_modules_blocks_modules_0_modules_norm1_parameters_bias_
        l_model_modules_blocks_modules_0_modules_attn_modules_q_parameters_weight_ = L_model_modules_blocks_modules_0_modules_attn_modules_q_parameters_weight_
        l_model_modules_blocks_modules_0_modules_attn_modules_q_parameters_bias_ = L_model_modules_blocks_modules_0_modules_attn_modules_q_parameters_bias_
        l_model_modules_blocks_modules_0_modules_attn_modules_k_parameters_weight_ = L_model_modules_blocks_modules_0_modules_attn_modules_k_parameters_weight_
        l_model_modules_blocks_modules_0_modules_attn_modules_k_parameters_bias_ = L_model_modules_blocks_modules_0_modules_attn_modules_k_parameters_bias_
        l_model_modules_blocks_modules_0_modules_attn_modules_v_parameters_weight_ = L_model_modules_blocks_modules_0_modules_attn_modules_v_parameters_weight_
        l_model_modules_blocks_modules_0_modules_attn_modules_v_parameters_bias_ = L_model_modules_blocks_modules_0_modules_attn_modules_v_parameters_bias_
        l_model_modules_blocks_modules_0_modules_attn_modules_o_parameters_weight_ = L_model_modules_blocks_modules_0_modules_attn_modules_o_parameters_weight_
        l_model_modules_blocks_modules_0_modules_attn_modules_o_parameters_bias_ = L_model_modules_blocks_modules_0_modules_attn_modules_o_parameters_bias_
        l_model_modules_blocks_modules_0_modules_norm2_parameters_weight_ = L_model_modules_blocks_modules_0_modules_norm2_parameters_weight_
        l_model_modules_blocks_modules_0_modules_norm2_parameters_bias_ = L_model_modules_blocks_modules_0_modules_norm2_parameters_bias_
        l_model_modules_blocks_modules_0_modules_mlp_modules_fc_parameters_weight_ = L_model_modules_blocks_modules_0_modules_mlp_modules_fc_parameters_weight_
        l_model_modules_blocks_modules_0_modules_mlp_modules_fc_parameters_bias_ = L_model_modules_blocks_modules_0_modules_mlp_modules_fc_parameters_bias_
        l_model_modules_blocks_modules_0_modules_mlp_modules_proj_parameters_weight_ = L_model_modules_blocks_modules_0_modules_mlp_modules_proj_parameters_weight_
        l_model_modules_blocks_modules_0_modules_mlp_modules_proj_parameters_bias_ = L_model_modules_blocks_modules_0_modules_mlp_modules_proj_parameters_bias_
        l_model_modules_blocks_modules_1_modules_norm1_parameters_weight_ = L_model_modules_blocks_modules_1_modules_norm1_parameters_weight_
        l_model_modules_blocks_modules_1_modules_norm1_parameters_bias_ = L_model_modules_blocks_modules_1_modules_norm1_parameters_bias_
        l_model_modules_blocks_modules_1_modules_attn_modules_q_parameters_weight_ = L_model_modules_blocks_modules_1_modules_attn_modules_q_parameters_weight_
        l_model_modules_blocks_modules_1_modules_attn_modules_q_parameters_bias_ = L_model_modules_blocks_modules_1_modules_attn_modules_q_parameters_bias_
        l_model_modules_blocks_modules_1_modules_attn_modules_k_parameters_weight_ = L_model_modules_blocks_modules_1_modules_attn_modules_k_parameters_weight_
        l_model_modules_blocks_modules_1_modules_attn_modules_k_parameters_bias_ = L_model_modules_blocks_modules_1_modules_attn_modules_k_parameters_bias_
        l_model_modules_blocks_modules_1_modules_attn_modules_v_parameters_weight_ = L_model_modules_blocks_modules_1_modules_attn_modules_v_parameters_weight_
        l_model_modules_blocks_modules_1_modules_attn_modules_v_parameters_bias_ = L_model_modules_blocks_modules_1_modules_attn_modules_v_parameters_bias_
        l_model_modules_blocks_modules_1_modules_attn_modules_o_parameters_weight_ = L_model_modules_blocks_modules_1_modules_attn_modules_o_parameters_weight_
        l_model_modules_blocks_modules_1_modules_attn_modules_o_parameters_bias_ = L_model_modules_blocks_modules_1_modules_attn_modules_o_parameters_bias_
        l_model_modules_blocks_modules_1_modules_norm2_parameters_weight_ = L_model_modules_blocks_modules_1_modules_norm2_parameters_weight_
        l_model_modules_blocks_modules_1_modules_norm2_parameters_bias_ = L_model_modules_blocks_modules_1_modules_norm2_parameters_bias_
        l_model_modules_blocks_modules_1_modules_mlp_modules_fc_parameters_weight_ = L_model_modules_blocks_modules_1_modules_mlp_modules_fc_parameters_weight_
        l_model_modules_blocks_modules_1_modules_mlp_modules_fc_parameters_bias_ = L_model_modules_blocks_modules_1_modules_mlp_modules_fc_parameters_bias_
        l_model_modules_blocks_modules_1_modules_mlp_modules_proj_parameters_weight_ = L_model_modules_blocks_modules_1_modules_mlp_modules_proj_parameters_weight_
        l_model_modules_blocks_modules_1_modules_mlp_modules_proj_parameters_bias_ = L_model_modules_blocks_modules_1_modules_mlp_modules_proj_parameters_bias_
        l_model_modules_final_norm_parameters_weight_ = L_model_modules_final_norm_parameters_weight_
        l_model_modules_final_norm_parameters_bias_ = L_model_modules_final_norm_parameters_bias_

        # File: /work/main/stackwars/workloads/models/torch_nets.py:161 in hidden, code: x = self.tok_emb(ids)
        x: "f32[2, 16, 32]" = torch.nn.functional.embedding(l_batch_ids_, l_model_modules_tok_emb_parameters_weight_, None, None, 2.0, False, False);  l_batch_ids_ = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:163 in hidden, code: x = x + self.pos_emb(torch.arange(T, device=ids.device))
        arange: "i64[16]" = torch.arange(16, device = device(type='cpu'))
        embedding_1: "f32[16, 32]" = torch.nn.functional.embedding(arange, l_model_modules_pos_emb_parameters_weight_, None, None, 2.0, False, False);  arange = l_model_modules_pos_emb_parameters_weight_ = None
        x_1: "f32[2, 16, 32]" = x + embedding_1;  x = embedding_1 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:118 in forward, code: x = x + self.attn(self.norm1(x), rope)
        layer_norm: "f32[2, 16, 32]" = torch.nn.functional.layer_norm(x_1, (32,), l_model_modules_blocks_modules_0_modules_norm1_parameters_weight_, l_model_modules_blocks_modules_0_modules_norm1_parameters_bias_, 1e-05);  l_model_modules_blocks_modules_0_modules_norm1_parameters_weight_ = l_model_modules_blocks_modules_0_modules_norm1_parameters_bias_ = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:65 in forward, code: q = self.q(x).view(B, T, H, hd).transpose(1, 2)  # [B, H, T, hd]
        linear: "f32[2, 16, 32]" = torch._C._nn.linear(layer_norm, l_model_modules_blocks_modules_0_modules_attn_modules_q_parameters_weight_, l_model_modules_blocks_modules_0_modules_attn_modules_q_parameters_bias_);  l_model_modules_blocks_modules_0_modules_attn_modules_q_parameters_weight_ = l_model_modules_blocks_modules_0_modules_attn_modules_q_parameters_bias_ = None
        view: "f32[2, 16, 4, 8]" = linear.view(2, 16, 4, 8);  linear = None
        q: "f32[2, 4, 16, 8]" = view.transpose(1, 2);  view = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:66 in forward, code: k = self.k(x).view(B, T, K, hd).transpose(1, 2)  # [B, K, T, hd]
        linear_1: "f32[2, 16, 32]" = torch._C._nn.linear(layer_norm, l_model_modules_blocks_modules_0_modules_attn_modules_k_parameters_weight_, l_model_modules_blocks_modules_0_modules_attn_modules_k_parameters_bias_);  l_model_modules_blocks_modules_0_modules_attn_modules_k_parameters_weight_ = l_model_modules_blocks_modules_0_modules_attn_modules_k_parameters_bias_ = None
        view_1: "f32[2, 16, 4, 8]" = linear_1.view(2, 16, 4, 8);  linear_1 = None
        k: "f32[2, 4, 16, 8]" = view_1.transpose(1, 2);  view_1 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:67 in forward, code: v = self.v(x).view(B, T, K, hd).transpose(1, 2)  # [B, K, T, hd]
        linear_2: "f32[2, 16, 32]" = torch._C._nn.linear(layer_norm, l_model_modules_blocks_modules_0_modules_attn_modules_v_parameters_weight_, l_model_modules_blocks_modules_0_modules_attn_modules_v_parameters_bias_);  layer_norm = l_model_modules_blocks_modules_0_modules_attn_modules_v_parameters_weight_ = l_model_modules_blocks_modules_0_modules_attn_modules_v_parameters_bias_ = None
        view_2: "f32[2, 16, 4, 8]" = linear_2.view(2, 16, 4, 8);  linear_2 = None
        v: "f32[2, 4, 16, 8]" = view_2.transpose(1, 2);  view_2 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:78 in forward, code: y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal and mask is None,
        y: "f32[2, 4, 16, 8]" = torch._C._nn.scaled_dot_product_attention(q, k, v, attn_mask = None, is_causal = True, scale = 0.35355339059327373, enable_gqa = False);  q = k = v = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:88 in forward, code: return self.o(y.transpose(1, 2).reshape(B, T, H * hd))
        transpose_3: "f32[2, 16, 4, 8]" = y.transpose(1, 2);  y = None
        reshape: "f32[2, 16, 32]" = transpose_3.reshape(2, 16, 32);  transpose_3 = None
        linear_3: "f32[2, 16, 32]" = torch._C._nn.linear(reshape, l_model_modules_blocks_modules_0_modules_attn_modules_o_parameters_weight_, l_model_modules_blocks_modules_0_modules_attn_modules_o_parameters_bias_);  reshape = l_model_modules_blocks_modules_0_modules_attn_modules_o_parameters_weight_ = l_model_modules_blocks_modules_0_modules_attn_modules_o_parameters_bias_ = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:118 in forward, code: x = x + self.attn(self.norm1(x), rope)
        x_2: "f32[2, 16, 32]" = x_1 + linear_3;  x_1 = linear_3 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:119 in forward, code: return x + self.mlp(self.norm2(x))
        layer_norm_1: "f32[2, 16, 32]" = torch.nn.functional.layer_norm(x_2, (32,), l_model_modules_blocks_modules_0_modules_norm2_parameters_weight_, l_model_modules_blocks_modules_0_modules_norm2_parameters_bias_, 1e-05);  l_model_modules_blocks_modules_0_modules_norm2_parameters_weight_ = l_model_modules_blocks_modules_0_modules_norm2_parameters_bias_ = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:107 in forward, code: return self.proj(F.gelu(self.fc(x), approximate=self.approximate))
        linear_4: "f32[2, 16, 64]" = torch._C._nn.linear(layer_norm_1, l_model_modules_blocks_modules_0_modules_mlp_modules_fc_parameters_weight_, l_model_modules_blocks_modules_0_modules_mlp_modules_fc_parameters_bias_);  layer_norm_1 = l_model_modules_blocks_modules_0_modules_mlp_modules_fc_parameters_weight_ = l_model_modules_blocks_modules_0_modules_mlp_modules_fc_parameters_bias_ = None
        gelu: "f32[2, 16, 64]" = torch._C._nn.gelu(linear_4, approximate = 'tanh');  linear_4 = None
        linear_5: "f32[2, 16, 32]" = torch._C._nn.linear(gelu, l_model_modules_blocks_modules_0_modules_mlp_modules_proj_parameters_weight_, l_model_modules_blocks_modules_0_modules_mlp_modules_proj_parameters_bias_);  gelu = l_model_modules_blocks_modules_0_modules_mlp_modules_proj_parameters_weight_ = l_model_modules_blocks_modules_0_modules_mlp_modules_proj_parameters_bias_ = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:119 in forward, code: return x + self.mlp(self.norm2(x))
        x_3: "f32[2, 16, 32]" = x_2 + linear_5;  x_2 = linear_5 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:118 in forward, code: x = x + self.attn(self.norm1(x), rope)
        layer_norm_2: "f32[2, 16, 32]" = torch.nn.functional.layer_norm(x_3, (32,), l_model_modules_blocks_modules_1_modules_norm1_parameters_weight_, l_model_modules_blocks_modules_1_modules_norm1_parameters_bias_, 1e-05);  l_model_modules_blocks_modules_1_modules_norm1_parameters_weight_ = l_model_modules_blocks_modules_1_modules_norm1_parameters_bias_ = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:65 in forward, code: q = self.q(x).view(B, T, H, hd).transpose(1, 2)  # [B, H, T, hd]
        linear_6: "f32[2, 16, 32]" = torch._C._nn.linear(layer_norm_2, l_model_modules_blocks_modules_1_modules_attn_modules_q_parameters_weight_, l_model_modules_blocks_modules_1_modules_attn_modules_q_parameters_bias_);  l_model_modules_blocks_modules_1_modules_attn_modules_q_parameters_weight_ = l_model_modules_blocks_modules_1_modules_attn_modules_q_parameters_bias_ = None
        view_3: "f32[2, 16, 4, 8]" = linear_6.view(2, 16, 4, 8);  linear_6 = None
        q_1: "f32[2, 4, 16, 8]" = view_3.transpose(1, 2);  view_3 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:66 in forward, code: k = self.k(x).view(B, T, K, hd).transpose(1, 2)  # [B, K, T, hd]
        linear_7: "f32[2, 16, 32]" = torch._C._nn.linear(layer_norm_2, l_model_modules_blocks_modules_1_modules_attn_modules_k_parameters_weight_, l_model_modules_blocks_modules_1_modules_attn_modules_k_parameters_bias_);  l_model_modules_blocks_modules_1_modules_attn_modules_k_parameters_weight_ = l_model_modules_blocks_modules_1_modules_attn_modules_k_parameters_bias_ = None
        view_4: "f32[2, 16, 4, 8]" = linear_7.view(2, 16, 4, 8);  linear_7 = None
        k_1: "f32[2, 4, 16, 8]" = view_4.transpose(1, 2);  view_4 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:67 in forward, code: v = self.v(x).view(B, T, K, hd).transpose(1, 2)  # [B, K, T, hd]
        linear_8: "f32[2, 16, 32]" = torch._C._nn.linear(layer_norm_2, l_model_modules_blocks_modules_1_modules_attn_modules_v_parameters_weight_, l_model_modules_blocks_modules_1_modules_attn_modules_v_parameters_bias_);  layer_norm_2 = l_model_modules_blocks_modules_1_modules_attn_modules_v_parameters_weight_ = l_model_modules_blocks_modules_1_modules_attn_modules_v_parameters_bias_ = None
        view_5: "f32[2, 16, 4, 8]" = linear_8.view(2, 16, 4, 8);  linear_8 = None
        v_1: "f32[2, 4, 16, 8]" = view_5.transpose(1, 2);  view_5 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:78 in forward, code: y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal and mask is None,
        y_1: "f32[2, 4, 16, 8]" = torch._C._nn.scaled_dot_product_attention(q_1, k_1, v_1, attn_mask = None, is_causal = True, scale = 0.35355339059327373, enable_gqa = False);  q_1 = k_1 = v_1 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:88 in forward, code: return self.o(y.transpose(1, 2).reshape(B, T, H * hd))
        transpose_7: "f32[2, 16, 4, 8]" = y_1.transpose(1, 2);  y_1 = None
        reshape_1: "f32[2, 16, 32]" = transpose_7.reshape(2, 16, 32);  transpose_7 = None
        linear_9: "f32[2, 16, 32]" = torch._C._nn.linear(reshape_1, l_model_modules_blocks_modules_1_modules_attn_modules_o_parameters_weight_, l_model_modules_blocks_modules_1_modules_attn_modules_o_parameters_bias_);  reshape_1 = l_model_modules_blocks_modules_1_modules_attn_modules_o_parameters_weight_ = l_model_modules_blocks_modules_1_modules_attn_modules_o_parameters_bias_ = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:118 in forward, code: x = x + self.attn(self.norm1(x), rope)
        x_4: "f32[2, 16, 32]" = x_3 + linear_9;  x_3 = linear_9 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:119 in forward, code: return x + self.mlp(self.norm2(x))
        layer_norm_3: "f32[2, 16, 32]" = torch.nn.functional.layer_norm(x_4, (32,), l_model_modules_blocks_modules_1_modules_norm2_parameters_weight_, l_model_modules_blocks_modules_1_modules_norm2_parameters_bias_, 1e-05);  l_model_modules_blocks_modules_1_modules_norm2_parameters_weight_ = l_model_modules_blocks_modules_1_modules_norm2_parameters_bias_ = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:107 in forward, code: return self.proj(F.gelu(self.fc(x), approximate=self.approximate))
        linear_10: "f32[2, 16, 64]" = torch._C._nn.linear(layer_norm_3, l_model_modules_blocks_modules_1_modules_mlp_modules_fc_parameters_weight_, l_model_modules_blocks_modules_1_modules_mlp_modules_fc_parameters_bias_);  layer_norm_3 = l_model_modules_blocks_modules_1_modules_mlp_modules_fc_parameters_weight_ = l_model_modules_blocks_modules_1_modules_mlp_modules_fc_parameters_bias_ = None
        gelu_1: "f32[2, 16, 64]" = torch._C._nn.gelu(linear_10, approximate = 'tanh');  linear_10 = None
        linear_11: "f32[2, 16, 32]" = torch._C._nn.linear(gelu_1, l_model_modules_blocks_modules_1_modules_mlp_modules_proj_parameters_weight_, l_model_modules_blocks_modules_1_modules_mlp_modules_proj_parameters_bias_);  gelu_1 = l_model_modules_blocks_modules_1_modules_mlp_modules_proj_parameters_weight_ = l_model_modules_blocks_modules_1_modules_mlp_modules_proj_parameters_bias_ = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:119 in forward, code: return x + self.mlp(self.norm2(x))
        x_5: "f32[2, 16, 32]" = x_4 + linear_11;  x_4 = linear_11 = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:177 in hidden, code: return self.final_norm(x) if self.cfg.final_norm else x
        h: "f32[2, 16, 32]" = torch.nn.functional.layer_norm(x_5, (32,), l_model_modules_final_norm_parameters_weight_, l_model_modules_final_norm_parameters_bias_, 1e-05);  x_5 = l_model_modules_final_norm_parameters_weight_ = l_model_modules_final_norm_parameters_bias_ = None

        # File: /work/main/stackwars/workloads/models/torch_nets.py:187 in forward, code: logits = h @ weight.T  # [B, T, vocab]
        getattr_1: "f32[32, 96]" = l_model_modules_tok_emb_parameters_weight_.T;  l_model_modules_tok_emb_parameters_weight_ = None
        logits: "f32[2, 16, 96]" = h @ getattr_1;  h = getattr_1 = None
        return (logits,)
