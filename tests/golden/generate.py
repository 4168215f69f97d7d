"""Regenerate the golden values in this folder from the reference implementations.

Needs torch and transformers (not test dependencies): the tests compare against the JSON
this writes, so they run without either.

    pip install torch==2.13.0 transformers==5.24.0
    python tests/golden/generate.py

It writes reference_values.json (inv_freq of the first fixtures, ALiBi slopes, T5 buckets),
then model_rope.npz (every RoPE family: model_reference.py), then, when the module exists,
whatever generate_bias.py (the non-RoPE families: ALiBi, T5, sinusoidal, learned) writes:
its `main()` is called after this file's goldens are written; last, generate_models.py's
(model_truth.npz and docs/models.md: every rotary model type, layer by layer).
"""

import importlib
import json
from pathlib import Path

import model_reference

import torch
import transformers
from transformers import AutoConfig

HERE = Path(__file__).parent
CONFIGS = HERE.parent / "fixtures" / "hf_configs"
ROTARY_CLASSES = {
    "llama": "llama.modeling_llama.LlamaRotaryEmbedding",
    "qwen2": "qwen2.modeling_qwen2.Qwen2RotaryEmbedding",
    "mistral": "mistral.modeling_mistral.MistralRotaryEmbedding",
    "gpt_neox": "gpt_neox.modeling_gpt_neox.GPTNeoXRotaryEmbedding",
    "deepseek_v3": "deepseek_v3.modeling_deepseek_v3.DeepseekV3RotaryEmbedding",
    "phi3": "phi3.modeling_phi3.Phi3RotaryEmbedding",
}
PROBE_POSITIONS = [0, 1, 4095, 4096, 8191, 100000, 1000000]
#: the fixtures test_rope_scaling reads inv_freq goldens of (the file stays stable as fixtures are added)
FIRST_FIXTURES = ("deepseek-v3", "gpt-j-6b", "gpt-neox-20b", "llama-3.1-8b", "mistral-7b", "phi-3-mini-128k",
                  "qwen2-7b-yarn")


def rotary_module(raw: dict):
    module_path, cls_name = ROTARY_CLASSES[raw["model_type"]].rsplit(".", 1)
    cls = getattr(importlib.import_module(f"transformers.models.{module_path}"), cls_name)
    config = AutoConfig.for_model(**raw)
    return cls(config=config)


def rope_goldens() -> dict:
    out = {}
    for path in sorted(CONFIGS.glob("*.json")):
        raw = json.loads(path.read_text())
        if path.stem not in FIRST_FIXTURES:
            continue  # every family, every fixture: model_reference.py
        entry = {}
        if raw["model_type"] == "gptj":
            from transformers.models.gptj.modeling_gptj import create_sinusoidal_positions

            table = create_sinusoidal_positions(8, raw["rotary_dim"])
            entry["gptj_sincos_row7"] = table[7].tolist()
        else:
            module = rotary_module(raw)
            entry["inv_freq_float32"] = module.inv_freq.tolist()
            entry["attention_scaling"] = float(module.attention_scaling)
            pos = torch.tensor([PROBE_POSITIONS])
            x = torch.zeros(1, 1, len(PROBE_POSITIONS), 8, dtype=torch.float32)
            cos, sin = module(x, pos)
            n_freq = cos.shape[-1] // 2
            entry["probe_positions"] = PROBE_POSITIONS
            entry["cos_float32"] = cos[0, :, :n_freq].tolist()
            entry["sin_float32"] = sin[0, :, :n_freq].tolist()
        out[path.stem] = entry
    return out


def alibi_goldens() -> dict:
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor as bloom_alibi
    from transformers.models.falcon.modeling_falcon import build_alibi_tensor as falcon_alibi
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    out = {"bloom": {}, "falcon": {}, "mpt": {}}
    for n in [1, 2, 3, 5, 8, 12, 16, 20, 24, 32, 40, 48, 64, 71, 96, 112]:
        mask = torch.ones(1, 2)
        # [B*H, 1, L] = m * key_position; row for key position 1 is the slope itself
        out["bloom"][n] = bloom_alibi(mask, n, torch.float32)[:, 0, 1].tolist()
        out["falcon"][n] = falcon_alibi(mask, n, torch.bfloat16)[:, 0, 1].float().tolist()
        out["mpt"][n] = (-build_mpt_alibi_tensor(n, 2)[:, 0, 0]).tolist()  # m * (0 - 1)
    return out


def t5_goldens() -> dict:
    from transformers.models.t5.modeling_t5 import T5Attention

    rel = torch.arange(-3000, 3001)
    out = {}
    for bidirectional in (True, False):
        for nb, md in ((32, 128), (64, 256), (16, 64)):
            buckets = T5Attention._relative_position_bucket(rel, bidirectional, nb, md)
            out[f"{bidirectional}_{nb}_{md}"] = buckets.tolist()
    return {"relative_positions": [-3000, 3000], "buckets": out}


def main():
    goldens = {
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "rope": rope_goldens(),
        "alibi": alibi_goldens(),
        "t5": t5_goldens(),
    }
    (HERE / "reference_values.json").write_text(json.dumps(goldens, indent=None, separators=(",", ":")))
    print("wrote", HERE / "reference_values.json")
    model_reference.main()
    if (HERE / "generate_bias.py").exists():  # the hook for the non-RoPE families' goldens
        importlib.import_module("generate_bias").main()
    importlib.import_module("generate_models").main()  # every rotary model type, layer by layer


if __name__ == "__main__":
    main()
