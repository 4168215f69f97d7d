"""Per-layer positional truth for every rotary model type of the installed transformers.

    PYTHONPATH=service python tests/golden/generate_models.py   # needs torch + transformers
    PYTHONPATH=service python tests/golden/generate_models.py llama qwen3   # redo these model types
    PYTHONPATH=service python tests/golden/generate_models.py --table   # docs/models.md and checked.json only
    (the non-rotary model types' golden: tests/golden/generate_nonrotary.py, then --table)

For every model type whose modeling file defines a `*RotaryEmbedding` class, this builds a
tiny model (the config class's defaults, sizes shrunk, `layer_types` kept as a prefix) and
variations of it (each rope type transformers defines, a partial rotary factor), runs one
forward pass with chosen position_ids, and records per decoder layer what its own
`apply_rotary_pos_emb` (any module-level `apply*rot*` function of its modeling file) did:

* whether the layer applied positions at all;
* the rotation it applied, probed with the basis vectors e_j: for each input dim j, the output
  dim it is mixed into (its partner), and the two coefficients (cos on j, sin on the
  partner) at every probe position. That is the cos/sin *and* the layout, as the model
  applies them, stored sparsely (`model_truth.LayerTruth`);
* where a layer applies several different rotations (DeepSeek-V3.2's sparse-attention indexer
  besides its MLA), each one, by the part of the layer that applied it (`Case.parts`).

An encoder-decoder runs with decoder token ids and decoder_position_ids (a speech model with a
waveform whose encoder sees the probe's frame count), so every rotating stack (T5Gemma's two,
Moonshine's two) is probed at the probe positions; a stack that counts its own positions 0..n-1
(Moonshine's encoder over its audio frames) has its rotary module given the probe positions.

The model's config (its `to_dict()`, plus the legacy flat form a pre-v5 config.json uses) is
stored with it, so tests/test_models_truth.py can run posenc.from_hf_config on the same
config without torch and compare layer by layer. Written to model_truth.npz; docs/models.md
(the model table) is written from the verdicts.
"""

from __future__ import annotations

import copy
import faulthandler
import gzip
import importlib
import inspect
import json
import multiprocessing
import re
import signal
import sys
import traceback
import warnings
from pathlib import Path

import numpy as np
import torch
import transformers
from posenc.models.generic import NESTED
from torch import nn
from transformers import AutoConfig, AutoModel, PretrainedConfig
from transformers.integrations.heterogeneity.configuration_utils import AmbiguousGlobalPerLayerAttributeError
from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES, model_type_to_module_name
from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))
import config_facts
import model_truth

OUT = HERE / "model_truth.npz"
DOCS = ROOT / "docs" / "models.md"
#: The forward pass's position_ids: small ones (float32 angles exact to ~1e-6) and long ones
#: (which scaled variants change most); 9 = no tiny size is 9, so the position axis is found.
POSITIONS = [0, 1, 2, 5, 11, 100, 1000, 3000, 4095]
N_LAYERS = 8
CASE_TIMEOUT_S = 60
TYPE_TIMEOUT_S = 600  # every case of one model type, once the generator waits for it
WORKERS = 2  # processes; the machines this runs on have two cores
APPLY_NAME = re.compile(r"^_?apply_rotary|^apply_.*rot")
SIZE_OVERRIDES = {
    "hidden_size": 64, "d_model": 64, "n_embd": 64, "intermediate_size": 64, "ffn_dim": 64,
    "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32, "expert_intermediate_size": 32,
    "vocab_size": 128, "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "moe_num_experts": 4,
    "num_experts_per_tok": 2, "moe_topk": 2, "top_k": 2, "n_group": 1, "topk_group": 1, "n_shared_experts": 1,
    "q_lora_rank": 32, "kv_lora_rank": 32, "qk_nope_head_dim": 16, "v_head_dim": 16, "qk_rope_head_dim": 16,
    "kv_channels": 32, "head_dim": 32, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "mamba_d_state": 8, "mamba_n_heads": 4,
    "mamba_d_head": 16, "ssm_state_size": 8, "mamba_head_dim": 16, "lru_width": 64, "conv_L_cache": 3,
    "block_size": 16, "first_k_dense_replace": 1, "embedding_size": 64, "top_k_experts": 2, "indexer_n_heads": 2,
    "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 16, "indexer_compress_ratio": 4,
    "vocab_size_per_layer_input": 128, "hidden_size_per_layer_input": 16, "cross_attention_hidden_size": 64,
    "encoder_hidden_size": 64, "hidden_size_global": 64,
}
LAYER_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers")
HEAD_KEYS = {"num_attention_heads": 4, "n_head": 4, "n_heads": 4, "num_key_value_heads": 2, "num_kv_heads": 2,
             "n_kv_heads": 2, "multi_query_group_num": 2, "num_sliding_attention_heads": 4,
             "encoder_num_attention_heads": 4, "encoder_num_key_value_heads": 4}  # Moonshine's encoder (MHA only)
#: Per-layer index lists / flags that must shrink with the layer count.
LAYER_LISTS = ("layer_types", "layer_rope_theta", "no_rope_layers", "layers_block_type", "block_types", "attn_layer_indices",
               "cross_attention_layers", "full_attn_idxs", "swa_layers", "mlp_layer_types")
#: Size keys whose None default the modeling code still reads as a size (a MoE's expert counts,
#: ESM's vocab, Nemotron's kv heads): given their tiny value too.
NONE_SIZES = ("vocab_size", "num_key_value_heads", "num_experts_per_tok", "n_routed_experts", "n_shared_experts",
              "num_experts", "top_k_experts", "moe_intermediate_size", "indexer_n_heads", "indexer_kv_heads",
              "indexer_head_dim", "indexer_budget", "indexer_compress_ratio")
#: Per-layer lists a config class may leave None though its modeling code indexes them, and the
#: plain kind each layer then gets (LFM2-MoE's layer_types, DeepSeek-OCR-2's mlp_layer_types).
LIST_FILLS = {"layer_types": "full_attention", "mlp_layer_types": "dense"}
#: Sub-configs that are stacks of the same model (T5Gemma's encoder and decoder, BLT's local and
#: global transformers), shrunk with it; vision / audio towers are not run by a token forward.
SUB_STACKS = ("encoder", "decoder", "encoder_config", "decoder_config", "global_config", "patcher_config")
#: Sizes of learned position tables / caches, raised where they stop short of the probe positions.
POSITION_TABLE_KEYS = ("n_positions", "max_position_embeddings", "max_seq_len")
#: Sub-config values a config class leaves None that its modeling code reads as numbers (so its
#: default config cannot run in transformers itself): the published checkpoints' values.
NONE_READ_AS_NUMBER = {"clip_qkv": 8.0}


