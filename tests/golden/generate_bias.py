"""Regenerate model_other.npz: goldens for the non-RoPE families (ALiBi, T5 buckets, sinusoidal
and learned absolute positions) and Qwen2-VL's M-RoPE, from transformers' own classes.

Needs torch and transformers (test extras); the tests read the .npz with numpy only.

    .venv/bin/python tests/golden/generate_bias.py

Two kinds of values:
* config checks: each fixture config in ../fixtures/hf_configs/ is loaded by its config class and
  its model built on the meta device (no memory, no weights), so the goldens record what
  transformers resolves (head counts, bucket settings, which layers carry a bias table, the
  position tensors' names and shapes) without anyone's memory of the defaults;
* value checks: the reference functions and PositionalEmbedding classes evaluated on small
  inputs (random weights from a fixed seed where the values are learned).
`meta` (a JSON string) holds the structured part, the other entries are arrays.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import AutoConfig

HERE = Path(__file__).parent
CONFIGS = HERE.parent / "fixtures" / "hf_configs"
OUT = HERE / "model_other.npz"

#: fixture -> the class whose checkpoint names posenc reports (the *ForConditionalGeneration / LM-head one).
MODEL_CLASSES = {
    "bloom-560m": "BloomForCausalLM",
    "mpt-7b": "MptForCausalLM",
    "t5-small": "T5ForConditionalGeneration",
    "mt5-small": "MT5ForConditionalGeneration",
    "umt5-small": "UMT5ForConditionalGeneration",
    "bart-large": "BartForConditionalGeneration",
    "mbart-large-50": "MBartForConditionalGeneration",
    "opus-mt-en-de": "MarianMTModel",
    "m2m100-418m": "M2M100ForConditionalGeneration",
    "whisper-tiny": "WhisperForConditionalGeneration",
    "xglm-564m": "XGLMForCausalLM",
    "gpt2": "GPT2LMHeadModel",
    "gpt-neo-125m": "GPTNeoForCausalLM",
    "starcoderbase-1b": "GPTBigCodeForCausalLM",
    "pegasus-xsum": "PegasusForConditionalGeneration",
    "opt-125m": "OPTForCausalLM",
    "bert-base-uncased": "BertForMaskedLM",
    "distilbert-base-uncased": "DistilBertForMaskedLM",
    "roberta-base": "RobertaForMaskedLM",
    "xlm-roberta-base": "XLMRobertaForMaskedLM",
    "camembert-base": "CamembertForMaskedLM",
    "qwen2-vl-7b-instruct": "Qwen2VLForConditionalGeneration",
    "qwen2.5-vl-3b-v5": "Qwen2_5_VLForConditionalGeneration",
}
POSITION_TENSOR_WORDS = ("embed_positions", "wpe", "position_embeddings", "relative_attention_bias")


def fixture(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


def config_of(raw: dict):
    return AutoConfig.for_model(**raw)


def meta_model(name: str):
    """The fixture's model on the meta device: shapes and structure without weights."""
    config = config_of(fixture(name))
    with torch.device("meta"):
        return getattr(transformers, MODEL_CLASSES[name])(config)


def position_tensors(model) -> dict:
    return {k: list(v.shape) for k, v in model.state_dict().items()
            if any(word in k for word in POSITION_TENSOR_WORDS)}


def np32(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).numpy()


class Goldens:
    def __init__(self):
        self.meta: dict = {"versions": {"torch": torch.__version__, "transformers": transformers.__version__}}
        self.arrays: dict[str, np.ndarray] = {}

    def add(self, key: str, value) -> None:
        self.arrays[key] = np.ascontiguousarray(value)

    def write(self) -> None:
        np.savez_compressed(OUT, meta=np.array(json.dumps(self.meta, sort_keys=True)), **self.arrays)
        print("wrote", OUT, f"({OUT.stat().st_size} bytes, {len(self.arrays)} arrays)")


