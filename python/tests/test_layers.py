"""The whole layer on hanpu (hanpu.layers, patch(level="layer")) against stock transformers on tiny random
Qwen3-Next, Qwen3.5 and Kimi Linear models (built from configs; nothing is downloaded).

fp32 bar: max |logits - stock| / max |stock| <= 1e-4 (observed 2e-7 .. 6e-7: float32 rounding in another
order; a wrong gate, norm, conv tap or state is O(1e-2) or more), and greedy generation of 16 new tokens
identical. bf16 bar (the matrix-unit issue's rule: a bf16 mode is judged by its error against the exact
result, relative to the error bf16 itself brings): the relative RMS error of the patched bf16 model's logits
against the fp32 model's is at most 1.5x that of stock transformers' bf16 model (observed 0.92x .. 1.02x).
Greedy tokens in bf16 are not required to match: on random weights, near-ties flip under any rounding change.
"""

import pytest
import torch

transformers = pytest.importorskip("transformers")

from hanpu.integrations import transformers as ht  # noqa: E402
from hanpu.layers import LinearAttentionLayer, module_arch  # noqa: E402
from test_transformers import MODELS, build, kimi_linear, qwen3_5  # noqa: E402


def linear_module(model, i=0):
    layer = model.model.layers[i]
    return layer.linear_attn if hasattr(layer, "linear_attn") else layer.self_attn


def max_rel(a, b):
    return ((a.float() - b.float()).abs().max() / b.float().abs().max()).item()


def rel_rms(a, b):
    return ((a.float() - b.float()).pow(2).mean().sqrt() / b.float().pow(2).mean().sqrt()).item()


