"""Non-rotary positional truth recorded from transformers (tests/golden/generate_nonrotary.py)
and the judge comparing `posenc.from_hf_config` with it. numpy only, like model_truth (the
rotary judge): the tests and the model table share it.

A case's truth is a list of items, what the tiny model's forward did with positions at the
probe tokens 0..15 (see the generator): `lookup` (a position table's name, shape, whether the
checkpoint saves it, the indices read, and for a frozen table its rows), `module` (a positional
module's output rows) and `bias` (the ALiBi bias a layer received, last query row per head).
The judge asks of posenc's answer, per stack (encoder, decoder, or the one stack):

* learned: the table it names is the one the model reads (the recorded weight name is a suffix
  of `LearnedSpec.tensor`), of the recorded shape (offset + num_positions rows, dim columns),
  read at rows position + offset;
* sinusoidal: its rows at the probe positions are the recorded ones;
* T5 buckets: the recorded bucket of every (query, key) pair of every bias table, the tables
  read (T5: layer 0's, UMT5: every layer's) and the layers the bias reaches (all of the stack);
* ALiBi: each layer's bias grows by slope_h per key position, posenc's slopes;

and that every absolute position module the model has is posenc's one entry for its stack (a
second table, e.g. LayoutLM's 2-D box positions, makes an answer wrong). Anything else posenc
answers (a RoPE, an entry for a stack without positions) is wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
from model_truth import read_golden, write_golden

GOLDEN = Path(__file__).parent / "golden" / "model_truth_nonrotary.npz"
ARRAYS = ("indices", "rows")
#: float32 sinusoids of positions < 16: angles exact to ~2e-6
TOLERANCE = 1e-5


@dataclass
class Case:
    model_type: str
    variation: str
    config: dict
    positions: list
    items: list  # dicts, arrays under "indices" / "rows"
    layers: list = field(default_factory=list)  # the text layers' module paths


def save(path: Path, cases: list[Case], failures: dict, *, versions: dict, enumerated: list[str]) -> None:
    arrays, meta_cases = {}, []
    for c, case in enumerate(cases):
        items = []
        for i, item in enumerate(case.items):
            plain = {k: v for k, v in item.items() if k not in ARRAYS}
            for key in ARRAYS:
                if key in item:
                    value = np.asarray(item[key])
                    arrays[f"{c}|{i}|{key}"] = value.astype(np.int16 if key == "indices" else np.float32)
                    plain[key] = True
            items.append(plain)
        meta_cases.append({"model_type": case.model_type, "variation": case.variation, "config": case.config,
                           "positions": case.positions, "items": items, "layers": case.layers})
    write_golden(path, meta_cases, arrays, versions=versions, enumerated=enumerated, failures=failures)


@lru_cache(maxsize=2)
def load(path: Path = GOLDEN) -> tuple[dict, list[Case]]:
    meta, arrays = read_golden(path)
    cases = []
    for c, raw in enumerate(meta["cases"]):
        items = [{**item, **{key: arrays[f"{c}|{i}|{key}"] for key in ARRAYS if item.get(key)}}
                 for i, item in enumerate(raw["items"])]
        cases.append(Case(raw["model_type"], raw["variation"], raw["config"], raw["positions"], items,
                          raw.get("layers", [])))
    return meta, cases


# --- the judge -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Verdict:
    status: str  # "exact" | "refused" | "wrong"
    detail: str = ""
    field: str = ""  # a refusal's PosencError.field


def stack_of(name: str) -> str:
    """"encoder" / "decoder" from a module or weight path, else "default" (the one stack)."""
    parts = re.split(r"[._]", name.lower())
    for stack in ("decoder", "encoder"):
        if stack in parts:
            return stack
    return "default"


def is_relative(item: dict) -> bool:
    return item["kind"] == "lookup" and "relative_attention_bias" in item["name"]


def absolute_items(case: Case) -> dict[str, list[dict]]:
    """{stack: the absolute position items}: lookups into position tables (not relative bias ones) and
    positional modules' outputs; a module whose lookup is recorded is the same table, counted once."""
    out: dict[str, list[dict]] = {}
    lookups = [i for i in case.items if i["kind"] == "lookup" and not is_relative(i)]
    for item in lookups:
        out.setdefault(stack_of(item["name"]), []).append(item)
    for item in case.items:
        if item["kind"] == "module" and not any(l["name"].startswith(item["name"] + ".") for l in lookups):
            out.setdefault(stack_of(item["name"]), []).append(item)
    return out