# --- ALiBi ---------------------------------------------------------------------------------------
def alibi(g: Goldens) -> None:
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    length = 48
    bloom = config_of(fixture("bloom-560m"))
    g.meta["bloom-560m"] = {"n_head": bloom.n_head, "n_layer": bloom.n_layer,
                            "tensors": position_tensors(meta_model("bloom-560m"))}
    for heads in (bloom.n_head, 12, 112):  # [H, L] = slope * key position
        g.add(f"bloom/alibi_h{heads}", np32(build_alibi_tensor(torch.ones(1, length), heads, torch.float32)[:, 0]))

    mpt = config_of(fixture("mpt-7b"))
    g.meta["mpt-7b"] = {"n_heads": mpt.n_heads, "n_layers": mpt.n_layers, "alibi": mpt.attn_config.alibi,
                        "alibi_bias_max": mpt.attn_config.alibi_bias_max, "max_seq_len": mpt.max_seq_len}
    for heads, bias_max in ((mpt.n_heads, 8), (12, 8), (12, 16), (7, 4)):  # [H, L] = -slope * (L-1 - key)
        g.add(f"mpt/alibi_h{heads}_max{bias_max}", np32(build_mpt_alibi_tensor(heads, length, bias_max)[:, 0]))
    # What MptModel itself adds, for a config asking alibi_bias_max 16: the bias its first block receives.
    tiny = AutoConfig.for_model("mpt", d_model=24, n_heads=12, n_layers=1, max_seq_len=16, vocab_size=32,
                                attn_config={"alibi_bias_max": 16})
    model = transformers.MptModel(tiny).eval()
    seen = {}

    def record(module, args, kwargs):
        seen["bias"] = kwargs["position_bias"]

    model.blocks[0].register_forward_pre_hook(record, with_kwargs=True)
    with torch.no_grad():
        model(torch.arange(16)[None])
    g.add("mpt/model_bias_h12_config_max16", np32(seen["bias"][:, 0]))


# --- T5 / UMT5 -----------------------------------------------------------------------------------
def _stack_layout(stack) -> dict:
    attn = [block.layer[0].SelfAttention for block in stack.block]
    return {"is_decoder": stack.is_decoder, "layers": len(attn),
            "with_table": [i for i, a in enumerate(attn) if a.has_relative_attention_bias],
            "num_buckets": attn[0].relative_attention_num_buckets,
            "max_distance": attn[0].relative_attention_max_distance}


def t5(g: Goldens) -> None:
    from transformers.models.t5.modeling_t5 import T5Attention
    from transformers.models.umt5.modeling_umt5 import UMT5Attention

    for name in ("t5-small", "mt5-small", "umt5-small"):
        model = meta_model(name)
        g.meta[name] = {"encoder": _stack_layout(model.encoder), "decoder": _stack_layout(model.decoder),
                        "tensors": position_tensors(model)}
    # compute_bias: [1, H, q, k] = table[bucket(key - (past + query))], encoder and decoder self-attention
    for model_type, cls in (("t5", T5Attention), ("umt5", UMT5Attention)):
        for is_decoder, (q, k, past), (buckets, distance) in ((False, (12, 12, 0), (32, 128)),
                                                              (True, (5, 40, 35), (16, 20))):
            config = AutoConfig.for_model(model_type, d_model=8, d_kv=4, num_heads=2, is_decoder=is_decoder,
                                          relative_attention_num_buckets=buckets,
                                          relative_attention_max_distance=distance)
            attn = cls(config, has_relative_attention_bias=True, layer_idx=0)
            torch.nn.init.normal_(attn.relative_attention_bias.weight)
            key = f"{model_type}/{'decoder' if is_decoder else 'encoder'}"
            g.add(f"{key}/weight", np32(attn.relative_attention_bias.weight))
            with torch.no_grad():
                g.add(f"{key}/bias", np32(attn.compute_bias(q, k, past_seen_tokens=past)[0]))
            g.meta[key] = {"query_length": q, "key_length": k, "past": past, "num_buckets": buckets,
                           "max_distance": distance}
            if model_type == "umt5":  # UMT5's own bucket method (reads is_decoder from the config)
                g.add(f"{key}/buckets", attn._relative_position_bucket(torch.arange(-400, 401)).numpy())