@pytest.mark.parametrize("make", MODELS, ids=lambda m: m.__name__)
def test_layer_from_module_matches_the_module(make):
    model = build(make)
    mod = linear_module(model)
    layer = LinearAttentionLayer.from_module(mod)
    assert layer.precision == "exact" and layer.activation_dtype == "F32"
    x = torch.randn(2, 70, mod.hidden_size, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = mod(x)
    y = layer.prefill(x, breakdown=True)
    assert max_rel(y, ref) <= 1e-4
    assert set(layer.last_breakdown) == {"projections", "conv", "gates", "core", "norm"}


@pytest.mark.parametrize("make", MODELS, ids=lambda m: m.__name__)
def test_patched_layers_give_stock_logits_and_tokens(make):
    model = build(make)
    ids = torch.randint(0, 256, (2, 150), generator=torch.Generator().manual_seed(1))
    prompt = torch.randint(0, 256, (2, 40), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ref = model(ids).logits
        ref_tokens = model.generate(prompt, max_new_tokens=16, do_sample=False)
        with ht.patched(level="layer"):
            out = model(ids).logits
            assert ht.call_counts()["layer_prefill"] == 3
            tokens = model.generate(prompt, max_new_tokens=16, do_sample=False)
            counts = ht.call_counts()
    assert max_rel(out, ref) <= 1e-4
    assert torch.equal(tokens, ref_tokens)
    # one prefill per layer, then 15 cached decode steps per layer, nothing sent back to transformers
    assert counts["layer_prefill"] == 3 + 3 and counts["layer_decode"] == 3 * 15 and counts["fallback"] == 0
    assert counts["chunk"] == counts["recurrent"] == 0


@pytest.mark.parametrize("make", MODELS, ids=lambda m: m.__name__)
def test_continued_prefill_and_decode_follow_one_full_forward(make):
    """Prefill 50 tokens, continue with a 13-token prefill (the cache's states read and updated in place),
    then decode 4 tokens one by one: every position's logits equal one stock forward over all 67."""
    model = build(make)
    ids = torch.randint(0, 256, (1, 67), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full = model(ids).logits
        with ht.patched(level="layer"):
            out = model(ids[:, :50], use_cache=True)
            cache, parts = out.cache, [out.logits]
            out = model(ids[:, 50:63], cache=cache, use_cache=True)
            cache = out.cache
            parts.append(out.logits)
            for t in range(63, 67):
                out = model(ids[:, t:t + 1], cache=cache, use_cache=True)
                cache = out.cache
                parts.append(out.logits)
            counts = ht.call_counts()
    assert counts["layer_prefill"] == 6 and counts["layer_decode"] == 12
    assert max_rel(torch.cat(parts, dim=1), full) <= 1e-4


@pytest.mark.parametrize("make", MODELS, ids=lambda m: m.__name__)
def test_bf16_error_is_within_1_5x_of_transformers_bf16(make):
    model = build(make)
    ids = torch.randint(0, 256, (2, 150), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        truth = model(ids).logits
        model = model.to(torch.bfloat16)
        stock = model(ids).logits
        with ht.patched(level="layer"):
            ours = model(ids).logits
            assert ht.call_counts()["layer_prefill"] == 3
    assert linear_module(model)._hanpu_layer[1].precision == "bf16"
    assert rel_rms(ours, truth) <= 1.5 * rel_rms(stock, truth)


def test_checkpoint_layer_equals_module_layer(tmp_path):
    """A model saved by transformers, read back by hanpu's checkpoint loader: the same layer, bit for bit."""
    for make, i in ((qwen3_5, 1), (kimi_linear, 2)):
        model = build(make)
        model.save_pretrained(tmp_path / make.__name__)
        from_dir = LinearAttentionLayer.from_checkpoint(tmp_path / make.__name__, i)
        from_mod = LinearAttentionLayer.from_module(linear_module(model, i))
        x = torch.randn(1, 33, 64, generator=torch.Generator().manual_seed(5))
        assert torch.equal(from_dir.prefill(x), from_mod.prefill(x))
        with pytest.raises(ValueError, match="layer 3 is a 'full_attention' layer"):
            LinearAttentionLayer.from_checkpoint(tmp_path / make.__name__, 3)


def test_bad_checkpoint_names_file_tensor_and_shapes(tmp_path):
    from safetensors.torch import load_file, save_file

    model = build(qwen3_5)
    model.save_pretrained(tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    weights["model.layers.0.linear_attn.in_proj_b.weight"] = torch.zeros(3, 64)
    save_file(weights, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match=r"model\.safetensors: model\.layers\.0\.linear_attn\.in_proj_b\.weight: "
                                         r"expected shape \[4, 64\], got \[3, 64\]"):
        LinearAttentionLayer.from_checkpoint(tmp_path, 0)
    del weights["model.layers.1.linear_attn.in_proj_z.weight"]
    save_file(weights, tmp_path / "model.safetensors")
    with pytest.raises(RuntimeError, match=r"model\.layers\.1\.linear_attn\.in_proj_z\.weight: missing"):
        LinearAttentionLayer.from_checkpoint(tmp_path, 1)
    with pytest.raises(RuntimeError, match="config.json: cannot open"):
        LinearAttentionLayer.from_checkpoint(tmp_path / "nowhere", 0)


def test_bad_calls_are_errors_naming_the_argument():
    layer = LinearAttentionLayer.from_module(linear_module(build(qwen3_5)))
    with pytest.raises(ValueError, match=r"x.shape\[2\] \(hidden size\) = 65"):
        layer.prefill(torch.zeros(1, 4, 65))
    with pytest.raises(ValueError, match="hidden_states must have 3 dims"):
        layer.prefill(torch.zeros(4, 64))
    with pytest.raises(ValueError, match="give both or neither"):
        layer.prefill(torch.zeros(1, 4, 64), conv_state=torch.zeros(1, 192, 4))
    with pytest.raises(ValueError, match="state.conv must have shape"):
        layer.prefill(torch.zeros(1, 4, 64), conv_state=torch.zeros(1, 255, 4), recurrent_state=torch.zeros(1, 4, 32, 16))
    with pytest.raises(ValueError, match=r"slots\[0\] = 5 is outside the pool"):
        layer.decode(torch.zeros(1, 64), conv_pool=torch.zeros(2, 192, 4), state_pool=torch.zeros(2, 4, 32, 16),
                     slots=torch.tensor([5]))
    with pytest.raises(TypeError, match="not a linear-attention layer"):
        LinearAttentionLayer.from_module(torch.nn.Linear(3, 3))
    with pytest.raises(ValueError, match="precision"):
        LinearAttentionLayer.from_module(linear_module(build(qwen3_5)), precision="fp8")


def test_layer_patch_replaces_only_forwards_and_unpatch_restores_them():
    mod = pytest.importorskip("transformers.models.qwen3_5.modeling_qwen3_5")
    cls = mod.Qwen3_5GatedDeltaNet
    before_fn, before_forward = mod.torch_chunk_gated_delta_rule, cls.forward
    ht.patch(level="layer")
    assert cls.forward is not before_forward and mod.torch_chunk_gated_delta_rule is before_fn
    ht.patch(level="kernel")  # switching level puts the layer forward back
    assert cls.forward is before_forward and mod.torch_chunk_gated_delta_rule is not before_fn
    ht.unpatch()
    assert cls.forward is before_forward and mod.torch_chunk_gated_delta_rule is before_fn
    with pytest.raises(ValueError, match="level"):
        ht.patch(level="model")


def test_layer_level_training_falls_back_and_weight_updates_rebuild():
    model = build(qwen3_5)
    ids = torch.randint(0, 256, (1, 20), generator=torch.Generator().manual_seed(6))
    with ht.patched(level="layer"):
        loss = model(ids, labels=ids).loss
        loss.backward()
        assert ht.call_counts()["fallback"] == 3 and ht.call_counts()["layer_prefill"] == 0
        mod = linear_module(model)
        with torch.no_grad():
            before = model(ids).logits
            mod.out_proj.weight.mul_(2.0)  # an in-place update: the hanpu layer must be rebuilt
            after = model(ids).logits
            ht.unpatch()
            stock = model(ids).logits
    assert not torch.allclose(before, after)
    assert max_rel(after, stock) <= 1e-4


def test_module_arch_reads_the_layout():
    assert [module_arch(linear_module(build(m))) for m in MODELS] == ["qwen3_next", "qwen3_5", "kimi_linear"]


def test_qwen3_5_moe_layer_runs_like_the_module():
    """Qwen3.5-MoE's GatedDeltaNet has Qwen3.5's layout; patch(level="layer") covers its class too."""
    mod_moe = pytest.importorskip("transformers.models.qwen3_5_moe.modeling_qwen3_5_moe")
    cfg = transformers.Qwen3_5MoeTextConfig(
        vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
        moe_intermediate_size=32, shared_expert_intermediate_size=32, num_experts=4, num_experts_per_tok=2,
        layer_types=["linear_attention", "full_attention"])
    torch.manual_seed(0)
    mod = mod_moe.Qwen3_5MoeGatedDeltaNet(cfg, layer_idx=0).eval()
    assert module_arch(mod) == "qwen3_5"
    x = torch.randn(2, 37, 64, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        ref = mod(x)
        with ht.patched(level="layer"):
            out = mod(x)
            assert ht.call_counts()["layer_prefill"] == 1
    assert max_rel(out, ref) <= 1e-4