def rotary_model_types() -> list[str]:
    """Model types whose modeling file defines a *RotaryEmbedding class (text or vision)."""
    out = []
    models = Path(transformers.__file__).parent / "models"
    for model_type in sorted(CONFIG_MAPPING_NAMES):
        module = model_type_to_module_name(model_type)
        source = models / module / f"modeling_{module}.py"
        if source.exists() and re.search(r"^class \w*RotaryEmbedding\b", source.read_text(), re.MULTILINE):
            out.append(model_type)
    return out


def positionless_model_types() -> list[str]:
    """Text model types whose modeling file has none of the position modules `POSITION_PATTERNS`
    looks for (Jamba, Mamba, RWKV, ...): built and checked like the rotary ones, their truth is
    that no layer applies positions, recorded only where the model shows it (`run_positionless`).
    Left out: wrappers (their language config is read and gated), models whose classes take
    images, video or audio and not text, and config classes that cannot be built."""
    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    models = Path(transformers.__file__).parent / "models"
    out = []
    for model_type in sorted(CONFIG_MAPPING_NAMES):
        module = model_type_to_module_name(model_type)
        source = models / module / f"modeling_{module}.py"
        if not source.exists() or any(p.search(source.read_text()) for p in POSITION_PATTERNS.values()):
            continue
        try:
            config = AutoConfig.for_model(model_type)
        except Exception:
            continue
        if any(isinstance(getattr(config, key, None), PretrainedConfig) for key in (*NESTED, "vision_config",
                                                                                      "audio_config")):
            continue
        inputs = _input_modalities(model_type, source)
        if inputs is None or "text" in inputs:
            out.append(model_type)
    return out


def run_positionless(config) -> dict:
    """The truth of a model without position modules: no layer applies positions. Recorded only
    when the model shows it: its output is the same bit for bit under two sets of position_ids
    (when its forward takes them), and none of its modules is an embedding table other than a
    token vocabulary's or has "position" / "rotary" / "sinusoid" in its class name (so a table
    indexed by positions it makes itself would be seen). Else a RuntimeError saying what was seen."""
    torch.manual_seed(0)
    model = build(config)
    model.eval()
    layers = _layer_paths(model)
    if not layers:
        raise RuntimeError("no decoder layers found")
    vocab = {getattr(model.config, k, None) for k in ("vocab_size", "n_vocab")} - {None}
    for path, module in model.named_modules():
        name = type(module).__name__
        if re.search(r"position|rotary|sinusoid|alibi|relative", name, re.IGNORECASE):
            raise RuntimeError(f"{path} ({name}) looks like a position module")
        if isinstance(module, nn.Embedding) and module.num_embeddings not in vocab:
            raise RuntimeError(f"{path}: an embedding table of {module.num_embeddings} rows that is not the vocabulary")
    ids = torch.arange(len(POSITIONS))[None] % 100 + 3
    outputs = []
    for pos in (POSITIONS, [p + 517 for p in POSITIONS]):
        extra = {"decoder_input_ids": ids} if getattr(model.config, "is_encoder_decoder", False) else {}
        with torch.no_grad():
            try:
                out = model(input_ids=ids, position_ids=torch.tensor([pos]), use_cache=False, **extra)
            except TypeError:  # its forward takes no position ids: nothing to vary
                break
        outputs.append(out[0])
    if len(outputs) == 2 and not torch.equal(outputs[0], outputs[1]):
        raise RuntimeError("its output changes with position_ids: it applies positions posenc has no golden for")
    return {"layers": {path: None for path in layers}, "several": {}, "parts": {}, "positions": list(POSITIONS)}


def language_config(config):
    """The sub-config posenc reads for a composite model: thinker_config.text_config, text_config, llm_config."""
    for key in ("thinker_config", "text_config", "llm_config"):
        sub = getattr(config, key, None)
        if sub is not None and not isinstance(sub, dict) and hasattr(sub, "to_dict"):
            return language_config(sub)
    return config


def shrink(config, *, rebuild: bool = True) -> None:
    """Tiny sizes in place, keeping everything positional (rope parameters, layer patterns).

    The tiny values are given to the config class afresh, as a config.json would give them, so
    that what its `__post_init__` derives from them follows (head dims, Mamba head sizes, per-
    layer overrides, layer patterns); a class that refuses them gets them set in place instead.
    Sizes first, then what depends on the sizes the class derived (head_dim, the MLA and Mamba
    widths, the mrope sections), then per-layer overrides. A sub-stack (`rebuild=False`) keeps what its parent set on it."""
    changes: dict = {}
    tiny = config
    for step in (_tiny_sizes, _tiny_widths, _tiny_per_layer):
        changes.update(step(config, tiny))
        tiny = _rebuild(config, changes) if rebuild else _set_all(config, changes)
    if tiny is not config:
        vars(config).clear()
        vars(config).update(vars(tiny))
    for key in SUB_STACKS:  # an encoder-decoder's or a byte model's own stacks, tiny too
        if isinstance(_get(config, key), transformers.PretrainedConfig):
            shrink(_get(config, key), rebuild=False)
            inner = _get(_get(config, key), "text_config")  # T5Gemma-2's encoder: a multimodal config
            if isinstance(inner, transformers.PretrainedConfig):
                shrink(inner, rebuild=False)
    for key in POSITION_TABLE_KEYS:  # a position table (or cache) must reach the probe positions
        if isinstance(_get(config, key), int) and _get(config, key) <= max(POSITIONS):
            _set(config, key, max(POSITIONS) + 1)
    if _has(config, "sliding_window") and _get(config, "sliding_window") is None and "config.sliding_window" in \
            _modeling_source(config):  # a window the probe never leaves (its masks need one): changes nothing
        _set(config, "sliding_window", max(POSITIONS) + 1)
    source = _modeling_source(config)
    for key, value in SIZE_OVERRIDES.items():  # a size its modeling code reads that the class never defined
        if "intermediate_size" in key and not _has(config, key) and f"config.{key}" in source:
            _set(config, key, value)
    if not _has(config, "num_key_value_heads") and "config.num_key_value_heads" in source and _get(
            config, "is_encoder_decoder", False) and isinstance(_get(config, "num_attention_heads"), int):
        # read but never defined (Moonshine-Streaming's decoder): MHA
        _set(config, "num_key_value_heads", _get(config, "num_attention_heads"))
    for key, kind in LIST_FILLS.items():  # a per-layer list left None that the modeling code indexes
        if _get(config, key, False) is None and f"config.{key}[" in source:
            _set(config, key, [kind] * _get(config, "num_hidden_layers"))
    params = _get(config, "rope_parameters")
    if params == {} and "rope_parameters[layer_type]" in source:  # nested by layer type, left empty
        _set(config, "rope_parameters", {t: {"rope_type": "default", "rope_theta": 10000.0}
                                         for t in dict.fromkeys(_get(config, "layer_types") or ["full_attention"])})
    for key in list(vars(config)):  # a mapping left None that the modeling code reads (Chameleon's vocabulary_map)
        if key.endswith("_map") and _get(config, key, False) is None and f"config.{key}" in source:
            _set(config, key, {})
    for key, sub in vars(config).items():
        if isinstance(sub, transformers.PretrainedConfig):
            if not _has(sub, "rope_theta") and f"{key}.rope_theta" in source:  # DBRX's attn_config
                sub.rope_theta = (_get(config, "rope_parameters") or {}).get("rope_theta", 10000.0)
            for attr, value in NONE_READ_AS_NUMBER.items():
                if _has(sub, attr) and _get(sub, attr) is None and f"{key}.{attr}" in source:
                    _set(sub, attr, value)

