"""The causes the audit can name, each with its one-sentence fix, and the `Finding` it reports.

A finding is one named cause with the evidence that points to it and how sure the audit is:
"high" when a simulation of that cause explains the cache (docs/audit.md says what "explains"
means) and takes away nearly all of its error, or the config contradicts it outright; "medium"
when the explanation leaves more, or it is a guess without a config; "low" only for
`no_known_cause`.
"""

from __future__ import annotations

from dataclasses import dataclass

#: cause -> (title, fix). The fix is one sentence a team can act on.
CAUSES: dict[str, tuple[str, str]] = {
    "correct": (
        "correct", "Nothing to fix: the cache equals the exact values to the rounding of its storage dtype."),
    "float32_angles": (
        "angles formed in float32 (error grows with position)",
        "Form p * inv_freq in float64 (or use posenc's tables) and cast cos/sin once at the end; float32 angles "
        "lose about p * 6e-8 rad, the HF/textbook signature."),
    "llama_cpp_angles": (
        "angles formed in float32 as llama.cpp forms them (error grows with position and frequency index)",
        ("Nothing to fix in the model or its conversion: these are the config's values as llama.cpp's ggml rope "
         "computes them (theta multiplied up by a float32 powf(base, -2/n_dims) frequency by frequency, about "
         "(i + 1) * p * 6e-8 rad at frequency i); for exact values use float64 angles (posenc's tables).")),
    "bf16_positions": (
        "positions rounded to bfloat16 (rows above 256 alias)",
        "Keep position ids integer (int64) or float32 up to the cache length; never cast them to the model dtype "
        "before multiplying by inv_freq."),
    "fp16_positions": (
        "positions rounded to float16 (rows above 2048 alias)",
        "Keep position ids integer (int64) or float32; never cast them to float16 before multiplying by inv_freq."),
    "bf16_angles": (
        "angles formed in bfloat16",
        "Compute inv_freq and p * inv_freq in float32 at least (float64 for long context), never in the bfloat16 "
        "model dtype."),
    "bf16_inv_freq": (
        "inv_freq rounded to bfloat16 (error grows with position)",
        "Keep the inv_freq buffer in float32: `model.to(torch.bfloat16)` casts it too (register it as float32 after "
        "the cast, or build it at forward time), and candle-style bfloat16 frequencies lose 3 significant digits."),
    "fp16_inv_freq": (
        "inv_freq rounded to float16 (error grows with position)",
        "Keep the inv_freq buffer in float32: `model.half()` casts it too (re-create it as float32 after the cast)."),
    "fp16_angles": (
        "angles formed in float16",
        "Compute inv_freq and p * inv_freq in float32 at least (float64 for long context), never in float16."),
    "fp16_storage": (
        "cache stored in float16",
        "Store the cos/sin cache in float32 and cast to the activation dtype only at the multiply."),
    "bf16_storage": (
        "cache stored in bfloat16",
        "Store the cos/sin cache in float32 and cast to the activation dtype only at the multiply."),
    "wrong_layout": (
        "cache layout does not match the model's rotation",
        "Build the cache in the layout the attention code pairs dimensions with (half: cat(freqs, freqs); "
        "interleaved: repeat_interleave(freqs, 2))."),
    "interleaved_read_as_half": (
        "an interleaved cache read as half-split",
        "Take the frequencies of an interleaved cache with cos[:, 0::2], not cos[:, :d/2], or build the cache "
        "half-split for rotate_half."),
    "wrong_rotary_dim": (
        "rotary dim does not match the config",
        "Rotate int(head_dim * partial_rotary_factor) dims as the config says and pass the rest through."),
    "wrong_base": (
        "wrong RoPE base (rope_theta)",
        "Read rope_theta from the model's config.json instead of a hard-coded default."),
    "scaling_missing": (
        "RoPE scaling missing",
        "Apply the config's rope_scaling / rope_parameters when building inv_freq (posenc.RopeSpec.from_hf_config "
        "reads it)."),
    "wrong_scaling": (
        "wrong RoPE scaling",
        "Build inv_freq with the scaling variant and parameters of the model's config.json."),
    "attention_factor_missing": (
        "attention factor not applied",
        "Multiply cos and sin by the scaling's attention factor (YaRN mscale, LongRoPE) as HF does."),
    "wrong_attention_factor": (
        "wrong attention factor",
        "Multiply cos and sin by exactly the attention factor of the config's scaling (posenc.rope_inv_freq "
        "returns it), once."),
    "layout_unconfirmed": (
        "layout cannot be confirmed from the file",
        ("Convert with llama.cpp's convert_hf_to_gguf.py, which writes each HF architecture under the GGUF "
         "architecture (and q/k permutation) whose rope type pairs dimensions as the model does: a file written "
         "otherwise rotates correctly only if its q/k were permuted to match, which its metadata cannot show.")),
    "wrong_softmax_scale": (
        "wrong attention softmax scale",
        ("Write YaRN's mscale_all_dim where llama.cpp reads it (convert_hf_to_gguf.py writes "
         "rope.scaling.yarn_log_multiplier = 0.1 * mscale_all_dim for deepseek2): the model multiplies q.k by "
         "mscale(factor, mscale_all_dim)^2.")),
    "position_offset": (
        "positions do not start at 0",
        "Row p of the cache must hold position p: build it from arange(0, n), not arange(1, n + 1)."),
    "wrong_length_variant": (
        "length-dependent scaling computed for another length",
        "Build the frequencies for the length the cache covers: dynamic NTK at seq_len = the cache's rows (HF grows "
        "them with the sequence), LongRoPE's long_factor once the cache extends past "
        "original_max_position_embeddings (posenc.rope_inv_freq(spec, seq_len=rows))."),
    "corrupt_rows": (
        "rows that are not the cos and sin of any angle",
        "Rebuild the cache: some rows hold NaN/infinite values, values beyond the attention factor, or cos^2 + sin^2 "
        "off the attention factor squared (memory corruption, a bad slice or write, an uninitialised buffer)."),
    "transposed": (
        "cache stored transposed ([dim, n])",
        ("Keep the cache [position, dim] (row p holds position p): build it as outer(positions, inv_freq), not "
         "outer(inv_freq, positions), or transpose it where it is stored; nothing to fix if your kernel reads "
         "it [dim, n] on purpose.")),
    "truncated": (
        "cache shorter than max_position_embeddings",
        "Build the cache for max_position_embeddings rows (or grow it on demand) so long prompts do not index "
        "past its end."),
    "no_known_cause": (
        "no known cause",
        "The error fits none of the known causes: compare your construction with posenc.rope_cos_sin step by step."),
}

