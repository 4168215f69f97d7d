"""Positional truth for every NON-rotary text model type of the installed transformers.

    PYTHONPATH=service python tests/golden/generate_nonrotary.py   # needs torch + transformers (~5 min, 2 workers)
    PYTHONPATH=service python tests/golden/generate_nonrotary.py bert opt   # redo these model types only
    PYTHONPATH=service python tests/golden/generate_models.py --table   # then: checked.json, docs/models.md

The model types are those whose modeling file has ALiBi, a T5-style relative attention bias,
sinusoidal or learned absolute positions (`generate_models.POSITION_PATTERNS`, the facts
checked.json keeps) and no rotary embedding, less the image / audio / video encoders (their
positions index patches or frames: they stay refused) and the composites whose language model
is a rotary model type (an audio LM's: generate_models judges that). For each, the language config (a
composite's text_config) is built from the config class's defaults, shrunk as generate_models
shrinks the rotary ones, and run once on 16 tokens without position_ids (what a user's forward
does), with hooks recording what positions actually do:

* every table lookup (`torch.nn.functional.embedding`) into a weight whose name says positions
  (pos, wpe, relative): the weight's name, shape, whether the checkpoint saves it, and the
  indices read: a learned absolute table's rows for the 16 tokens (offsets such as OPT's +2 or
  RoBERTa's pad_token_id + 1 show there), a T5 relative bias table's bucket per (query, key);
* the output rows of every module whose class is a positional one (`*Sinusoidal*`,
  `*Positional*`) and of absolute table lookups: a sinusoidal table's values (DistilBERT's
  `sinusoidal_pos_embds` initialises a saved table with them);
* the ALiBi bias each layer receives (`alibi` / `position_bias` keyword), last query row per head;
* the paths of the text layers (`generate_models._layer_paths`): which layers a bias must reach.

A variation with another pad_token_id shows whether an offset follows it (RoBERTa) or is fixed
(OPT, BART). tests/model_truth_nonrotary.py judges posenc.from_hf_config on the same configs
(numpy only); written to model_truth_nonrotary.npz.
"""

from __future__ import annotations

import copy
import re
import sys
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
import transformers
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM
from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import generate_models as gm  # noqa: E402
import model_truth_nonrotary as truth  # noqa: E402

OUT = truth.GOLDEN
LENGTH = 16  # tokens: positions 0..15
NON_ROTARY = ("ALiBi", "relative attention bias", "sinusoidal", "learned absolute")
#: weight names of position tables (not word / token-type tables)
POSITION_WEIGHT = re.compile(r"pos|wpe|relative|rel_emb", re.IGNORECASE)
POSITION_CLASS = re.compile(r"Sinusoid|Positional", re.IGNORECASE)
#: towers whose positions index patches or frames, not the text tokens
NOT_TEXT = re.compile(r"vision|visual|image|audio|patch|speech", re.IGNORECASE)
BIAS_KWARGS = ("alibi", "position_bias")
#: Encoder-decoder sizes generate_models.shrink leaves (it shrinks decoder-only stacks): tiny too.
STACK_SIZES = {"encoder_attention_heads": 4, "decoder_attention_heads": 4, "encoder_ffn_dim": 64,
               "decoder_ffn_dim": 64, "encoder_layers": 2, "decoder_layers": 2}


def non_rotary_model_types() -> list[str]:
    """Model types whose modeling file has a non-rotary position module, no rotary one, and
    text among its inputs (checked.json's `positions` / `inputs` facts, read the same way)."""
    warnings.filterwarnings("ignore")
    models = Path(transformers.__file__).parent / "models"
    defined = {}
    for path in sorted(models.glob("*/modeling_*.py")):
        for name in re.findall(r"^class (\w+)\(", path.read_text(), re.MULTILINE):
            defined.setdefault(name, path)
    out, rotary = [], set(gm.rotary_model_types())
    for model_type in sorted(CONFIG_MAPPING_NAMES):
        path = gm._modeling_path(model_type, defined)
        source = path.read_text() if path else ""
        kinds = [k for k, pattern in gm.POSITION_PATTERNS.items() if pattern.search(source)]
        if "rotary" in kinds or not set(kinds) & set(NON_ROTARY):
            continue
        inputs = gm._input_modalities(model_type, path)
        if inputs and "text" not in inputs or _rotary_language_model(model_type, rotary):
            continue
        out.append(model_type)
    return out