def judge(case: Case) -> Verdict:
    """posenc.from_hf_config(case.config) against the recorded items."""
    import posenc

    try:
        model = posenc.from_hf_config(case.config)
    except posenc.PosencError as exc:
        return Verdict("refused", f"{exc.field}: {exc.message}", exc.field)
    try:
        error = _compare(case, model)
    except Exception as exc:  # a judge that cannot compare is a wrong answer, never a pass
        error = f"cannot compare: {type(exc).__name__}: {exc}"
    return Verdict("wrong", error) if error else Verdict("exact")


def _entry_stack(layer_type: str, stacks: set[str]) -> str:
    if layer_type in ("encoder", "decoder"):
        return layer_type
    return "default" if "default" in stacks or len(stacks) != 1 else next(iter(stacks))


def _compare(case: Case, model) -> str:
    absolute = absolute_items(case)
    relative = [i for i in case.items if is_relative(i)]
    biases = [i for i in case.items if i["kind"] == "bias"]
    pos = np.asarray(case.positions)
    matched: set[str] = set()
    for name, entry in model.encodings.items():
        kind = entry.spec.KIND
        if kind in ("learned", "sinusoidal"):
            stack = _entry_stack(name, set(absolute))
            items = absolute.get(stack, [])
            if len(items) != 1:
                return (f"posenc gives {name} one {kind} table; the model's {stack} stack has {len(items)} absolute "
                        f"position modules {[i['name'] for i in items]}")
            matched.add(stack)
            error = (_learned if kind == "learned" else _sinusoidal)(items[0], entry.spec, pos)
        elif kind == "t5":
            error = _buckets(entry, relative, pos) or _bias_layers(case, model, entry, relative)
        elif kind == "alibi":
            error = _alibi(entry, biases)
        else:
            error = f"posenc gives {name} {kind}; the model applies no such positions"
        if error:
            return f"{name}: {error}"
    missed = sorted(set(absolute) - matched)
    if missed:
        return f"the model adds absolute positions in stack(s) {missed} ({absolute[missed[0]][0]['name']}); posenc none"
    if relative and not model.of_kind("t5"):
        return f"the model applies a relative attention bias ({relative[0]['name']}); posenc none"
    if biases and not model.of_kind("alibi"):
        return f"the model applies an attention bias ({biases[0]['name']}); posenc no ALiBi"
    return ""


def _suffix(name: str, tensor: str | None) -> bool:
    return tensor is not None and (tensor == name or tensor.endswith("." + name))


def _learned(item: dict, spec, pos: np.ndarray) -> str:
    if item["kind"] != "lookup":
        return f"the model computes its positions ({item['class']} {item['name']}); posenc says a learned table"
    if not item["saved"]:
        return f"{item['name']} is not in the checkpoint; posenc says its values come from there"
    if not _suffix(item["name"], spec.tensor):
        return f"posenc names tensor {spec.tensor!r}; the model reads {item['name']!r}"
    if list(item["shape"]) != [spec.rows, spec.dim]:
        return f"{item['name']} is {item['shape']}; posenc says [{spec.rows}, {spec.dim}] (offset {spec.offset})"
    indices = np.asarray(item["indices"]).reshape(-1)[: len(pos)]  # Longformer pads to its window: the tokens first
    if indices.shape != pos.shape or np.any(indices != pos + spec.offset):
        return f"positions {pos.tolist()} read rows {indices.tolist()}; posenc says + {spec.offset}"
    return ""


def _sinusoidal(item: dict, spec, pos: np.ndarray) -> str:
    import posenc

    if "rows" not in item:
        return f"{item['name']}: no rows recorded; posenc says sinusoids"
    rows = np.asarray(item["rows"], dtype=np.float64)
    rows = rows.reshape(-1, rows.shape[-1])[: len(pos)]
    fields = {k: v for k, v in spec.to_dict().items() if k not in ("kind", "dim")}
    ours = posenc.sinusoidal(pos, spec.dim, dtype="float64", **fields)
    if ours.shape != rows.shape:
        return f"{item['name']} gives rows {rows.shape}; posenc {ours.shape}"
    diff = np.abs(ours - rows)
    if diff.max() > TOLERANCE * max(1.0, float(np.abs(rows).max())):
        p, j = np.unravel_index(diff.argmax(), diff.shape)
        return (f"{item['name']} position {pos[p]} column {j}: transformers {rows[p, j]:.7g}, posenc "
                f"{ours[p, j]:.7g}")
    return ""


