"""What llama.cpp does with a GGUF file's RoPE, as tables: read from llama.cpp's own sources (ggml-org/llama.cpp
0c1e57098, the tree llama-cpp-python 0.3.36 vendors) by hand, so posenc judges a file by what llama.cpp will
compute from it, not by what the keys seem to say.

* `ROPE_TYPE`: `llama_model_rope_type` (src/llama-model.cpp): NORM rotates adjacent pairs of each head's
  q/k as stored, NEOX pairs i with i + n_rot/2, M-RoPE / IM-RoPE rotate position sections, NONE is none.
* `SWA`: the architectures whose loader (src/models/<arch>.cpp `load_arch_hparams`) gives sliding-window
  layers their own base: `{arch}.rope.freq_base_swa` when written, else the default the loader sets
  (the full layers' base, or `llama_hparams`'s 10000), the layers from `attention.sliding_window_pattern`
  or the loader's default period (`set_swa_pattern`: layer il is SWA when il % n < n - 1).
* `YARN_LOG_MUL_SCALE`: the loaders that read `rope.scaling.yarn_log_multiplier`, and what they divide it
  by (deepseek2 and deepseek32 undo the converter's 0.1, [TAG_DEEPSEEK2_YARN_LOG_MUL_FIX]; mistral3 reads it
  as written); `YARN_KEYS`: the loaders that read the YaRN betas / ext / attention factor keys at all
  (everyone else uses `llama_hparams`'s defaults, whatever the file holds).
* `CONVERTED_AS`: HF architecture -> (GGUF arch, whether the q/k weights are permuted) as
  convert_hf_to_gguf.py's model classes (conversion/*.py) write them: `LlamaModel.permute` (and Baichuan's
  and Xverse's own) reorders each head so that llama.cpp's NORM rotation of adjacent pairs is HF's
  `rotate_half` of the halves; every other class writes q/k as HF stores them.
"""

from __future__ import annotations

from dataclasses import dataclass

LLAMA_CPP_VERSION = "ggml-org/llama.cpp 0c1e57098"


def _table(kind: str, names: str) -> dict[str, str]:
    return dict.fromkeys(names.split(), kind)


#: arch -> "norm" | "neox" | "mrope" | "imrope" | "none" (llama_model_rope_type).
ROPE_TYPE: dict[str, str] = {
    **_table("none", "arwkv7 bloom clip glm5-next gpt2 gptj jais jamba jina-bert-v2 kimi-k3 kimi-linear mamba "
                     "mamba2 mpt nemotron_h nemotron_h_moe refact rwkv6 rwkv6qwen2 rwkv7 t5 t5encoder "
                     "wavtokenizer-dec"),
    **_table("norm", "arcee arctic baichuan bailingmoe bailingmoe3 chameleon chatglm cohere2 cohere2moe command-r "
                     "deci deepseek deepseek2 deepseek2-ocr deepseek32 deepseek4 dots3note eagle3 ernie4_5 "
                     "ernie4_5-moe glm-dsa glm4 granite granite_swa granitehybrid granitemoe graniteswitch hy_v4 "
                     "internlm2 llada llama llama-embed llama4 maincoder minicpm mistral3 mistral4 muse-glimmer "
                     "nanbeige neo-bert olmo plm pockettts smollm3 starcoder xverse"),
    **_table("neox", "afmoe apertus bailingmoe2 bert bitnet codeshell cogvlm dbrx dots1 dream eurobert exaone "
                     "exaone-moe exaone4 falcon falcon-h1 gemma gemma-embedding gemma2 gemma3 gemma3n gemma4 "
                     "gemma4-assistant glm4moe gpt-oss gptneox grok grovemoe hrm_text hunyuan-dense hunyuan-moe "
                     "hunyuan_vl hy_v3 jais2 jina-bert-v3 laguna lfm2 lfm2moe llada-moe maple mellum mimo2 "
                     "minicpm3 minimax-01 minimax-m2 minimax-m3 modern-bert nemotron nomic-bert nomic-bert-moe "
                     "olmo2 olmoe openelm orion pangu-embedded phi2 phi3 phimoe plamo plamo2 plamo3 qwen qwen2 "
                     "qwen2moe qwen3 qwen3moe qwen3next rnd1 seed_oss smallthinker spark2_5 stablelm starcoder2 "
                     "step35 talkie"),
    **_table("mrope", "paddleocr qwen2vl"),
    **_table("imrope", "qwen35 qwen35moe qwen3tts qwen3vl qwen3vlmoe qwen4exp"),
}
#: Architectures whose rope type becomes M-RoPE when the file has `rope.dimension_sections` (use_mrope()).
MROPE_WITH_SECTIONS = frozenset({"bailingmoe3", "glm4", "glm4moe", "hunyuan_vl"})