# --- sinusoidal ------------------------------------------------------------------------------------
def sinusoidal(g: Goldens) -> None:
    from transformers.models.distilbert.modeling_distilbert import create_sinusoidal_embeddings
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding
    from transformers.models.nllb_moe.modeling_nllb_moe import NllbMoeSinusoidalPositionalEmbedding
    from transformers.models.pegasus.modeling_pegasus import PegasusSinusoidalPositionalEmbedding
    from transformers.models.whisper.modeling_whisper import WhisperPositionalEmbedding, sinusoids
    from transformers.models.xglm.modeling_xglm import XGLMSinusoidalPositionalEmbedding

    for dim in (16, 17):
        for family, cls in (("marian", MarianSinusoidalPositionalEmbedding),
                            ("pegasus", PegasusSinusoidalPositionalEmbedding)):
            module = cls(64, dim)
            with torch.no_grad():
                module.weight.copy_(module.create_weight())  # what _init_weights does
                g.add(f"{family}/table_d{dim}", np32(module.weight))
                g.add(f"{family}/forward_d{dim}_cache5", np32(module((1, 10), cache_length=5)))  # rows 5..14
        m2m = M2M100SinusoidalPositionalEmbedding(64, dim, padding_idx=1)
        g.add(f"m2m100/table_d{dim}", np32(m2m.weights))  # 66 rows: position p + 2
        ids = torch.tensor([[7, 8, 9, 10, 11, 12], [1, 1, 9, 10, 11, 12]])  # the second left-padded (pad id 1)
        g.add(f"m2m100/forward_d{dim}", np32(m2m(ids)))
        g.add(f"m2m100/forward_d{dim}_cache3", np32(m2m(ids[:1], cache_length=3)))
        g.add(f"nllb_moe/forward_d{dim}", np32(NllbMoeSinusoidalPositionalEmbedding(64, dim, padding_idx=1)(ids)))
        xglm = XGLMSinusoidalPositionalEmbedding(64, dim, padding_idx=1)
        g.add(f"xglm/forward_d{dim}", np32(xglm(torch.arange(6)[None])))  # XGLMModel: arange(cache, cache + n)
        g.add(f"xglm/forward_d{dim}_cache3", np32(xglm(torch.arange(3, 9)[None], cache_length=3)))
        g.add(f"distilbert/sinusoidal_d{dim}", np32(create_sinusoidal_embeddings(64, dim, torch.empty(64, dim))))
    quirk = XGLMSinusoidalPositionalEmbedding(64, 16, padding_idx=5)  # pad id >= 2: a position reads the zero row
    g.add("xglm/forward_d16_pad5", np32(quirk(torch.arange(6)[None])))
    big = M2M100SinusoidalPositionalEmbedding(1024, 1024, padding_idx=1).weights
    m2m_rows = [0, 1, 2, 3, 100, 1000, 1025]
    g.add("m2m100/table_d1024_rows", np32(big[m2m_rows]))
    whisper_rows = [0, 1, 2, 750, 1499]
    g.add("whisper/sinusoids_1500x384_rows", np32(sinusoids(1500, 384)[whisper_rows]))
    g.meta["rows"] = {"m2m100_d1024": m2m_rows, "whisper_1500x384": whisper_rows}

    tiny = AutoConfig.for_model("whisper", d_model=8, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                                decoder_attention_heads=2, encoder_ffn_dim=8, decoder_ffn_dim=8,
                                max_source_positions=16, max_target_positions=12, vocab_size=64, num_mel_bins=4,
                                pad_token_id=0, bos_token_id=0, eos_token_id=0, decoder_start_token_id=0)
    model = transformers.WhisperModel(tiny)
    g.add("whisper/tiny_encoder_table", np32(model.encoder.embed_positions.weight))  # initialised by the model
    decoder = WhisperPositionalEmbedding(12, 8)
    torch.nn.init.normal_(decoder.weight)
    g.add("whisper/decoder_weight", np32(decoder.weight))
    g.add("whisper/decoder_forward_cache3", np32(decoder(torch.zeros(1, 4, dtype=torch.long), cache_length=3)))

    for name in ("opus-mt-en-de", "pegasus-xsum", "m2m100-418m", "whisper-tiny", "xglm-564m"):
        model = meta_model(name)
        base = model.model
        info = {"tensors": position_tensors(model), "d_model": model.config.d_model}
        for stack in ("encoder", "decoder") if hasattr(base, "encoder") else ("decoder",):
            emb = (getattr(base, stack) if hasattr(base, "encoder") else base).embed_positions
            info[f"{stack}_class"] = type(emb).__name__
            info[f"{stack}_padding_idx"] = getattr(emb, "padding_idx", None)
            info[f"{stack}_offset"] = getattr(emb, "offset", 0)
        g.meta[name] = info