def _tiny_sizes(config, tiny) -> dict:
    """Every size key at its tiny value; per-layer lists cut to the layers kept."""
    out = {}
    for key, value in {**SIZE_OVERRIDES, **HEAD_KEYS}.items():
        current = _get(config, key)
        if (isinstance(current, int) and not isinstance(current, bool)) or (current is None and key in NONE_SIZES
                                                                          and _has(config, key)):
            out[key] = value
    if _get(config, "num_key_value_heads") == _get(config, "num_attention_heads") and "num_key_value_heads" in out:
        out["num_key_value_heads"] = out["num_attention_heads"]  # MHA stays MHA (ESMC's k_norm spans hidden)
    vocab = out.get("vocab_size", _get(config, "vocab_size"))
    for key in vars(config):
        value = _get(config, key)
        if key.endswith("token_id") and isinstance(value, int) and isinstance(vocab, int) and value >= vocab:
            out[key] = 1
    layers = N_LAYERS
    for key in LAYER_KEYS:
        if isinstance(_get(config, key), int):  # a model defined with fewer layers keeps its count
            layers = min(_get(config, key), N_LAYERS)
            out[key] = layers
    for key in LAYER_LISTS:
        value = _get(config, key)
        if isinstance(value, list) and value:
            if all(isinstance(v, int) and not isinstance(v, bool) for v in value) and key.endswith(
                    ("layers", "idxs", "indices", "ids")) and key != "no_rope_layers":
                out[key] = [v for v in value if v < layers]
            else:
                out[key] = value[:layers]
    shared = _get(config, "num_kv_shared_layers")  # Gemma-3n: the last layers reuse earlier ones' cache
    if isinstance(shared, int) and shared and isinstance(_get(config, "num_hidden_layers"), int):
        out["num_kv_shared_layers"] = max(0, layers - max(2, round(layers * (
            1 - shared / _get(config, "num_hidden_layers")))))
    return out