SEVERITIES = ("error", "warning", "info")
CONFIDENCES = ("high", "medium", "low")
#: Precision causes that are the arithmetic of a tool the team runs, not a choice in its code: warnings.
TOOL_ARITHMETIC = frozenset({"llama_cpp_angles"})


@dataclass(frozen=True)
class Finding:
    cause: str
    evidence: str
    confidence: str = "high"  # high | medium | low
    severity: str = "error"  # error | warning | info

    def __post_init__(self):
        assert self.cause in CAUSES and self.severity in SEVERITIES and self.confidence in CONFIDENCES, \
            (self.cause, self.severity, self.confidence)

    @property
    def title(self) -> str:
        return CAUSES[self.cause][0]

    @property
    def fix(self) -> str:
        return CAUSES[self.cause][1]

    @property
    def rank(self) -> tuple[int, int]:
        """Findings are listed most severe first and, within a severity, surest first: a cause a simulation
        reproduces (high) comes before one read off fitted frequencies (medium), so the diagnosis is the
        cause the evidence is strongest for."""
        return SEVERITIES.index(self.severity), CONFIDENCES.index(self.confidence)

    def to_dict(self) -> dict:
        return {"cause": self.cause, "title": self.title, "evidence": self.evidence, "fix": self.fix,
                "confidence": self.confidence, "severity": self.severity}