@dataclass(frozen=True)
class SwaRule:
    """How a loader sets up sliding-window layers: `needs_window` (only when `attention.sliding_window` > 0),
    the default period of the pattern, and the SWA base / frequency scale when the file has no key
    (None: the full layers' value)."""

    needs_window: bool
    period: int
    base: float | None
    scale: float | None


SWA: dict[str, SwaRule] = {
    "gemma2": SwaRule(False, 2, None, None),
    "gemma3": SwaRule(True, 6, 10000.0, 1.0),
    "gemma3n": SwaRule(False, 5, 10000.0, 1.0),
    "cohere2": SwaRule(False, 4, None, None),
    "gpt-oss": SwaRule(False, 2, None, None),
    "olmo2": SwaRule(True, 4, None, 1.0),
}
#: arch -> what its loader divides rope.scaling.yarn_log_multiplier by (the result is mscale_all_dim).
YARN_LOG_MUL_SCALE: dict[str, float] = {"deepseek2": 0.1, "deepseek32": 0.1, "mistral3": 1.0}
#: Architectures whose graph multiplies q.k by mscale^2, mscale = attn * (1 + 0.1 * mscale_all_dim * ln factor).
SOFTMAX_MSCALE = frozenset({"deepseek2", "deepseek32"})
#: arch -> the YaRN keys its loader reads, with the defaults it starts from (llama_hparams: 32, 1, -1, 1).
YARN_DEFAULTS = {"beta_fast": 32.0, "beta_slow": 1.0, "ext_factor": -1.0, "attn_factor": 1.0}
YARN_KEYS: dict[str, dict[str, float]] = {
    "grok": {**YARN_DEFAULTS, "beta_fast": 8.0},
    "mistral3": {"beta_fast": 32.0, "beta_slow": 1.0},
}


def _converted(arch: str, permuted: bool, names: str) -> dict[str, tuple[str, bool]]:
    return dict.fromkeys(names.split(), (arch, permuted))