# --- learned absolute tables -------------------------------------------------------------------------
def learned(g: Goldens) -> None:
    from transformers.models.bart.modeling_bart import BartLearnedPositionalEmbedding
    from transformers.models.opt.modeling_opt import OPTLearnedPositionalEmbedding
    from transformers.models.roberta.modeling_roberta import RobertaEmbeddings

    for name in ("gpt2", "gpt-neo-125m", "starcoderbase-1b", "opt-125m", "bert-base-uncased",
                 "distilbert-base-uncased", "roberta-base", "xlm-roberta-base", "camembert-base", "bart-large",
                 "mbart-large-50"):
        g.meta[name] = {"tensors": position_tensors(meta_model(name))}

    tiny = AutoConfig.for_model("distilbert", dim=8, n_heads=2, n_layers=1, hidden_dim=8, max_position_embeddings=16,
                                vocab_size=32, sinusoidal_pos_embds=True)
    table = transformers.DistilBertModel(tiny).embeddings.position_embeddings.weight
    g.meta["distilbert-sinusoidal"] = {"trainable": table.requires_grad}
    g.add("distilbert/tiny_sinusoidal_table", np32(table))  # what the model initialises its table to

    opt = OPTLearnedPositionalEmbedding(16, 4)
    g.add("opt/weight", np32(opt.weight))
    full, padded = torch.ones(1, 10, dtype=torch.long), torch.tensor([[0, 0, 1, 1, 1, 1]])
    with torch.no_grad():
        g.add("opt/forward", np32(opt(full)))
        g.add("opt/forward_left_padded", np32(opt(padded)))
        g.add("opt/forward_cache6", np32(opt(full, cache_length=6)))  # the last 4 of 10 attended tokens

    bart = BartLearnedPositionalEmbedding(16, 4)
    g.add("bart/weight", np32(bart.weight))
    with torch.no_grad():
        g.add("bart/forward_cache3", np32(bart(torch.zeros(1, 5, dtype=torch.long), cache_length=3)))

    ids = torch.tensor([[0, 5, 6, 7, 2], [1, 1, 0, 5, 2]])  # roberta: pad id 1, the second left-padded
    g.add("roberta/position_ids", RobertaEmbeddings.create_position_ids_from_input_ids(ids, 1).numpy())


# --- M-RoPE ------------------------------------------------------------------------------------------
def mrope_positions() -> np.ndarray:
    """[3, n]: 4 text tokens, a 2x3x4 video grid, 3 text tokens after it (get_rope_index's shape),
    then one token far out (a long context)."""
    text = np.tile(np.arange(4), (3, 1))
    tt, hh, ww = np.meshgrid(np.arange(2), np.arange(3), np.arange(4), indexing="ij")
    grid = np.stack([tt.ravel(), hh.ravel(), ww.ravel()]) + 4
    after = np.tile(np.arange(3) + grid.max() + 1, (3, 1))
    far = np.array([[30000], [30001], [30002]])
    return np.concatenate([text, grid, after, far], axis=1)


def mrope(g: Goldens) -> None:
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl
    from transformers.models.qwen2_vl import modeling_qwen2_vl

    positions = mrope_positions()
    g.add("mrope/positions", positions)
    for name, module, cls in (("qwen2-vl-7b-instruct", modeling_qwen2_vl, "Qwen2VLRotaryEmbedding"),
                              ("qwen2.5-vl-3b-v5", modeling_qwen2_5_vl, "Qwen2_5_VLRotaryEmbedding")):
        text = config_of(fixture(name)).text_config
        rotary = getattr(module, cls)(text)
        head_dim = rotary.inv_freq.shape[0] * 2
        pos = torch.tensor(positions)[:, None, :]  # (3, batch 1, n)
        cos, sin = rotary(torch.zeros(1, dtype=torch.float32), pos)
        q = torch.randn(1, 1, positions.shape[1], head_dim, dtype=torch.float64)
        k = torch.randn(1, 1, positions.shape[1], head_dim, dtype=torch.float64)
        q_rot, k_rot = module.apply_rotary_pos_emb(q, k, cos, sin)
        g.add(f"{name}/cos", np32(cos[0]))
        g.add(f"{name}/sin", np32(sin[0]))
        g.add(f"{name}/q", q[0, 0].numpy())
        g.add(f"{name}/k", k[0, 0].numpy())
        g.add(f"{name}/scores", (q_rot @ k_rot.transpose(-1, -2))[0, 0].numpy())
        g.add(f"{name}/inv_freq_float32", np32(rotary.inv_freq))
        g.meta[name] = {"mrope_section": list(rotary.mrope_section), "head_dim": head_dim,
                        "layers": text.num_hidden_layers, "rope_theta": text.rope_parameters["rope_theta"],
                        "rope_type": rotary.rope_type, "attention_scaling": float(rotary.attention_scaling)}


def main() -> None:
    torch.manual_seed(0)  # the random weights and q, k: the same file on every run
    g = Goldens()
    for part in (alibi, t5, sinusoidal, learned, mrope):
        part(g)
    g.write()


if __name__ == "__main__":
    main()
