"""The primary sources `posenc pick` cites: papers (their own abstracts' or figures' claims), the
reference code whose behaviour a reason rests on, and published configs. Nothing second-hand: a
claim found only in a blog or a guide is not a source here (docs/lab.md lists two such claims that
the lab and these sources contradict)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    key: str
    title: str
    where: str  # authors and venue, or the repository and file
    url: str
    says: str  # what the source states that a reason relies on, in posenc's words

    def cite(self) -> dict:
        return {"kind": "source", "id": self.key, "title": self.title, "where": self.where, "url": self.url,
                "says": self.says}


SOURCES = {source.key: source for source in (
    Source("press2022", "Train Short, Test Long: Attention with Linear Biases Enables Input Length Extrapolation",
           "Press, Smith, Lewis; ICLR 2022", "https://arxiv.org/abs/2108.12409",
           "a 1.3B-parameter ALiBi model trained on length 1024 extrapolates to 2048 with the perplexity of a "
           "sinusoidal model trained on 2048, training 11% faster with 11% less memory"),
    Source("su2021", "RoFormer: Enhanced Transformer with Rotary Position Embedding",
           "Su, Lu, Pan, Murtadha, Wen, Liu; 2021", "https://arxiv.org/abs/2104.09864",
           "rotating queries and keys by position-dependent angles (base 10000) makes attention scores depend on "
           "relative position"),
    Source("chen2023", "Extending Context Window of Large Language Models via Positional Interpolation",
           "Chen, Wong, Chen, Tian; 2023", "https://arxiv.org/abs/2306.15595",
           "linearly down-scaling positions extends LLaMA models' context up to 32768 with minimal fine-tuning "
           "(within 1000 steps)"),
    Source("peng2023", "YaRN: Efficient Context Window Extension of Large Language Models",
           "Peng, Quesnelle, Fan, Shippole; ICLR 2024", "https://arxiv.org/abs/2309.00071",
           "YaRN extends RoPE models with 10x fewer tokens and 2.5x fewer training steps than previous methods, "
           "extrapolates beyond the context of its fine-tuning data, and scales attention by 0.1 ln(s) + 1; its "
           "fine-tuned Llama 2 models reach 128k context"),
    Source("xiong2023", "Effective Long-Context Scaling of Foundation Models",
           "Xiong et al.; 2023", "https://arxiv.org/abs/2309.16039",
           "long-context continual pre-training with RoPE's base frequency raised from 10,000 to 500,000"),
    Source("roziere2023", "Code Llama: Open Foundation Models for Code",
           "Rozière et al.; 2023", "https://arxiv.org/abs/2308.12950",
           "long-context fine-tuning at 16,384 tokens with RoPE's base raised to 1,000,000 shows improvements on "
           "inputs up to 100,000 tokens"),
    Source("men2024", "Base of RoPE Bounds Context Length",
           "Men, Xu, Wang, Zhang, Lin, Han, Chen; NeurIPS 2024", "https://arxiv.org/abs/2405.14591",
           "a context length L needs a RoPE base above a lower bound; their Figure 1 fits the bound as "
           "0.0424 * L^1.628"),
    Source("raffel2020", "Exploring the Limits of Transfer Learning with a Unified Text-to-Text Transformer (T5)",
           "Raffel et al.; JMLR 2020", "https://arxiv.org/abs/1910.10683",
           "relative positions fall into 32 buckets whose sizes grow logarithmically up to an offset of 128; every "
           "larger offset shares one bucket"),
    Source("llama3_config", "Meta-Llama-3-8B config.json", "meta-llama on the Hugging Face Hub",
           "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json",
           "rope_theta 500000 with max_position_embeddings 8192, no rope_scaling"),
    Source("hf_dynamic", "transformers: modeling_rope_utils.py (dynamic_rope_update, _compute_dynamic_ntk_parameters)",
           "huggingface/transformers",
           "https://github.com/huggingface/transformers/blob/main/src/transformers/modeling_rope_utils.py",
           "dynamic NTK recomputes the inverse frequencies whenever a sequence longer than the cached one "
           "arrives; keys already in a KV cache keep the rotation they were computed with"),
    Source("flash_attn_alibi", "flash-attention: flash_attn_interface.py (flash_attn_func's alibi_slopes)",
           "Dao-AILab/flash-attention",
           "https://github.com/Dao-AILab/flash-attention/blob/main/flash_attn/flash_attn_interface.py",
           "flash_attn_func takes alibi_slopes (nheads,) and adds -slope * |i - j| inside the kernel, so no "
           "[heads, n, n] bias is materialized"),
)}


def cite(key: str) -> dict:
    return SOURCES[key].cite()