def _rotary_language_model(model_type: str, rotary: set[str]) -> bool:
    """A composite (an audio LM: Qwen2-Audio, Voxtral) whose non-rotary positions are its audio
    tower's and whose language config is a rotary model type: generate_models' to judge."""
    try:
        outer = AutoConfig.for_model(model_type)
    except Exception:
        return False
    inner = gm.language_config(outer)
    return inner is not outer and inner.model_type in rotary


class Recorder:
    """The hooks: table lookups, positional modules' outputs, the ALiBi each layer receives."""

    def __init__(self, model: nn.Module):
        self.names = {id(p): n for n, p in model.named_parameters()}
        self.names.update({id(b): n for n, b in model.named_buffers()})
        self.saved = set(model.state_dict())
        self.items: list[dict] = []
        self.seen: set[str] = set()
        self._handles = []
        self._embedding = F.embedding
        F.embedding = self._lookup
        for path, module in model.named_modules():
            if POSITION_CLASS.search(type(module).__name__) and not NOT_TEXT.search(path):
                self._handles.append(module.register_forward_hook(self._module(path)))
        for path in gm._layer_paths(model):
            if not NOT_TEXT.search(path):
                self._handles.append(model.get_submodule(path).register_forward_pre_hook(self._layer(path),
                                                                                         with_kwargs=True))

    def close(self):
        F.embedding = self._embedding
        for handle in self._handles:
            handle.remove()

    def _lookup(self, input, weight, *args, **kwargs):
        out = self._embedding(input, weight, *args, **kwargs)
        name = self.names.get(id(weight), "")
        if name and POSITION_WEIGHT.search(name) and not NOT_TEXT.search(name) and name not in self.seen:
            self.seen.add(name)
            item = {"kind": "lookup", "name": name, "shape": list(weight.shape), "saved": name in self.saved,
                    "trainable": bool(weight.requires_grad), "indices": _first(input).to(torch.int64).numpy()}
            if _first(input).dim() == 1:  # an absolute table: its rows too (a sinusoidal init shows there)
                item["rows"] = _first(out).detach().to(torch.float32).numpy()
            self.items.append(item)
        return out

    def _module(self, path):
        def hook(module, args, output):
            if path in self.seen or not isinstance(output, torch.Tensor) or not output.is_floating_point():
                return
            self.seen.add(path)
            self.items.append({"kind": "module", "name": path, "class": type(module).__name__,
                               "rows": _first(output).detach().to(torch.float32).numpy()})
        return hook

    def _layer(self, path):
        def hook(module, args, kwargs):
            for key in BIAS_KWARGS:
                bias = kwargs.get(key)
                if isinstance(bias, torch.Tensor) and bias.dim() >= 2 and bias.is_floating_point():
                    last = bias.reshape(-1, bias.shape[-2] if bias.dim() > 2 else 1, bias.shape[-1])[:, -1]
                    self.items.append({"kind": "bias", "name": path, "keyword": key,
                                       "rows": last.detach().to(torch.float32).numpy()})
                    return
        return hook


def _first(t: torch.Tensor) -> torch.Tensor:
    """The first batch element of [batch, ...] (a 1-D or 2-D index block stays whole)."""
    return t[0] if t.dim() >= 2 and t.shape[0] == 1 else t


def token_ids(config) -> torch.Tensor:
    """16 ordinary tokens: none is a special token (pad, bos, eos...) of the config."""
    special = {v for k, v in config.to_dict().items() if k.endswith("token_id") and isinstance(v, int)}
    vocab = getattr(config, "vocab_size", None) or 128
    pool = [i for i in range(5, max(vocab, 40)) if i not in special]
    return torch.tensor([pool[:LENGTH]])


def build(config) -> nn.Module:
    """generate_models.build, else the causal LM a decoder-only config has instead of a base model
    (TrOCR's); X-MOD with its first language's adapters selected (it refuses a forward without)."""
    try:
        model = gm.build(config)
    except ValueError:
        model = AutoModelForCausalLM.from_config(config)
    languages = getattr(config, "languages", None)
    if hasattr(model, "set_default_language") and languages:
        model.set_default_language(languages[0])
    return model