def _buckets(entry, relative: list[dict], pos: np.ndarray) -> str:
    import posenc

    mine = [i for i in relative if stack_of(i["name"]) == _entry_stack(entry.layer_type, {"encoder", "decoder"})]
    if entry.layer_type not in ("encoder", "decoder"):
        mine = relative
    if not mine:
        return "posenc gives a T5 bias; the model's stack applies none"
    rel = pos[None, :] - pos[:, None]  # key - query
    ours = posenc.t5_relative_position_bucket(rel, entry.spec)
    for item in mine:
        want = np.asarray(item["indices"])
        if want.shape != ours.shape or np.any(want != ours):
            q, k = np.argwhere(want != ours)[0] if want.shape == ours.shape else (0, 0)
            return (f"{item['name']}: bucket of query {q}, key {k}: transformers {want[q, k] if want.ndim == 2 else '?'}"
                    f", posenc {ours[q, k]}")
    return ""


def _bias_layers(case: Case, model, entry, relative: list[dict]) -> str:
    """A relative bias reaches every layer of its stack, and its tables are the ones the model
    reads: the T5 reader's `bias_tensors` (layer 0's, or every layer's for UMT5), else the tensors
    the entry's notes name."""
    stack = entry.layer_type if entry.layer_type in ("encoder", "decoder") else None
    layers = [p for p in case.layers if stack is None or stack_of(p) == stack]
    if layers and tuple(entry.layers) != tuple(range(len(layers))):
        return f"the bias reaches the {len(layers)} layers of {stack or 'the model'}; posenc says {list(entry.layers)}"
    read = {i["name"] for i in relative if stack is None or stack_of(i["name"]) == stack}
    if model.reader == "t5":
        from posenc.models.t5 import bias_tensors

        claimed = set(bias_tensors(model.model_type, stack, len(entry.layers)))
    else:
        claimed = {n for note in entry.notes for n in re.findall(r"[\w.]*relative_attention_bias\.weight", note)}
    if read != claimed:
        return f"the model reads bias tables {sorted(read)}; posenc names {sorted(claimed)}"
    return ""


def _alibi(entry, biases: list[dict]) -> str:
    slopes = np.asarray(entry.spec.slopes, dtype=np.float64)
    layers = {int(b["name"].rsplit(".", 1)[1]): b for b in biases}
    if sorted(layers) != sorted(entry.layers):
        return f"ALiBi in layers {sorted(layers)}; posenc says {list(entry.layers)}"
    for i, item in layers.items():
        rows = np.asarray(item["rows"], dtype=np.float64)
        steps = rows - rows[:, :1]
        ours = slopes[:, None] * np.arange(rows.shape[1])[None, :]
        if steps.shape != ours.shape or np.abs(steps - ours).max() > TOLERANCE * max(1.0, np.abs(ours).max()):
            return f"layer {i}: bias per key position differs from slope * key (max {np.abs(steps - ours).max():.3g})"
    return ""


@lru_cache(maxsize=2)
def verdicts(path: Path = GOLDEN) -> list[tuple[Case, Verdict]]:
    return [(case, judge(case)) for case in load(path)[1]]


def has_positions(case: Case) -> bool:
    """Whether the built model did anything positional with the text tokens (a judged case)."""
    return bool(case.items)


def judged_defaults(path: Path = GOLDEN) -> dict[str, Verdict]:
    return {c.model_type: v for c, v in verdicts(path) if c.variation == "default" and has_positions(c)}


def counts(path: Path = GOLDEN) -> dict:
    meta, _ = load(path)
    judged = judged_defaults(path)
    defaults = {c.model_type for c, _ in verdicts(path) if c.variation == "default"}
    return {"enumerated": len(meta["enumerated"]), "built": len(defaults), "judged": len(judged),
            **{s: sum(v.status == s for v in judged.values()) for s in ("exact", "refused", "wrong")}}