#: HF architecture -> (GGUF arch, q/k permuted) as convert_hf_to_gguf.py writes it (text models).
CONVERTED_AS: dict[str, tuple[str, bool]] = {
    **_converted("llama", True, "LlamaForCausalLM LLaMAForCausalLM LlamaModel MistralForCausalLM MixtralForCausalLM "
                                "LlavaForConditionalGeneration VLlama3ForCausalLM VoxtralForConditionalGeneration "
                                "IQuestCoderForCausalLM InternLM3ForCausalLM"),
    **_converted("mistral3", True, "Mistral3ForConditionalGeneration Ministral3ForCausalLM"),
    **_converted("llama4", False, "Llama4ForCausalLM Llama4ForConditionalGeneration"),
    **_converted("deci", True, "DeciLMForCausalLM"),
    **_converted("granite", True, "GraniteForCausalLM"),
    **_converted("granitemoe", True, "GraniteMoeForCausalLM GraniteMoeSharedForCausalLM"),
    **_converted("smollm3", True, "SmolLM3ForCausalLM"),
    **_converted("arcee", True, "ArceeForCausalLM"),
    **_converted("baichuan", True, "BaichuanForCausalLM BaiChuanForCausalLM"),
    **_converted("xverse", True, "XverseForCausalLM"),
    **_converted("internlm2", True, "InternLM2ForCausalLM"),
    **_converted("minicpm", True, "MiniCPMForCausalLM"),
    **_converted("olmo", True, "OlmoForCausalLM OLMoForCausalLM"),
    **_converted("deepseek", True, "DeepseekForCausalLM"),
    **_converted("deepseek2", False, "DeepseekV2ForCausalLM DeepseekV3ForCausalLM KimiVLForConditionalGeneration "
                                     "YoutuForCausalLM Glm4MoeLiteForCausalLM"),
    **_converted("deepseek32", False, "DeepseekV32ForCausalLM"),
    **_converted("command-r", False, "CohereForCausalLM"),
    **_converted("cohere2", False, "Cohere2ForCausalLM"),
    **_converted("chatglm", False, "ChatGLMModel ChatGLMForConditionalGeneration GlmForCausalLM"),
    **_converted("glm4", False, "Glm4ForCausalLM"),
    **_converted("ernie4_5", False, "Ernie4_5ForCausalLM Ernie4_5_ForCausalLM"),
    **_converted("ernie4_5-moe", False, "Ernie4_5_MoeForCausalLM"),
    **_converted("qwen2", False, "Qwen2ForCausalLM Qwen2Model Qwen2AudioForConditionalGeneration KORMoForCausalLM"),
    **_converted("qwen2moe", False, "Qwen2MoeForCausalLM"),
    **_converted("qwen3", False, "Qwen3ForCausalLM Qwen3Model"),
    **_converted("qwen3moe", False, "Qwen3MoeForCausalLM"),
    **_converted("phi2", False, "PhiForCausalLM"),
    **_converted("phi3", False, "Phi3ForCausalLM"),
    **_converted("phimoe", False, "PhiMoEForCausalLM"),
    **_converted("gemma", False, "GemmaForCausalLM"),
    **_converted("gemma2", False, "Gemma2ForCausalLM"),
    **_converted("gemma3", False, "Gemma3ForCausalLM Gemma3ForConditionalGeneration"),
    **_converted("gemma3n", False, "Gemma3nForCausalLM Gemma3nForConditionalGeneration"),
    **_converted("falcon", False, "FalconForCausalLM RWForCausalLM"),
    **_converted("gptneox", False, "GPTNeoXForCausalLM"),
    **_converted("stablelm", False, "StableLmForCausalLM StableLMEpochForCausalLM"),
    **_converted("starcoder2", False, "Starcoder2ForCausalLM"),
    **_converted("olmo2", False, "Olmo2ForCausalLM Olmo3ForCausalLM"),
    **_converted("olmoe", False, "OlmoeForCausalLM"),
    **_converted("exaone", False, "ExaoneForCausalLM"),
    **_converted("exaone4", False, "Exaone4ForCausalLM"),
    **_converted("gpt-oss", False, "GptOssForCausalLM"),
    **_converted("dbrx", False, "DbrxForCausalLM"),
    **_converted("nemotron", False, "NemotronForCausalLM"),
    **_converted("minicpm3", False, "MiniCPM3ForCausalLM"),
    **_converted("glm4moe", False, "Glm4MoeForCausalLM"),
    **_converted("hunyuan-dense", False, "HunYuanDenseV1ForCausalLM"),
    **_converted("hunyuan-moe", False, "HunYuanMoEV1ForCausalLM"),
    **_converted("seed_oss", False, "SeedOssForCausalLM"),
    **_converted("dots1", False, "Dots1ForCausalLM"),
    **_converted("apertus", False, "ApertusForCausalLM"),
    **_converted("afmoe", False, "AfmoeForCausalLM"),
    **_converted("minimax-m2", False, "MiniMaxM2ForCausalLM"),
    **_converted("orion", False, "OrionForCausalLM"),
    **_converted("openelm", False, "OpenELMForCausalLM"),
}


def rope_type(arch: str, has_sections: bool) -> str | None:
    """llama.cpp's rope type for `arch` (None: not in this table)."""
    if arch in MROPE_WITH_SECTIONS and has_sections:
        return "mrope"
    return ROPE_TYPE.get(arch)


__all__ = ["CONVERTED_AS", "LLAMA_CPP_VERSION", "ROPE_TYPE", "SOFTMAX_MSCALE", "SWA", "YARN_DEFAULTS", "YARN_KEYS",
           "YARN_LOG_MUL_SCALE", "SwaRule", "rope_type"]
