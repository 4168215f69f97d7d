"""Per-layer positional truth recorded from transformers (tests/golden/generate_models.py) and
the judge that compares `posenc.from_hf_config` with it, layer by layer. numpy only: the
tests and the generator's model table (docs/models.md) share this one judge.

A layer's truth is the linear map its `apply_rotary_pos_emb` applies to one head vector at
each probe position, stored sparsely: a rotary embedding sends each input dim j into at most
two output dims (itself and its partner, or two others when the apply reorders its output),
so per column j the truth is those rows and their coefficients at each position. Comparing
the scores these maps give (q_p . k_p') compares the cos/sin values, the layout (which dims
pair up), the rotated slice and any scale at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

GOLDEN = Path(__file__).parent / "golden" / "model_truth.npz"
#: A coefficient below this is an exact zero of the reference (float32 products of 0 and 1).
ZERO = 1e-7


@dataclass(frozen=True)
class LayerTruth:
    rows: np.ndarray  # int16 [2, D]: the (at most two) output dims column j lands in, -1 for none
    vals: np.ndarray  # float32 [2, n, D]: its coefficients there at each position

    @classmethod
    def from_matrices(cls, maps: np.ndarray) -> LayerTruth:
        """From [n, D, D] maps (column j = the image of e_j); refuses a map that is not pairwise."""
        n, dim, _ = maps.shape
        rows = np.full((2, dim), -1, dtype=np.int16)
        vals = np.zeros((2, n, dim), dtype=np.float32)
        for j in range(dim):
            hit = [i for i in range(dim) if np.abs(maps[:, i, j]).max() > ZERO]
            if len(hit) > 2:
                raise ValueError(f"dim {j} is mixed into {len(hit)} dims: not a pairwise rotation")
            for k, i in enumerate(sorted(hit, key=lambda i: i != j)):  # its own dim first
                rows[k, j] = i
                vals[k, :, j] = maps[:, i, j]
        return cls(rows, vals)

    def dense(self) -> np.ndarray:
        """The [n, D, D] maps back."""
        n, dim = self.vals.shape[1:]
        maps = np.zeros((n, dim, dim))
        for k in range(2):
            cols = np.flatnonzero(self.rows[k] >= 0)
            maps[:, self.rows[k, cols], cols] = self.vals[k][:, cols]
        return maps

    def key(self) -> bytes:
        return self.rows.tobytes() + self.vals.tobytes()

    @property
    def layout(self) -> str:
        """"half", "interleaved", "permuted" (the output dims reordered, as DeepSeek-V3's
        de-interleaving apply does: scores are what it preserves) or "none", for the table."""
        cols = np.arange(self.rows.shape[1])
        moved = np.flatnonzero(self.rows[1] >= 0)
        if moved.size == 0:
            return "none"
        if np.any(self.rows[0, moved] != cols[moved]):
            return "permuted"
        return "interleaved" if np.all(self.rows[1, moved] == (moved ^ 1)) else "half"


@dataclass
class Case:
    model_type: str
    variation: str
    config: dict  # the config's to_dict(): what a saved config.json holds
    positions: list
    layers: dict  # {layer path: LayerTruth | None}: the first rotation each layer applies
    #: {layer path: layouts}: layers that apply several different rotations (DeepSeek-V3.2's
    #: indexer rotates its own q/k half-split besides the attention's interleaved q/k): posenc
    #: must describe each (`parts`) or refuse
    several: dict = field(default_factory=dict)
    #: {layer path: {part: LayerTruth}}: for such a layer, each distinct rotation by the part of
    #: the layer applying it (its module path under the layer: "self_attn", "self_attn.indexer";
    #: the first is the attention's, `layers[path]`), when each part applies one; posenc answers
    #: it exactly by describing each (a layer type named as the part, "indexer", for the others)
    parts: dict = field(default_factory=dict)


def save(path: Path, cases: list[Case], failures: dict, *, versions: dict, enumerated: list[str]) -> None:
    arrays, meta_cases = {}, []
    for c, case in enumerate(cases):
        unique: dict[bytes, int] = {}
        layers = {}
        for layer, truth in case.layers.items():
            if truth is None:
                layers[layer] = None
                continue
            index = unique.setdefault(truth.key(), len(unique))
            layers[layer] = index
            if f"{c}|{index}|rows" not in arrays:
                arrays[f"{c}|{index}|rows"] = truth.rows
                arrays[f"{c}|{index}|vals"] = truth.vals
        parts = {}
        for layer, named in case.parts.items():
            parts[layer] = {}
            for part, truth in named.items():
                index = unique.setdefault(truth.key(), len(unique))
                parts[layer][part] = index
                if f"{c}|{index}|rows" not in arrays:
                    arrays[f"{c}|{index}|rows"] = truth.rows
                    arrays[f"{c}|{index}|vals"] = truth.vals
        meta_cases.append({"model_type": case.model_type, "variation": case.variation, "config": case.config,
                           "positions": case.positions, "layers": layers,
                           **({"several": case.several} if case.several else {}),
                           **({"parts": parts} if parts else {})})
    write_golden(path, meta_cases, arrays, versions=versions, enumerated=enumerated, failures=failures)


def write_golden(path: Path, meta_cases: list[dict], arrays: dict, *, versions: dict, enumerated: list[str],
                 failures: dict) -> None:
    """A truth golden's file (this one's and model_truth_nonrotary's): the cases' JSON under "meta",
    with the versions, the model types enumerated and why some were not built; their arrays beside."""
    meta = {"versions": versions, "enumerated": enumerated, "failures": failures, "cases": meta_cases}
    np.savez_compressed(path, meta=np.array(json.dumps(meta, sort_keys=True, default=str)), **arrays)


def read_golden(path: Path) -> tuple[dict, dict]:
    """(meta, {name: array}) of a file `write_golden` wrote."""
    with np.load(path, allow_pickle=False) as z:
        return json.loads(str(z["meta"])), {k: z[k] for k in z.files if k != "meta"}


@lru_cache(maxsize=2)
def load(path: Path = GOLDEN) -> tuple[dict, list[Case]]:
    meta, arrays = read_golden(path)
    cases = []
    for c, raw in enumerate(meta["cases"]):
        layers = {layer: None if i is None else LayerTruth(arrays[f"{c}|{i}|rows"], arrays[f"{c}|{i}|vals"])
                  for layer, i in raw["layers"].items()}
        parts = {layer: {part: LayerTruth(arrays[f"{c}|{i}|rows"], arrays[f"{c}|{i}|vals"])
                         for part, i in named.items()} for layer, named in raw.get("parts", {}).items()}
        cases.append(Case(raw["model_type"], raw["variation"], raw["config"], raw["positions"], layers,
                          raw.get("several", {}), parts))
    return meta, cases


# --- the judge -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Verdict:
    status: str  # "exact" | "refused" | "wrong"
    detail: str = ""


def judge(case: Case) -> Verdict:
    """posenc.from_hf_config(case.config) against the recorded layers: exact, refused (a
    PosencError, its message) or wrong (what differs, at which layer)."""
    import posenc

    try:
        model = posenc.from_hf_config(case.config)
    except posenc.PosencError as exc:
        return Verdict("refused", f"{exc.field}: {exc.message}")
    unpaired = [path for path, layouts in case.several.items() if len(case.parts.get(path, {})) != len(layouts)]
    if unpaired:  # a rotation the generator could not probe or tell apart by the part applying it
        path, layouts = unpaired[0], case.several[unpaired[0]]
        return Verdict("wrong", f"{path} applies {len(layouts)} different rotations ({', '.join(layouts)}); "
                                "posenc describes one")
    rotating = sorted({path.rsplit(".", 1)[0] for path, t in case.layers.items() if t is not None}, key=len)
    if len(rotating) <= 1:  # one rotating stack: posenc's layer indices are its layers'
        stack = rotating[0] if rotating else min({p.rsplit(".", 1)[0] for p in case.layers}, key=len)
        return _judge_stack(case, stack, list(model.encodings.values()))
    # several (T5Gemma's encoder and decoder): each is scored against the layer types posenc names
    # for it, "<stack>" or "<stack> <layer type>" ("encoder", "decoder sliding_attention")
    names = {stack: stack_name(stack) for stack in rotating}
    if len(set(names.values())) < len(names):
        return Verdict("wrong", f"answered for a model with rotating layer stacks {rotating} not told apart by name")
    owned = {stack: [e for e in model.encodings.values() if e.layer_type == name or e.layer_type.startswith(name + " ")]
             for stack, name in names.items()}
    stray = [e.layer_type for e in model.encodings.values() if e.layers and not any(e in o for o in owned.values())]
    if stray:
        return Verdict("wrong", f"layer type {stray[0]!r} names none of the rotating stacks {sorted(names.values())}")
    for stack in rotating:
        verdict = _judge_stack(case, stack, owned[stack])
        if verdict.status != "exact":
            return Verdict(verdict.status, f"{names[stack]}: {verdict.detail}")
    return Verdict("exact")


def stack_name(stack: str) -> str:
    """The name posenc gives a layer stack: "encoder" / "decoder" where its path goes through one
    ("encoder.text_model.layers" -> "encoder"), else the module holding its layer list."""
    parts = stack.split(".")
    return next((p for p in parts[:-1] if p in ("encoder", "decoder")), parts[-2] if len(parts) > 1 else parts[-1])


def _judge_stack(case: Case, stack: str, encodings: list) -> Verdict:
    """One layer stack's recorded layers against posenc's entries for it."""
    by_layer: dict[int, list] = {}
    for entry in encodings:
        for i in entry.layers:
            by_layer.setdefault(i, []).append(entry)
    for path, truth in case.layers.items():
        if path.rsplit(".", 1)[0] != stack:
            continue  # a tower without rotary layers (a vision encoder's, a codec's conv stack)
        i = int(path.rsplit(".", 1)[1])
        entries = by_layer.get(i, [])
        if truth is None:
            if entries:
                return Verdict("wrong", f"layer {i} applies no positions; posenc says {entries[0].layer_type} "
                                        f"({entries[0].spec.KIND})")
            continue
        if case.parts.get(path):
            error = compare_parts(case.parts[path], entries, case.positions)
            if error:
                return Verdict("wrong", f"layer {i}: {error}")
            continue
        if len(entries) != 1 or entries[0].spec.KIND != "rope":
            return Verdict("wrong", f"layer {i} applies RoPE; posenc gives it {[e.layer_type for e in entries]}")
        error = compare(truth, entries[0], case.positions)
        if error:
            return Verdict("wrong", f"layer {i} ({entries[0].layer_type}): {error}")
    return Verdict("exact")


def compare_parts(named: dict, entries: list, positions) -> str:
    """'' when posenc describes each rotation of a layer that applies several (`Case.parts`): one
    RoPE entry per part, the part's own layer type named as its module (DeepSeek-V3.2's
    "self_attn.indexer": layer type "indexer"), the one part left (the attention) the entry left."""
    if len(entries) != len(named) or any(e.spec.KIND != "rope" for e in entries):
        return (f"applies {len(named)} rotations ({', '.join(named)}); posenc gives it "
                f"{[e.layer_type for e in entries]}")
    by_type = {e.layer_type: e for e in entries}
    pairs, rest = [], []
    for part, truth in named.items():
        entry = by_type.pop(part.rsplit(".", 1)[-1], None)
        if entry is None:
            rest.append((part, truth))
        else:
            pairs.append((part, truth, entry))
    if len(rest) > 1:
        return f"posenc names no layer type for its parts {[part for part, _ in rest]}"
    pairs += [(part, truth, entry) for (part, truth), entry in zip(rest, by_type.values())]
    for part, truth, entry in pairs:
        error = compare(truth, entry, positions)
        if error:
            return f"{part} ({entry.layer_type}): {error}"
    return ""


def compare(truth: LayerTruth, entry, positions) -> str:
    """'' when posenc's rotation of one head gives the recorded one's scores within float32
    rounding: q_p . k_p' = q^T M_p^T M_p' k for every pair of probe positions, which fixes the
    cos/sin, the pairing and the rotated slice, and ignores only a reordering of the output
    dims applied to q and k alike (DeepSeek-V3's de-interleaving)."""
    import posenc

    spec = entry.spec
    if entry.apply not in ("half", "interleaved"):
        return f"apply {entry.apply!r} for a rotation"
    pos = np.asarray(positions, dtype=np.float64)
    dim, head = truth.vals.shape[2], spec.head_dim
    if dim > head:
        return f"the model rotates {dim}-wide vectors, posenc's head_dim is {head}"
    basis = np.broadcast_to(np.eye(head)[:, None, :], (head, len(pos), head))
    arg = np.stack([pos] * 3) if getattr(spec, "mrope_section", None) else pos
    ours = np.transpose(posenc.rope_apply(basis, arg, spec, layout=entry.apply), (1, 2, 0))  # [n, out, j]
    if dim < head and (np.abs(ours[:, dim:, :dim]).max() > ZERO or np.abs(ours[:, :dim, dim:]).max() > ZERO):
        return f"posenc rotates dims beyond the {dim} the model's apply function sees"
    ours = ours[:, :dim, :dim]
    want = truth.dense()
    gram_ours = np.einsum("pij,qik->pqjk", ours, ours)
    gram_want = np.einsum("pij,qik->pqjk", want, want)
    scale = max(1.0, float(np.abs(want).max())) ** 2
    tol = ((np.abs(pos)[:, None] + np.abs(pos)[None, :]) * 2.0**-19 + 2.0**-20)[:, :, None, None] * scale
    diff = np.abs(gram_ours - gram_want)
    bad = diff > tol
    if bad.any():
        p, q, j, k = np.argwhere(bad)[0]
        return (f"score of dims {j}, {k} between positions {positions[p]} and {positions[q]}: posenc "
                f"{gram_ours[p, q, j, k]:.7g}, transformers {gram_want[p, q, j, k]:.7g} (max diff {diff.max():.3g})")
    return ""


@lru_cache(maxsize=2)
def verdicts(path: Path = GOLDEN) -> list[tuple[Case, Verdict]]:
    """Every case and its verdict (judged once: the tests and the table share them)."""
    return [(case, judge(case)) for case in load(path)[1]]


def rotates(case: Case) -> bool:
    """Whether any layer of the built model applied RoPE (a judged case); a model type whose tiny
    model rotates nothing (a rotary module only its vision tower or an unbuilt path uses) is
    listed but not counted among the judged."""
    return any(t is not None for t in case.layers.values())


def judged_defaults(path: Path = GOLDEN) -> dict[str, Verdict]:
    """{model type: verdict} of the default configs whose model rotates."""
    return {c.model_type: v for c, v in verdicts(path) if c.variation == "default" and rotates(c)}


def layer_summary(case: Case) -> str:
    """'8/8 rotate (half)' or '6/8 rotate (half); none: 3, 7'."""
    none = [p.rsplit(".", 1)[1] for p, t in case.layers.items() if t is None]
    layouts = sorted({t.layout for t in case.layers.values() if t is not None})
    text = f"{len(case.layers) - len(none)}/{len(case.layers)} rotate" + (f" ({', '.join(layouts)})" if layouts else "")
    if case.several:
        text += f"; {len(case.several)} apply several rotations ({', '.join(next(iter(case.several.values())))})"
    return text + (f"; none: {', '.join(none)}" if none and len(none) < len(case.layers) else "")


def overall_line(count: dict) -> list[str]:
    """The judged default configs of both goldens together (rotary here, non-rotary in
    model_truth_nonrotary): the share the issue's 95 % is about."""
    import model_truth_nonrotary

    other = model_truth_nonrotary.counts()
    exact, judged = count["exact"] + other["exact"], sum(count.values()) + other["judged"]
    return [f"* rotary and non-rotary together (the section at the end): **{exact} of {judged} judged default "
            f"configs exact ({100 * exact / max(1, judged):.1f} %), {count['wrong'] + other['wrong']} wrong**"]


def table_markdown(path: Path = GOLDEN) -> str:
    """docs/models.md: per model type, posenc's verdict on its default config and variations."""
    meta, _ = load(path)
    results = verdicts(path)
    by_type: dict[str, list] = {}
    for case, verdict in results:
        by_type.setdefault(case.model_type, []).append((case, verdict))
    defaults = {t: next(v for c, v in rows if c.variation == "default") for t, rows in by_type.items()}
    judged = judged_defaults(path)
    facts = json.loads(CHECKED.read_text())["model_types"]
    bare = [t for t in meta["enumerated"] if t in facts and not facts[t]["positions"]]
    count = {s: sum(v.status == s for v in judged.values()) for s in ("exact", "refused", "wrong")}
    var_count = {s: sum(v.status == s for _, v in results) for s in ("exact", "refused", "wrong")}
    lines = [
        "# Model types: posenc.from_hf_config against transformers, layer by layer",
        "",
        "Generated by `python tests/golden/generate_models.py` (transformers "
        f"{meta['versions']['transformers']}, torch {meta['versions']['torch']}); checked by "
        "tests/test_models_truth.py. Each model type with a `*RotaryEmbedding` class (and each text model "
        "type without any position module) is built tiny from its "
        "config class's defaults (and variations: every rope type, a partial rotary factor), run once, and its "
        "own `apply_rotary_pos_emb` probed per layer; posenc's answer for the same config must reproduce every "
        "layer (which layers rotate, cos/sin, layout) or refuse, naming what it does not read.",
        "",
        f"* model types enumerated: {len(meta['enumerated'])}: {len(meta['enumerated']) - len(bare)} with a "
        f"`*RotaryEmbedding` class (text or vision), {len(bare)} text models whose modeling code has no position "
        f"module at all (their truth, that no layer applies positions, is recorded only where the built model's "
        f"output does not change with the position ids); built: {len(defaults)}; not built by the generator "
        f"(listed at the end): {len(meta['failures'])}",
        f"* judged (the built language model applies RoPE in some layer): {len(judged)}; built but rotating "
        f"no layer: {len(defaults) - len(judged)}",
        f"* judged default configs: **{count['exact']} exact ({100 * count['exact'] / max(1, len(judged)):.1f} %), "
        f"{count['refused']} refused naming the mechanism, {count['wrong']} silently wrong**",
        *overall_line(count),
        f"* all {len(results)} configs (defaults and variations): {var_count['exact']} exact, "
        f"{var_count['refused']} refused, {var_count['wrong']} wrong",
        *checked_lines(json.loads(CHECKED.read_text())),
        "",
        "| model type | default config | variations exact | layers (tiny model, 8 layers) |",
        "|---|---|---|---|",
    ]
    for model_type in sorted(by_type):
        rows = by_type[model_type]
        default_case = next(c for c, v in rows if c.variation == "default")
        verdict = defaults[model_type]
        text = verdict.status if verdict.status == "exact" else f"{verdict.status}: {verdict.detail}"
        exact = sum(v.status == "exact" for c, v in rows if c.variation != "default")
        lines.append(f"| `{model_type}` | {text.replace('|', '/')} | {exact}/{len(rows) - 1} | "
                     f"{layer_summary(default_case)} |")
    if meta["failures"]:
        lines += ["", "## Not built by the generator", "", "| model type | why |", "|---|---|"]
        lines += [f"| `{t}` | {why.replace('|', '/')} |" for t, why in sorted(meta["failures"].items())]
    import model_truth_nonrotary  # the non-rotary model types' section (generate_nonrotary.py)

    lines += ["", *model_truth_nonrotary.table_lines()]
    return "\n".join(lines) + "\n"


# --- which model types a golden checks: service/posenc/models/checked.json -----------------

CHECKED = Path(__file__).parent.parent / "service" / "posenc" / "models" / "checked.json"
FIXTURES = Path(__file__).parent / "fixtures" / "hf_configs"
#: The family goldens (generate.py / generate_bias.py): arrays named "<fixture>|..." and a meta keyed by fixture.
FAMILY_GOLDENS = (GOLDEN.with_name("model_rope.npz"), GOLDEN.with_name("model_other.npz"))


def config_chain(config: dict) -> list[str]:
    """The model types from_hf_config dispatches on for this config: its own, then each nested
    language config's in the order the generic reader follows them (thinker_config, text_config,
    llm_config), each of which the gate checks."""
    from posenc.models.generic import NESTED

    chain = []
    while isinstance(config, dict):
        if isinstance(config.get("model_type"), str):
            chain.append(config["model_type"])
        config = next((config[key] for key in NESTED if isinstance(config.get(key), dict)), None)
    return chain


def family_golden_types() -> set[str]:
    """Model types a family golden checks: the fixtures (tests/fixtures/hf_configs) and bare
    `defaults-<model_type>` configs that model_rope.npz and model_other.npz hold values for."""
    names = set()
    for path in FAMILY_GOLDENS:
        with np.load(path, allow_pickle=False) as z:
            names |= {key.split("|")[0] for key in z.files}
            if "meta" in z.files:
                names |= set(json.loads(str(z["meta"])))
    types = {name.removeprefix("defaults-") for name in names if name.startswith("defaults-")}
    return types | {json.loads((FIXTURES / f"{name}.json").read_text())["model_type"] for name in names
                    if (FIXTURES / f"{name}.json").is_file()}


def coverage_record(facts: dict[str, dict], path: Path = GOLDEN, nonrotary: set[str] | None = None,
                    architectures: dict[str, str] | None = None) -> dict:
    """checked.json without the verdicts: per model type transformers knows, `facts` (what
    generate_models.known_model_types read from transformers: positions, inputs, nests,
    config_error, config) and `golden`, the gate's input; and `architectures`, {model class name:
    model type} (config_facts.architectures: what an unknown model type is read by):
    * "judged": a config of model_truth.npz dispatches on it (its verdict comes from `with_verdicts`);
    * "family": a family golden checks it (model_rope.npz, model_other.npz);
    * "wrapper": its modeling code has no positions of its own (but a vision tower's learned patch
      table) and its config nests a language config, which is what posenc reads (and gates);
    * "nonrotary": none of the above, and a default config of model_truth_nonrotary.npz that
      dispatches on it is answered exactly (`nonrotary`; None: model_truth_nonrotary.exact_types()
      under the checked.json as written);
    * "unchecked": none of these (with `failure`, why the truth generator could not build it):
      from_hf_config refuses it unless a family reader has it, saying why (`checked.why`)."""
    meta, cases = load(path)
    judged = {t for case in cases for t in config_chain(case.config)}
    family = family_golden_types()
    if nonrotary is None:
        import model_truth_nonrotary

        nonrotary = model_truth_nonrotary.exact_types()
    types = {}
    for model_type, fact in facts.items():
        entry = dict(fact)
        if model_type in judged:
            entry["golden"] = "judged"
        elif model_type in family:
            entry["golden"] = "family"
        elif model_type in nonrotary:
            entry["golden"] = "nonrotary"
        elif fact.get("nests") and set(fact["positions"]) <= {"learned patch"}:
            entry["golden"] = "wrapper"
        else:
            entry["golden"] = "unchecked"
            if model_type in meta["failures"]:
                entry["failure"] = meta["failures"][model_type]
        types[model_type] = entry
    return {"transformers": meta["versions"]["transformers"], "architectures": dict(architectures or {}),
            "model_types": types}


def with_verdicts(record: dict, path: Path = GOLDEN) -> dict:
    """The record with each judged model type's `verdict`: "exact" when a default config that
    dispatches on it is judged exact (any config when no default does), else "refused" and its
    `refusal`. Judged with the gate of the record as written (it lets every judged type through)."""
    by_type: dict[str, list] = {}
    for case, verdict in verdicts(path):
        for model_type in config_chain(case.config):
            by_type.setdefault(model_type, []).append((case.variation == "default", verdict))
    out = {**record, "model_types": {t: dict(e) for t, e in record["model_types"].items()}}
    for model_type, entry in out["model_types"].items():
        if entry["golden"] != "judged":
            continue
        rows = by_type[model_type]
        pool = [v for is_default, v in rows if is_default] or [v for _, v in rows]
        exact = any(v.status == "exact" for v in pool)
        entry["verdict"] = "exact" if exact else pool[0].status
        if not exact:
            entry["refusal"] = pool[0].detail
    return out


def refused_by_gate(record: dict) -> list[str]:
    """The model types from_hf_config refuses as unchecked: no golden, no family reader."""
    from posenc.models import READERS, families  # noqa: F401  (families registers every reader)

    return sorted(t for t, e in record["model_types"].items() if e["golden"] == "unchecked" and t not in READERS)


def checked_lines(record: dict) -> list[str]:
    """The model table's summary of checked.json: what posenc answers and refuses over every model
    type transformers knows, and the non-rotary positions enumerated from its modeling files."""
    from posenc.models import READERS, families  # noqa: F401  (families registers every reader)

    types = record["model_types"]
    golden = {g: sorted(t for t, e in types.items() if e["golden"] == g) for g in ("judged", "family", "wrapper",
                                                                                    "unchecked", "nonrotary")}
    verdict = {v: sum(types[t]["verdict"] == v for t in golden["judged"]) for v in ("exact", "refused")}
    gated = refused_by_gate(record)
    by_reader = [t for t in golden["unchecked"] if t in READERS]
    other = {t: e for t, e in types.items() if e["positions"] and "rotary" not in e["positions"]}
    kinds = sorted({k for e in other.values() for k in e["positions"]})
    per_kind = ", ".join(f"{k} {sum(k in e['positions'] for e in other.values())}" for k in kinds)
    other_checked = sorted(t for t, e in other.items() if e["golden"] in ("judged", "family", "nonrotary")
                           or t in READERS)
    return [
        f"* every model type transformers {record['transformers']} knows: {len(types)} "
        f"(`service/posenc/models/checked.json`, which from_hf_config's gate reads): "
        f"**{len(golden['judged'])} that the configs above dispatch on ({verdict['exact']} exact on a default "
        f"config, {verdict['refused']} refused naming the mechanism), {len(golden['family'])} checked by the "
        f"family goldens** (model_rope.npz, model_other.npz), **{len(golden['nonrotary'])} exact against the "
        f"non-rotary golden** (model_truth_nonrotary.npz, below), {len(golden['wrapper'])} wrappers without "
        f"positions of their own (read through their language config, which the gate checks), **{len(gated)} unchecked and refused** saying why "
        f"(`config.model_type`), {len(by_reader)} unchecked but answered by a hand-written family reader "
        f"({', '.join(f'`{t}`' for t in by_reader)})",
        f"* positions other than rotary, from the modeling files (ALiBi, relative attention bias, sinusoidal, "
        f"learned absolute, a vision tower's learned patch table, M-RoPE position ids of a wrapper): "
        f"{len(other)} model types ({per_kind}); checked (a golden, or a family reader): {len(other_checked)} "
        f"({', '.join(f'`{t}`' for t in other_checked)})",
    ]