def run_case(config) -> tuple[list[dict], list[str]]:
    """(the recorded items, the text layers' paths)."""
    torch.manual_seed(0)
    model = build(config)
    model.eval()
    ids = token_ids(config)
    recorder = Recorder(model)
    try:
        extra = {"decoder_input_ids": ids} if getattr(model.config, "is_encoder_decoder", False) else {}
        with torch.no_grad():
            try:
                model(input_ids=ids, use_cache=False, **extra)
            except TypeError:
                model(input_ids=ids, **extra)
    finally:
        recorder.close()
    return _kept(recorder.items), [p for p in gm._layer_paths(model) if not NOT_TEXT.search(p)]


def _kept(items: list[dict]) -> list[dict]:
    """The items, less a positional module's output rows where its table lookup is recorded (the
    lookup's rows are those); an ALiBi bias over its first LENGTH keys (MPT builds it over
    max_seq_len)."""
    trained = [i["name"] for i in items if i["kind"] == "lookup"]
    out = []
    for item in items:
        if item["kind"] == "module" and any(name.startswith(item["name"] + ".") for name in trained):
            item = {k: v for k, v in item.items() if k != "rows"}
        if item["kind"] == "bias":
            item = {**item, "rows": item["rows"][:, :LENGTH]}
        out.append(item)
    return out


#: Config switches that turn a table off or to another mechanism (TAPAS's per-cell positions,
#: DeBERTa's relative attention, XLM's, DistilBERT's and TrOCR's sinusoids): each flipped is a variation.
SWITCHES = {"reset_position_index_per_cell": False, "relative_attention": True, "position_biased_input": False,
            "sinusoidal_embeddings": True, "sinusoidal_pos_embds": True, "use_learned_position_embeddings": False}


def variations(base) -> list[tuple[str, object]]:
    """The default config, another pad_token_id (an offset that follows it, or not), an
    embedding width unlike hidden_size (ALBERT's, ELECTRA's: a table's width says which it is),
    and each of `SWITCHES` the config has, flipped."""
    out = [("default", base)]
    for key, value in SWITCHES.items():
        if key in base.to_dict() and getattr(base, key) != value:
            config = copy.deepcopy(base)
            setattr(config, key, value)
            out.append((f"{key}={value}", config))
    if isinstance(getattr(base, "embedding_size", None), int):
        config = copy.deepcopy(base)
        config.embedding_size = 32
        out.append(("embedding_size=32", config))
    pad = getattr(base, "pad_token_id", None)
    if "pad_token_id" in base.to_dict():
        config = copy.deepcopy(base)
        config.pad_token_id = (pad + 2) if isinstance(pad, int) else 3
        out.append((f"pad_token_id={config.pad_token_id}", config))
    return out


def cases_of(model_type: str) -> tuple[list, str | None]:
    return gm.guarded(_cases_of, model_type)


def _cases_of(model_type: str) -> tuple[list, str | None]:
    try:
        outer, base = gm.tiny_configs(model_type)
        for key, value in STACK_SIZES.items():
            if isinstance(getattr(base, key, None), int):
                setattr(base, key, value)
    except Exception as exc:
        return [], f"config: {type(exc).__name__}: {exc}"[:300]
    cases = []
    for name, config, (items, layers) in gm.ran(variations(base), run_case):
        cases.append(truth.Case(model_type, name, config.to_dict(), list(range(LENGTH)), items, layers))
        if name == "default" and outer is not base:
            cases.append(truth.Case(model_type, "composite config", outer.to_dict(), list(range(LENGTH)), items,
                                    layers))
        print(f"{model_type:32s} {name:20s} {len(items)} position items", flush=True)
    return cases, None


def main(only: list[str] | None = None):
    types = non_rotary_model_types()
    cases, failures = gm.collect(cases_of, types, only, OUT, truth.load)
    truth.save(OUT, cases, failures, versions={"torch": torch.__version__, "transformers": transformers.__version__},
               enumerated=types)
    print("wrote", OUT, f"({OUT.stat().st_size} bytes): {len(cases)} cases, {len(failures)} not built")


if __name__ == "__main__":
    main([a for a in sys.argv[1:] if not a.startswith("-")] or None)