def item_summary(case: Case) -> str:
    """'lookup embeddings.position_embeddings.weight [4096, 64] rows 0..15 +0; bias h.0..h.7'."""
    parts, biases = [], [i["name"] for i in case.items if i["kind"] == "bias"]
    for item in case.items:
        if item["kind"] == "lookup":
            idx = np.asarray(item["indices"])
            what = (f"buckets {idx.shape[0]}x{idx.shape[1]}" if idx.ndim == 2 else
                    f"rows {idx.reshape(-1)[0]}..{idx.reshape(-1)[-1]}")
            parts.append(f"`{item['name']}` {item['shape']} {what}{'' if item['trainable'] else ' (frozen)'}")
        elif item["kind"] == "module":
            parts.append(f"{item['class']} `{item['name']}`")
    if biases:
        parts.append(f"bias into {len(biases)} layers")
    return "; ".join(parts) or "none"


def table_lines(path: Path = GOLDEN) -> list[str]:
    """The non-rotary section of docs/models.md."""
    meta, _ = load(path)
    results = verdicts(path)
    c = counts(path)
    by_type: dict[str, list] = {}
    for case, verdict in results:
        by_type.setdefault(case.model_type, []).append((case, verdict))
    lines = [
        "## Non-rotary model types",
        "",
        "Generated from tests/golden/model_truth_nonrotary.npz (`python tests/golden/generate_nonrotary.py` builds "
        "the models, then `python tests/golden/generate_models.py --table` rewrites this table and checked.json; "
        "transformers " f"{meta['versions']['transformers']}); checked by tests/test_models_nonrotary_truth.py. "
        "Each model type whose modeling file has ALiBi, a relative attention bias, sinusoidal or learned absolute "
        "positions and no rotary one (image / audio encoders left out) is built tiny from its text config's "
        "defaults, run on 16 tokens, and the position tables it reads (which rows), the sinusoids it adds, the "
        "buckets and ALiBi biases it applies are recorded; posenc's answer must reproduce them or refuse.",
        "",
        f"* enumerated: {c['enumerated']}; built: {c['built']}; judged (positions seen): {c['judged']}",
        f"* judged default configs: **{c['exact']} exact, {c['refused']} refused naming the mechanism, "
        f"{c['wrong']} silently wrong**",
        f"* all {len(results)} configs: " + ", ".join(
            f"{sum(v.status == s for _, v in results)} {s}" for s in ("exact", "refused", "wrong")),
        "",
        "| model type | default config | variations exact | positions recorded |",
        "|---|---|---|---|",
    ]
    for model_type in sorted(by_type):
        rows = by_type[model_type]
        case, verdict = next((c, v) for c, v in rows if c.variation == "default")
        text = verdict.status if verdict.status == "exact" else f"{verdict.status}: {verdict.detail}"
        exact = sum(v.status == "exact" for c, v in rows if c.variation != "default")
        lines.append(f"| `{model_type}` | {text.replace('|', '/')} | {exact}/{len(rows) - 1} | "
                     f"{item_summary(case).replace('|', '/')} |")
    if meta["failures"]:
        lines += ["", "### Not built by the non-rotary generator", "", "| model type | why |", "|---|---|"]
        lines += [f"| `{t}` | {why.replace('|', '/')} |" for t, why in sorted(meta["failures"].items())]
    return lines


# --- the gate: which model types this golden checks (checked.json's golden "nonrotary") --------

def chain_types(path: Path = GOLDEN) -> set[str]:
    """Every model type a config of this golden dispatches on (its own, its nested language config's)."""
    from model_truth import config_chain

    return {t for case in load(path)[1] for t in config_chain(case.config)}


def exact_types(path: Path = GOLDEN) -> set[str]:
    """The model types a default (or composite default) config of this golden dispatches on and
    posenc answers exactly: with checked.json as written (generate_models.write_checked first
    lets every `chain_types` through the gate, then keeps these)."""
    from model_truth import config_chain

    return {t for case, verdict in verdicts(path) if case.variation in ("default", "composite config")
            and verdict.status == "exact" and has_positions(case) for t in config_chain(case.config)}