def _tiny_per_layer(default, config) -> dict:
    """A heterogeneous config's per-layer head_dim overrides (Gemma-4's full-attention layers, as
    its class derives them for the tiny layer count) at their ratio to the global one; MLA
    families' overrides stay as derived (their head_dim and rotary part are tied per layer)."""
    overrides = config.to_dict().get("per_layer_config")
    base, tiny = _get(default, "head_dim"), _get(config, "head_dim")
    if not overrides or _has(config, "qk_rope_head_dim") or not isinstance(base, int) or not isinstance(tiny, int):
        return {}
    return {"per_layer_config": {int(i): {k: max(2, tiny * v // base // 2 * 2) if k == "head_dim" else v
                                          for k, v in over.items()} for i, over in overrides.items()}}


def _tiny_widths(default, config) -> dict:
    """What depends on the sizes: head_dim, the MLA / Mamba widths, rotary_dim, mrope sections."""
    out = {}
    heads, hidden, head_dim = (_get(config, k) for k in ("num_attention_heads", "hidden_size", "head_dim"))
    if isinstance(head_dim, int) and isinstance(_get(default, "head_dim"), int) and _get(default, "head_dim") * _get(
            default, "num_attention_heads", 0) == _get(default, "hidden_size"):  # kept tied (Helium's, ESMC's o_proj)
        out["head_dim"] = head_dim = hidden // heads
    if isinstance(_get(config, "qk_rope_head_dim"), int):  # MLA: head_dim spans the rotary part
        factor = (_get(config, "rope_parameters") or {}).get("partial_rotary_factor") or 1.0
        out["head_dim"] = head_dim = int(_get(config, "qk_rope_head_dim") / factor)
        out["num_key_value_heads"] = heads
        if _has(config, "qk_head_dim"):
            out["qk_head_dim"] = _get(config, "qk_nope_head_dim") + head_dim
    elif _has(config, "head_dim") and head_dim is None and hidden:
        out["head_dim"] = head_dim = hidden // heads
    if isinstance(_get(config, "indexer_head_dim"), int) and isinstance(head_dim, int):
        out["indexer_head_dim"] = head_dim  # Qwen4-Exp's indexer rotates with the attention's cos/sin
    if isinstance(_get(config, "rotary_dim"), int) and isinstance(heads, int):
        out["rotary_dim"] = (head_dim if isinstance(head_dim, int) else hidden // heads) // 2
    expand = _get(config, "mamba_expand")
    if isinstance(expand, int) and isinstance(hidden, int):  # Mamba-2: heads * head width == expand * hidden
        inner = expand * hidden
        if isinstance(_get(config, "mamba_d_ssm"), int):
            out["mamba_d_ssm"] = inner
        if isinstance(_get(config, "mamba_n_heads"), int) and isinstance(_get(config, "mamba_d_head"), int):
            out["mamba_d_head"] = inner // _get(config, "mamba_n_heads")
    params = _get(config, "rope_parameters")
    source = _modeling_source(config)
    if isinstance(params, dict) and "rope_type" in params and "mrope_section" in source:
        half = int((head_dim or hidden // heads) * (params.get("partial_rotary_factor") or 1.0)) // 2
        found = re.search(r'"mrope_section", \[(\d+), (\d+), (\d+)\]', source)
        default = params.get("mrope_section") or ([int(g) for g in found.groups()] if found else [24, 20, 20])
        section = [half * s // sum(default) for s in default]
        unique = [i for i, s in enumerate(default) if default.count(s) == 1]  # equal sections stay equal
        section[unique[0] if unique else 0] += half - sum(section)
        out["rope_parameters"] = {**params, "mrope_section": section}
    return out


def _rebuild(config, changes: dict):
    """The config class built from the keyword arguments that made `config` (the ones a composite
    parent set) with `changes` over them; on a class that refuses them, a copy with them set."""
    cls = type(config)
    try:
        made = {k: v for k, v in config.to_dict().items() if k not in ("model_type", "transformers_version")}
        defaults = cls().to_dict()
        given = {k: v for k, v in made.items() if k in defaults and defaults[k] != v and k != "per_layer_config"
                 and not _read_only(cls, k)}
        return cls(**{**given, **{k: v for k, v in changes.items() if not _read_only(cls, k)}})
    except Exception:
        return _set_all(config, changes)


def _read_only(cls, key: str) -> bool:
    """Whether `key` is a property the class derives (no setter): not a keyword it takes."""
    prop = getattr(cls, key, None)
    return isinstance(prop, property) and prop.fset is None


def _set_all(config, changes: dict):
    """A copy of `config` with `changes` set in place."""
    tiny = copy.deepcopy(config)
    for key, value in changes.items():
        _set(tiny, key, value)
    return tiny


def _get(config, key, default=None):
    """An attribute, also one a heterogeneous (per-layer) config guards: its global value."""
    try:
        return getattr(config, key, default)
    except AmbiguousGlobalPerLayerAttributeError:
        return config.__dict__.get(key, default)


def _has(config, key) -> bool:
    try:
        return hasattr(config, key)
    except AmbiguousGlobalPerLayerAttributeError:
        return key in config.__dict__


def _set(config, key, value) -> None:
    """Set an attribute unless it is a read-only property (derived from others: it follows them)."""
    try:
        setattr(config, key, value)
    except AttributeError:
        pass


#: Config keys that turn a family's rotary on, and their value that does (Granite-4 hybrids'
#: position_embedding_type is null by default, Zamba2's use_mem_rope false): the variations are
#: made with it off, as the defaults have it, and again with it on.
ROPE_SWITCHES = {"position_embedding_type": "rope", "use_mem_rope": True}


def variations(base) -> list[tuple[str, object]]:
    """(name, config) pairs: the default config, each rope type, a partial rotary factor, other
    layer-type patterns (NoPE, linear / conv / mamba layers), per-layer-type scaling; with a rope
    switch that is off by default, all of them again with it on."""
    out = _variations(base)
    for key, on in ROPE_SWITCHES.items():
        if hasattr(base, key) and getattr(base, key) in (None, False):
            switched = copy.deepcopy(base)
            setattr(switched, key, on)
            out += [(f"{key}={on}" + ("" if name == "default" else f", {name}"), config)
                    for name, config in _variations(switched)]
    return out


def _variations(base) -> list[tuple[str, object]]:
    out = [("default", base)] + layer_pattern_variations(base) + stack_variations(base)
    params = getattr(base, "rope_parameters", None)
    if not isinstance(params, dict):
        return out
    if "rope_type" not in params:  # nested per layer type: scale one type at a time
        for layer_type, sub in params.items():
            if isinstance(sub, dict):
                config = copy.deepcopy(base)
                config.rope_parameters = {**copy.deepcopy(params), layer_type: {
                    "rope_theta": sub.get("rope_theta", 10000.0), **SCALINGS["yarn"]}}
                out.append((f"yarn on {layer_type}", config))
        return out
    max_len = getattr(base, "max_position_embeddings", None) or 4096
    rot = _rotary_dim(base)
    for name, scaling in SCALINGS.items():
        if params.get("rope_type") == name:
            continue
        if name == "longrope":
            if not rot:
                continue
            scaling = {**scaling, "short_factor": [1.0 + 0.01 * i for i in range(rot // 2)],
                       "long_factor": [1.0 + 0.25 * i for i in range(rot // 2)]}
        config = copy.deepcopy(base)
        config.rope_parameters = {"rope_theta": params.get("rope_theta", 10000.0), **scaling}
        for key in ("partial_rotary_factor", "mrope_section", "mrope_interleaved"):  # not scaling: kept
            if key in params:
                config.rope_parameters[key] = params[key]
        if name in ("longrope", "yarn", "llama3"):
            config.max_position_embeddings = max(max_len, 4096)
        out.append((f"rope_type={name}", config))
    if "compute_ntk_alpha_rope_parameters" in _modeling_source(base):
        config = copy.deepcopy(base)
        config.rope_parameters = {**params, "rope_type": "dynamic", "factor": 1.0, "alpha": 1000.0}
        out.append(("ntk alpha=1000", config))
    if "partial_rotary_factor" in params or hasattr(base, "partial_rotary_factor"):
        config = copy.deepcopy(base)
        config.rope_parameters = {**params, "partial_rotary_factor": 0.5}
        out.append(("partial_rotary_factor=0.5", config))
    return out


def stack_variations(base) -> list[tuple[str, object]]:
    """An encoder-decoder whose stacks have their own rope parameters (T5Gemma's encoder and
    decoder configs): each stack scaled alone, with its own base, so a reader that mixes them up
    is caught."""
    out = []
    for key in SUB_STACKS:
        sub = getattr(base, key, None)
        if not isinstance(sub, transformers.PretrainedConfig):
            continue
        path = (key, "text_config") if isinstance(getattr(sub, "text_config", None), transformers.PretrainedConfig) \
            else (key,)  # T5Gemma-2's encoder: its text stack's
        params = _get(_stack_config(base, path), "rope_parameters")
        if isinstance(params, dict) and "rope_type" in params:
            config = copy.deepcopy(base)
            _stack_config(config, path).rope_parameters = {**params, "rope_theta": 50000.0, **SCALINGS["yarn"]}
            out.append((f"yarn on {key}", config))
        elif isinstance(params, dict):  # nested per layer type: each type scaled alone
            for layer_type, sub_params in params.items():
                if isinstance(sub_params, dict):
                    config = copy.deepcopy(base)
                    _stack_config(config, path).rope_parameters = {**copy.deepcopy(params), layer_type: {
                        "rope_theta": 50000.0, **SCALINGS["yarn"]}}
                    out.append((f"yarn on {key} {layer_type}", config))
    return out


def _stack_config(config, path: tuple[str, ...]):
    for key in path:
        config = getattr(config, key)
    return config


SCALINGS = {
    "dynamic": {"rope_type": "dynamic", "factor": 2.0},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 1024},
    "longrope": {"rope_type": "longrope", "original_max_position_embeddings": 1024},
}
#: Layer types a family may mix in; tried where its modeling file names them.
LAYER_TYPE_CANDIDATES = ("full_attention", "sliding_attention", "chunked_attention", "linear_attention", "conv",
                         "mamba", "recurrent", "attention")


def _modeling_source(config) -> str:
    path = Path(inspect.getfile(type(config)))
    modeling = path.with_name(path.name.replace("configuration_", "modeling_"))
    return modeling.read_text() if modeling.exists() else ""


def layer_pattern_variations(base) -> list[tuple[str, object]]:
    """Odd layers turned into each other layer type the family's modeling code names; every other
    layer NoPE where the config has `no_rope_layers`."""
    out = []
    types = getattr(base, "layer_types", None)
    if isinstance(types, list) and types and all(isinstance(t, str) for t in types):
        source = _modeling_source(base)
        for kind in LAYER_TYPE_CANDIDATES:
            if kind not in types and f'"{kind}"' in source:
                config = copy.deepcopy(base)
                try:
                    config.layer_types = [kind if i % 2 else t for i, t in enumerate(types)]
                except Exception:
                    continue
                out.append((f"odd layers {kind}", config))
    if hasattr(base, "attn_layer_indices"):  # hybrids listing their attention layers (Bamba: none by default)
        config = copy.deepcopy(base)
        config.attn_layer_indices = list(range(1, _get(base, "num_hidden_layers"), 2))
        out.append(("attention at odd layers", config))
    flags = getattr(base, "no_rope_layers", None)
    if isinstance(flags, list) and flags:
        config = copy.deepcopy(base)
        config.no_rope_layers = [i % 2 for i in range(len(flags))]
        out.append(("no_rope_layers alternating", config))
    return out


def _rotary_dim(config) -> int:
    head = getattr(config, "qk_rope_head_dim", None) or getattr(config, "head_dim", None)
    if not head:
        head = config.hidden_size // config.num_attention_heads
    factor = (getattr(config, "rope_parameters", None) or {}).get("partial_rotary_factor", 1.0) or 1.0
    return int(head * factor)


def legacy_form(config) -> dict | None:
    """The pre-v5 config.json of the same model: top-level rope_theta / partial_rotary_factor and a
    `rope_scaling` dict instead of `rope_parameters`; None unless the config class reads it back
    to the same rope_parameters (then it is the same model, and posenc must say the same)."""
    raw = config.to_dict()
    params = raw.get("rope_parameters")
    if not isinstance(params, dict):
        return None
    if "rope_type" not in params:  # nested: the one scaled layer type's dict as the flat rope_scaling
        scaled = [sub for sub in params.values() if isinstance(sub, dict) and sub.get("rope_type") != "default"]
        params_for_flat = scaled[0] if len(scaled) == 1 else next(iter(params.values()))
        if not isinstance(params_for_flat, dict):
            return None
    else:
        params_for_flat = params
    legacy = {k: v for k, v in raw.items() if k != "rope_parameters"}
    params, nested_params = params_for_flat, params
    scaling = {k: v for k, v in params.items() if k not in ("rope_theta", "partial_rotary_factor")}
    legacy["rope_theta"] = params.get("rope_theta")
    if "partial_rotary_factor" in params:
        legacy["partial_rotary_factor"] = params["partial_rotary_factor"]
    if scaling.get("rope_type", "default") != "default":
        legacy["rope_scaling"] = {"type" if k == "rope_type" else k: v for k, v in scaling.items()}
    try:
        again = type(config)(**{k: v for k, v in legacy.items() if k not in ("model_type", "transformers_version")})
    except Exception:
        return None
    return legacy if again.rope_parameters == nested_params else None


class Recorder:
    """Hooks: the current decoder layer, the rotary modules' position_ids, every apply call's rotation."""

    def __init__(self, model: nn.Module, n: int):
        self.n = n
        self.current: str | None = None
        self.calls: dict[str, list] = {}
        self.positions = None
        #: an encoder-decoder's probe positions, given to a stack's rotary module that counts its own
        self.own_positions = torch.tensor([POSITIONS]) if getattr(model.config, "is_encoder_decoder", False) \
            and n == len(POSITIONS) else None
        self.layers = _layer_paths(model)
        self.names = {id(m): path for path, m in model.named_modules()}  # which part of a layer calls apply
        self._handles = []
        self._patched = []
        for path, module in model.named_modules():
            if path in self.layers:
                self._handles.append(module.register_forward_pre_hook(self._enter(path)))
                self._handles.append(module.register_forward_hook(self._leave))
            if type(module).__name__.endswith("RotaryEmbedding") and "vision" not in path.lower():
                self._handles.append(module.register_forward_pre_hook(self._rotary, with_kwargs=True))
        for name in _modules_of(model):
            module = sys.modules[name]
            for attr, fn in list(vars(module).items()):
                if callable(fn) and inspect.isfunction(fn) and APPLY_NAME.search(attr) and "vision" not in attr:
                    setattr(module, attr, self._wrap(fn))
                    self._patched.append((module, attr, fn))

    def close(self):
        for handle in self._handles:
            handle.remove()
        for module, attr, fn in self._patched:
            setattr(module, attr, fn)

    def _enter(self, path):
        def hook(module, args):
            self.current = path
        return hook

    def _leave(self, module, args, output):
        self.current = None

    def _rotary(self, module, args, kwargs):
        ids = kwargs.get("position_ids", args[1] if len(args) > 1 else None)
        if self.own_positions is not None and isinstance(ids, torch.Tensor) and ids.shape[-1] == self.n and \
                ids.reshape(-1, self.n)[0].tolist() == list(range(self.n)) and "position_ids" in kwargs:
            # a stack counting its own positions 0..n-1 (Moonshine's encoder over its audio frames): its
            # rotary module evaluated at the probe positions, as the other stack's is
            kwargs = {**kwargs, "position_ids": self.own_positions.to(ids.device).expand(ids.shape[0], -1)}
            ids = kwargs["position_ids"]
        if isinstance(ids, torch.Tensor) and self.positions is None:
            self.positions = ids.reshape(-1, ids.shape[-1])[0].tolist()
        return args, kwargs

    def _wrap(self, fn):
        def wrapped(*args, **kwargs):
            out = fn(*args, **kwargs)
            if self.current is not None:
                part = self._caller(inspect.currentframe().f_back)
                self.calls.setdefault(self.current, []).append((part, probe(fn, args, kwargs, self.n)))
            return out
        wrapped.__wrapped__ = fn
        return wrapped


    def _caller(self, frame) -> str:
        """The part of the current layer whose forward called apply (its module path under the
        layer: "self_attn", "self_attn.indexer"), "" if none is found."""
        prefix = self.current + "."
        while frame is not None:
            owner = frame.f_locals.get("self")
            path = self.names.get(id(owner)) if isinstance(owner, nn.Module) else None
            if path is not None and path.startswith(prefix):
                return path[len(prefix):]
            frame = frame.f_back
        return ""


def _layer_paths(model: nn.Module) -> list[str]:
    """The decoder/encoder layers: children of the outermost ModuleLists named layers / h / block(s)."""
    lists = [path for path, module in model.named_modules()
             if isinstance(module, nn.ModuleList) and path.rsplit(".", 1)[-1] in ("layers", "h", "layer", "block",
                                                                                  "blocks", "decoder_layers")
             and "vision" not in path.lower() and "visual" not in path.lower()]
    outer = [p for p in lists if not any(p != q and p.startswith(q + ".") for q in lists)]
    return [f"{p}.{i}" for p in outer for i in range(len(model.get_submodule(p)))]


def _modules_of(model: nn.Module) -> set[str]:
    return {type(m).__module__ for m in model.modules() if type(m).__module__.startswith("transformers.models.")}


def probe(fn, args, kwargs, n: int):
    """Run `fn` on basis vectors in place of its first tensor (and the k beside it): [n, D, D]
    with column j the image of e_j at each position, or an error string."""
    args = list(args)
    q = args[0]
    if not isinstance(q, torch.Tensor):
        return "first argument is not a tensor"
    axes = [i for i, size in enumerate(q.shape[:-1]) if size == n]
    if len(axes) != 1:
        return f"cannot find the position axis in {tuple(q.shape)}"
    dim = q.shape[-1]
    basis = torch.zeros((dim,) + tuple(q.shape[1:]), dtype=q.dtype)
    for j in range(dim):
        basis[j, ..., j] = 1.0
    probe_args = [basis] + args[1:]
    if len(args) > 1 and isinstance(args[1], torch.Tensor) and args[1].shape[-1] == dim and args[1].dim() == q.dim():
        probe_args[1] = torch.zeros((dim,) + tuple(args[1].shape[1:]), dtype=q.dtype)
    try:
        with torch.no_grad():
            out = fn(*probe_args, **kwargs)
    except Exception as exc:  # a function that cannot broadcast a batch of probes
        return f"probe failed: {type(exc).__name__}: {exc}"
    out = out[0] if isinstance(out, (tuple, list)) else out
    if out.shape[0] != dim or out.shape[-1] != dim:
        return f"probe output shape {tuple(out.shape)}"
    index = [0] * out.dim()
    index[0] = slice(None)
    index[axes[0]] = slice(None)
    index[-1] = slice(None)
    cols = out[tuple(index)].to(torch.float64).numpy()  # [dim(j), n, dim(out)]
    return np.transpose(cols, (1, 2, 0))  # [n, out, j]


def build(config) -> nn.Module:
    """AutoModel for the config, else its modeling file's base model class for that config
    class (a text config without an AutoModel entry: Mllama's)."""
    try:
        return AutoModel.from_config(config)
    except ValueError:
        module = importlib.import_module(type(config).__module__.replace(".configuration_", ".modeling_"))
        for name, cls in vars(module).items():
            if isinstance(cls, type) and issubclass(cls, nn.Module) and getattr(cls, "config_class", None) is \
                    type(config) and name.endswith("Model") and "PreTrained" not in name:
                return cls(config)
        raise


def run_case(config) -> dict:
    """Build, run, record: {"layers": {path: LayerTruth.to_arrays() or None}, "positions": [...]}."""
    torch.manual_seed(0)
    model = build(config)
    model.eval()
    recorder = Recorder(model, len(POSITIONS))
    try:
        ids = torch.arange(len(POSITIONS))[None] % 100 + 3
        pos = torch.tensor([POSITIONS])
        with torch.no_grad():
            _forward(model, ids, pos)
    finally:
        recorder.close()
    if not recorder.layers:
        raise RuntimeError("no decoder layers found")
    layers, several, parts = {}, {}, {}
    for path in recorder.layers:
        calls = recorder.calls.get(path, [])
        errors = [c for _, c in calls if isinstance(c, str)]
        found = [(part, model_truth.LayerTruth.from_matrices(m)) for part, m in calls if not isinstance(m, str)]
        truths = [t for _, t in found]
        elsewhere = [e for e in errors if e.startswith("cannot find the position axis")]
        if errors and (len(elsewhere) < len(errors) or not truths):
            raise RuntimeError(f"{path}: {errors[0]}")
        distinct = {}
        for part, truth in found:
            distinct.setdefault(truth.key(), (part, truth))
        if len(distinct) > 1 or elsewhere:  # an indexer's or compressor's own rotation besides the attention's
            several[path] = [t.layout for _, t in distinct.values()] + ["over compressed keys"] * bool(elsewhere)
            # each distinct rotation by the part of the layer applying it (the first: the attention's)
            named = {}
            for part, truth in distinct.values():
                named.setdefault(part, truth)
            if len(named) == len(distinct):  # one part, one rotation: the judge can pair them
                parts[path] = named
        layers[path] = truths[0] if truths else None  # the first: the attention's q/k in every such layer
    return {"layers": layers, "several": several, "parts": parts,
            "positions": recorder.positions or list(range(len(POSITIONS)))}


def _forward(model: nn.Module, ids, pos) -> None:
    """One forward pass at the probe positions, with the inputs the model takes: token ids (and
    decoder token ids for an encoder-decoder), or embeddings for a model that takes only those
    (a talker's code predictor)."""
    extra = {"decoder_input_ids": ids} if getattr(model.config, "is_encoder_decoder", False) else {}
    params = inspect.signature(model.forward).parameters
    if extra and "decoder_position_ids" in params:
        extra["decoder_position_ids"] = pos  # both stacks at the probe positions (T5Gemma's rotate)
    if extra and "input_values" in params and "input_ids" not in params:  # a speech encoder (Moonshine)
        model(input_values=_audio(model, ids.shape[1]), use_cache=False, **extra)
        return
    try:
        model(input_ids=ids, position_ids=pos, use_cache=False, **extra)
    except TypeError:
        model(input_ids=ids, **extra)
    except (ValueError, AttributeError) as exc:  # a talker fed by another model's embeddings
        if "inputs_embeds" not in inspect.signature(model.forward).parameters or (
                isinstance(exc, ValueError) and "inputs_embeds" not in str(exc) and "input_ids" not in str(exc)):
            raise
        hidden = model.config.hidden_size
        model(inputs_embeds=torch.randn(1, ids.shape[1], hidden), position_ids=pos, use_cache=False)


def _audio(model: nn.Module, frames: int):
    """A waveform whose encoder sees `frames` frames (the shortest: its conv stem's output length)."""
    lengths = getattr(model, "_get_feat_extract_output_lengths", None)
    if lengths is None:
        raise RuntimeError("a speech model without _get_feat_extract_output_lengths")
    size = next(n for n in range(1, 1 << 20) if lengths(n) >= frames)
    if lengths(size) != frames:
        raise RuntimeError(f"no waveform gives {frames} encoder frames")
    torch.manual_seed(0)
    return torch.randn(1, size)


def cases_of(model_type: str) -> tuple[list, str | None]:
    """Every case of one model type, and why its default config could not be run (None if it ran)."""
    return guarded(_cases_of, model_type)


def guarded(work, model_type: str) -> tuple[list, str | None]:
    """`work(model_type)` in a pool worker, or ([], why) when it raised: one family's surprise must
    not lose the others' goldens (this generator's and generate_nonrotary's)."""
    try:
        return work(model_type)
    except DefaultFailed as exc:
        return [], str(exc)
    except Exception as exc:
        return [], f"{type(exc).__name__}: {exc}"[:300]


class DefaultFailed(Exception):
    """A model type's default config did not run: why (its first line), as the goldens record it."""


def ran(runs, run):
    """(name, config, run(config)) of each (name, config) of `runs` that runs, each under the case
    alarm (faulthandler dumps a hang's stack first); a variation that raises is left out, the
    default config's error raises DefaultFailed. The alarm is disarmed after each case: left set,
    it would fire in the idle pool worker and lose its next task."""
    for name, config in runs:
        faulthandler.dump_traceback_later(CASE_TIMEOUT_S)
        signal.alarm(CASE_TIMEOUT_S)
        try:
            result = run(config)
        except Exception as exc:
            if name == "default":
                if "-v" in sys.argv:
                    traceback.print_exc()
                raise DefaultFailed(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]) \
                    from None
            continue
        finally:
            signal.alarm(0)
            faulthandler.cancel_dump_traceback_later()
        yield name, config, result


def tiny_configs(model_type: str) -> tuple[object, object]:
    """A worker's start on one model type (quiet, one thread, SIGALRM raising TimeoutError for the
    alarm each case sets) and (its config class's defaults, their language config shrunk)."""
    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)
    signal.signal(signal.SIGALRM, _timeout)
    print(f"{model_type:32s} start", flush=True)
    outer = AutoConfig.for_model(model_type)
    base = language_config(outer)
    shrink(base)
    return outer, base


def _cases_of(model_type: str) -> tuple[list, str | None]:
    try:
        outer, base = tiny_configs(model_type)
    except Exception as exc:
        return [], f"config: {type(exc).__name__}: {exc}"[:300]
    positionless = model_type not in rotary_model_types()
    try:
        runs = [("default", base)] if positionless else variations(base)
    except Exception:  # a config the variations cannot be made of: its defaults alone
        runs = [("default", base)]
    cases = []
    for name, config, result in ran(runs, run_positionless if positionless else run_case):
        cases.append(model_truth.Case(model_type, name, config.to_dict(), result["positions"], result["layers"],
                                      result["several"], result["parts"]))
        legacy = legacy_form(config)
        if legacy is not None:
            cases.append(model_truth.Case(model_type, f"{name} (legacy flat keys)", legacy, result["positions"],
                                          result["layers"], result["several"], result["parts"]))
        if name == "default" and outer is not base:  # the composite config.json a user has
            cases.append(model_truth.Case(model_type, "composite config", outer.to_dict(), result["positions"],
                                          result["layers"], result["several"], result["parts"]))
        print(f"{model_type:32s} {name:28s} {sum(t is not None for t in result['layers'].values())}/"
              f"{len(result['layers'])} layers rotate", flush=True)
    return cases, None


MROPE_OUT = HERE / "model_mrope_interleaved.npz"


def interleaved_mrope_golden() -> None:
    """Qwen3-VL's text rotary (apply_interleaved_mrope) at [3, n] image-like positions, whose axes
    differ (the per-layer probe only sees text tokens, where all three are equal)."""
    from transformers import Qwen3VLTextConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextRotaryEmbedding

    config = Qwen3VLTextConfig(head_dim=128, hidden_size=256, num_attention_heads=2, num_hidden_layers=2)
    positions = torch.tensor([[[0, 5, 9, 40, 4000]], [[0, 3, 7, 11, 17]], [[0, 1, 2, 30, 2]]])
    cos, sin = Qwen3VLTextRotaryEmbedding(config)(torch.zeros(1, 1, 5, 128), positions)
    half = cos.shape[-1] // 2
    np.savez_compressed(MROPE_OUT, config=np.array(json.dumps(config.to_dict(), default=str)),
                        positions=positions[:, 0].numpy(), cos=cos[0, :, :half].numpy(), sin=sin[0, :, :half].numpy())


UNCHECKED_CONFIGS = HERE / "model_unchecked_configs.json.gz"
#: What a modeling file's source shows of each kind of positions (checked.json's `positions`).
POSITION_PATTERNS = {
    "rotary": re.compile(r"^class \w*Rotary\w*Embedding\w*\b", re.MULTILINE),
    "ALiBi": re.compile(r"alibi", re.IGNORECASE),
    "relative attention bias": re.compile(r"relative_attention_bias"),
    "sinusoidal": re.compile(r"SinusoidalPositionalEmbedding|sinusoidal_position|create_sinusoidal", re.IGNORECASE),
    "learned absolute": re.compile(r"nn\.Embedding\(\s*(?:self\.)?(?:config\.)?max_\w*position|"
                                   r"^class \w*LearnedPositionalEmbedding\(nn\.Embedding\)", re.MULTILINE),
    #: a vision tower's table over its patches (CLIP's num_positions, ViT's parameter): not a language model's
    "learned patch": re.compile(r"nn\.Embedding\(\s*(?:self\.)?num_positions|position_embeddings? = nn\.Parameter"),
    "M-RoPE": re.compile(r"def get_rope_index\b"),  # a wrapper computing 3-D position ids
}


def known_model_types() -> tuple[dict[str, dict], dict[str, dict]]:
    """Every model type the installed transformers knows, without building a model: ({type: facts},
    {type: default config dict}). The facts are what checked.json keeps of transformers itself
    (model_truth judges the rest from the goldens): the kinds of positions its modeling code has
    (`POSITION_PATTERNS`), the inputs of its model class when they are not text (an image or audio
    encoder's rotary runs over patches or frames), whether its config nests a language config,
    why its config class cannot be built with its defaults, and what that class fills in for the
    keys posenc reads (`config`: config_facts.class_facts)."""
    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    models = Path(transformers.__file__).parent / "models"
    defined = {}  # class name -> the modeling file defining it (the one transformers runs a type with)
    for path in sorted(models.glob("*/modeling_*.py")):
        for name in re.findall(r"^class (\w+)\(", path.read_text(), re.MULTILINE):
            defined.setdefault(name, path)
    facts, defaults = {}, {}
    for model_type in sorted(CONFIG_MAPPING_NAMES):
        fact = {}
        try:
            config = AutoConfig.for_model(model_type)
            defaults[model_type] = json.loads(json.dumps(config.to_dict(), default=str))
            if any(isinstance(defaults[model_type].get(key), dict) for key in NESTED):
                fact["nests"] = True
            fact["config"] = config_facts.class_facts(model_type)
        except Exception as exc:  # a config class whose defaults do not validate
            fact["config_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
        source_path = _modeling_path(model_type, defined)
        source = source_path.read_text() if source_path else ""
        fact["positions"] = [kind for kind, pattern in POSITION_PATTERNS.items() if pattern.search(source)]
        inputs = _input_modalities(model_type, source_path) if fact["positions"] else None
        if inputs and "text" not in inputs:
            fact["inputs"] = inputs
        facts[model_type] = fact
    return facts, defaults


def _modeling_path(model_type: str, defined: dict) -> Path | None:
    """The modeling file of the model class transformers builds for this type (exaone runs
    LlamaModel), else the one beside its configuration file."""
    names = MODEL_MAPPING_NAMES.get(model_type)
    for name in (names,) if isinstance(names, str) else names or ():
        if name in defined:
            return defined[name]
    config_file = Path(inspect.getfile(transformers.CONFIG_MAPPING[model_type]))
    modeling = config_file.with_name(config_file.name.replace("configuration_", "modeling_"))
    return modeling if modeling.exists() else None


def _input_modalities(model_type: str, source_path: Path | None) -> list[str] | None:
    """`input_modalities` of the model classes for this type's config class (importing the modeling
    module builds nothing): e.g. ["image", "video"] for a vision tower."""
    if source_path is None:
        return None
    try:
        module = importlib.import_module(f"transformers.models.{source_path.parent.name}.{source_path.stem}")
    except Exception:  # an optional dependency of that modeling file is missing
        return None
    config_class = transformers.CONFIG_MAPPING[model_type]
    found = set()
    for cls in vars(module).values():
        if isinstance(cls, type) and issubclass(cls, nn.Module) and getattr(cls, "config_class", None) is config_class:
            modalities = getattr(cls, "input_modalities", None)
            found.update([modalities] if isinstance(modalities, str) else modalities or ())
    return sorted(found) or None


def write_checked() -> None:
    """service/posenc/models/checked.json (which model types a golden checked: from_hf_config's
    gate) and model_unchecked_configs.json.gz (the default configs of the others, which the tests
    check it refuses), from the goldens as they are and transformers' config classes: no model is
    built, so `--table` refreshes them after a merge of new goldens."""
    facts, defaults = known_model_types()
    architectures = config_facts.architectures()
    record = model_truth.coverage_record(facts, nonrotary=nonrotary_exact(facts, architectures),
                                         architectures=architectures)
    _write_record(record)  # the gate as these goldens set it: every judged model type passes it
    model_truth.verdicts.cache_clear()
    record = model_truth.with_verdicts(record)  # judged under that gate, not the one checked.json had
    _write_record(record)  # the same gate, with the verdicts
    # a config that saves another model_type ("gpt-sw3" saves "gpt2") is gated as that one
    unchecked = {t: defaults[t] for t in model_truth.refused_by_gate(record) if defaults.get(t, {}).get("model_type") == t}
    UNCHECKED_CONFIGS.write_bytes(gzip.compress(json.dumps(unchecked, sort_keys=True).encode(), mtime=0))


def nonrotary_exact(facts: dict, architectures: dict) -> set[str]:
    """The model types model_truth_nonrotary.npz checks exactly, judged with a gate that lets every
    model type of its configs through (posenc's own answer, not the gate's refusal, is judged);
    the others stay unchecked (refused by the gate)."""
    import model_truth_nonrotary

    _write_record(model_truth.coverage_record(facts, nonrotary=model_truth_nonrotary.chain_types(),
                                              architectures=architectures))
    model_truth_nonrotary.verdicts.cache_clear()
    exact = model_truth_nonrotary.exact_types()
    model_truth_nonrotary.verdicts.cache_clear()  # judged again under the gate written with these
    return exact


def _write_record(record: dict) -> None:
    """checked.json, and posenc's gate reading it anew."""
    from posenc.models import checked

    lines = [f" {json.dumps(t)}: {json.dumps(e, sort_keys=True)}" for t, e in sorted(record["model_types"].items())]
    classes = [f" {json.dumps(c)}: {json.dumps(t)}" for c, t in sorted(record["architectures"].items())]
    model_truth.CHECKED.write_text(f'{{"transformers": {json.dumps(record["transformers"])}, "architectures": {{\n'
                                   + ",\n".join(classes) + '\n}, "model_types": {\n' + ",\n".join(lines) + "\n}}\n")
    checked.record.cache_clear()


def _timeout(signum, frame):
    raise TimeoutError(f"a case ran over {CASE_TIMEOUT_S} s")


def collect(cases_of, types: list[str], only: list[str] | None, path: Path, load) -> tuple[list, dict]:
    """(cases, {model type: why it was not built}) of `only` (else every one of `types`), each model
    type's `cases_of` run in a pool of WORKERS spawned processes (this generator's and
    generate_nonrotary's); with `only`, the other types' kept from the golden at `path` (`load`)."""
    todo = only or types
    with multiprocessing.get_context("spawn").Pool(WORKERS) as pool:  # no retiring: torch can hang at exit
        jobs = [pool.apply_async(cases_of, (t,)) for t in todo]
        results = [_result_of(job, t) for job, t in zip(jobs, todo)]
    cases = [case for found, _ in results for case in found]
    failures = {t: why for t, (_, why) in zip(todo, results) if why}
    if only and path.exists():
        meta, kept = load(path)
        cases = [c for c in kept if c.model_type not in only] + cases
        failures = {**{t: why for t, why in meta["failures"].items() if t not in only}, **failures}
    return cases, failures


def _result_of(job, model_type: str) -> tuple[list, str | None]:
    """A model type's cases, or why there are none when its worker never answered (a worker that
    dies, e.g. in native code, loses its task: Pool.map would wait for it forever)."""
    try:
        return job.get(timeout=TYPE_TIMEOUT_S)
    except multiprocessing.TimeoutError:
        print(f"{model_type:32s} no result in {TYPE_TIMEOUT_S} s", flush=True)
        return [], f"no result in {TYPE_TIMEOUT_S} s: its worker hung or died"


def main(only: list[str] | None = None):
    """Every rotary model type; with `only` (model types on the command line), those are redone
    and the others kept from the existing goldens."""
    types = rotary_model_types() + positionless_model_types()
    cases, failures = collect(cases_of, types, only, OUT, model_truth.load)
    model_truth.load.cache_clear()  # the table below must read what is saved here
    model_truth.verdicts.cache_clear()
    model_truth.save(OUT, cases, failures, versions={"torch": torch.__version__,
                                                      "transformers": transformers.__version__},
                     enumerated=types)
    write_checked()
    DOCS.write_text(model_truth.table_markdown(OUT))
    interleaved_mrope_golden()
    print("wrote", OUT, "and", DOCS)


if __name__ == "__main__":
    if "--table" in sys.argv:  # posenc changed, the goldens did not: the model table and checked.json
        write_checked()
        DOCS.write_text(model_truth.table_markdown(OUT))
    else:
        main([a for a in sys.argv[1:] if not a.startswith("-")] or None)
