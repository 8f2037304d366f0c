"""hanpu as a drop-in for the linear-attention kernels of transformers' Qwen3-Next, Qwen3.5 and Kimi
Linear, on tiny random-weight models built from configs (no downloads).

Tolerance for logits: transformers' fallback and hanpu both compute in float32 from the same inputs but
in different orders (the fallback's chunked torch ops vs hanpu's fused chunk kernel), so the results
differ by float32 rounding carried through a few layers: observed max |diff| ~3e-7 on logits of
magnitude ~0.7. The test allows rtol 1e-4 / atol 1e-5, far below any difference a wrong kernel
(a missing gate, a wrong scale, a dropped state) would make, which is O(1e-2) or more.
"""

import pytest
import torch

transformers = pytest.importorskip("transformers")

from hanpu.integrations import transformers as ht  # noqa: E402

LAYERS = ["linear_attention", "linear_attention", "linear_attention", "full_attention"]


def qwen3_next():
    cfg = transformers.Qwen3NextConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
        shared_expert_intermediate_size=32, num_experts=4, num_experts_per_tok=2, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
        linear_key_head_dim=16, linear_value_head_dim=16, layer_types=LAYERS)
    return transformers.Qwen3NextForCausalLM(cfg)


def qwen3_5():
    cfg = transformers.Qwen3_5TextConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32,
        linear_value_head_dim=16, layer_types=LAYERS)
    return transformers.Qwen3_5ForCausalLM(cfg)


def kimi_linear():
    cfg = transformers.KimiLinearConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=4, linear_head_dim=16, linear_num_heads=4, num_local_experts=4,
        num_experts_per_tok=2, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16,
        layer_types=LAYERS, mlp_layer_types=["dense", "sparse", "sparse", "sparse"], pad_token_id=0, bos_token_id=1,
        eos_token_id=2)
    return transformers.KimiLinearForCausalLM(cfg)


MODELS = [qwen3_next, qwen3_5, kimi_linear]


def build(make):
    torch.manual_seed(0)
    return make().eval()


def close(a, b):
    return torch.allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("make", MODELS, ids=lambda m: m.__name__)
def test_logits_agree_with_and_without_patch(make):
    model = build(make)
    ids = torch.randint(0, 256, (2, 150), generator=torch.Generator().manual_seed(1))  # 150: a partial chunk
    with torch.no_grad():
        ref = model(ids).logits
        with ht.patched():
            out = model(ids).logits
            counts = ht.call_counts()
    assert counts["chunk"] == 3 and counts["fallback"] == 0  # the three linear-attention layers ran on hanpu
    assert close(out, ref), (out - ref).abs().max()


@pytest.mark.parametrize("make", MODELS, ids=lambda m: m.__name__)
def test_greedy_generation_produces_the_same_tokens(make):
    model = build(make)
    prompt = torch.randint(0, 256, (2, 40), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ref = model.generate(prompt, max_new_tokens=12, do_sample=False)
        with ht.patched():
            out = model.generate(prompt, max_new_tokens=12, do_sample=False)
            counts = ht.call_counts()
    assert torch.equal(out, ref)
    assert counts["chunk"] == 3 and counts["recurrent"] == 3 * 11  # one prefill, then one call per decode step


@pytest.mark.parametrize("make", MODELS, ids=lambda m: m.__name__)
def test_cached_decode_continues_from_hanpus_final_state(make):
    """Prefill under the patch, then decode token by token from the cache hanpu filled: the logits of
    every step equal those of one unpatched forward over the whole sequence."""
    model = build(make)
    ids = torch.randint(0, 256, (1, 70), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full = model(ids).logits
        with ht.patched():
            out = model(ids[:, :66], use_cache=True)
            cache = out.cache
            steps = [out.logits[:, -1]]
            for t in range(66, 70):
                out = model(ids[:, t:t + 1], cache=cache, use_cache=True)
                cache = out.cache
                steps.append(out.logits[:, -1])
            counts = ht.call_counts()
    assert counts["recurrent"] == 3 * 4
    assert close(torch.stack(steps, dim=1), full[:, 65:70])


def test_patch_replaces_only_the_kernel_functions_and_unpatch_restores_them():
    mod = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")
    before = {name: getattr(mod, name) for name in dir(mod)}
    modules = ht.patch()
    assert "transformers.models.qwen3_next.modeling_qwen3_next" in modules
    changed = {name for name in dir(mod) if getattr(mod, name) is not before.get(name)}
    assert changed == {"torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule"}
    ht.patch(strategy="fla", threads=1)  # re-patching keeps the true originals
    ht.unpatch()
    assert all(getattr(mod, name) is before[name] for name in before)
    assert not ht.is_patched()


def test_context_manager_restores_the_state_it_found():
    with ht.patched():
        assert ht.is_patched()
        with ht.patched(strategy="flashqla"):
            assert ht.is_patched()
        assert ht.is_patched()  # the outer patch is still in force
    assert not ht.is_patched()
    with pytest.raises(ValueError, match="strategy"):
        ht.patch(strategy="nope")


def test_training_falls_back_to_transformers():
    """With autograd on, the kernels go back to transformers' functions, so gradients still flow."""
    model = build(qwen3_5)
    ids = torch.randint(0, 256, (1, 20), generator=torch.Generator().manual_seed(4))
    with ht.patched():
        loss = model(ids, labels=ids).loss
        loss.backward()
        counts = ht.call_counts()
    assert counts["fallback"] == 3 and counts["chunk"] == 0
    assert model.model.layers[0].linear_attn.A_log.grad is not None
