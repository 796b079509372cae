"""CPU generation with Hugging Face transformers (the embedded default's backend)."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from toolcall_repro.backends.base import (
    STOP_TOKENS,
    Generation,
    GenerationBackend,
    check_request,
    derive_seed,
)


class ContextLengthError(ValueError):
    """A request longer than the model's context: refused, as vLLM refuses one past max_model_len."""


class TransformersBackend(GenerationBackend):
    """``model.generate`` on CPU, one prompt per call (``n`` rows of the same prompt, so no padding).

    Each prompt is seeded with ``derive_seed(seed, index)`` through ``torch.manual_seed`` just before its
    call, so its samples do not depend on the other prompts. Stops at the tokenizer's EOS and at
    ``<|im_end|>`` / ``<|endoftext|>`` when the vocabulary has them.

    The model's context is its config's ``max_position_embeddings`` (vLLM's default max_model_len): a
    prompt whose tokens plus ``max_tokens`` exceed it raises ContextLengthError, as ``vllm serve``
    answers such a request with an error, instead of running RoPE past the positions the model declares
    (the tiny model's 12288 against BFCL's multi-turn prompts of ~27k of its tokens). BFCL records it as
    an inference error of that entry, as it does on vLLM.
    """

    kind = "transformers"

    def __init__(self, model_dir: str | Path, threads: int = 1, dtype: str = "float32"):
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a positive int, got {threads!r}")
        model_dir = Path(model_dir)
        if not (model_dir / "config.json").is_file():
            raise FileNotFoundError(f"{model_dir} is not a Hugging Face model directory (no config.json)")
        torch.set_num_threads(threads)  # one thread per job: more is slower on a shared CPU
        self.model_dir = model_dir
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        self.model = AutoModelForCausalLM.from_pretrained(
            model_dir, local_files_only=True, dtype=getattr(torch, dtype)
        )
        self.model.eval()
        self.max_model_len = int(self.model.config.max_position_embeddings)
        self.stop_token_ids = self._stop_token_ids()
        pad = self.tokenizer.pad_token_id
        self.pad_token_id = pad if pad is not None else self.stop_token_ids[0]

    def _stop_token_ids(self) -> list[int]:
        ids = []
        if self.tokenizer.eos_token_id is not None:
            ids.append(self.tokenizer.eos_token_id)
        vocab = self.tokenizer.get_vocab()
        ids += [vocab[t] for t in STOP_TOKENS if t in vocab]
        if not ids:
            raise ValueError(f"the tokenizer in {self.model_dir} has no EOS or ChatML stop token")
        return list(dict.fromkeys(ids))

    def _config(self, n: int, temperature: float, top_p: float, max_tokens: int) -> GenerationConfig:
        greedy = temperature == 0
        # a fresh config, so the model's own defaults (top_k, repetition penalty, ...) never apply
        return GenerationConfig(
            do_sample=not greedy,
            temperature=None if greedy else float(temperature),
            top_p=None if greedy else float(top_p),
            top_k=None,
            max_new_tokens=max_tokens,
            num_return_sequences=1 if greedy else n,
            eos_token_id=self.stop_token_ids,
            pad_token_id=self.pad_token_id,
        )

    def _decode(self, row: list[int], prompt_tokens: int) -> Generation:
        stops = set(self.stop_token_ids)
        cut = next((i for i, t in enumerate(row) if t in stops), None)
        kept = row if cut is None else row[:cut]
        text = self.tokenizer.decode(kept, skip_special_tokens=False)
        return Generation(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=len(row) if cut is None else cut + 1,
            finish_reason="length" if cut is None else "stop",
        )

    @torch.inference_mode()
    def generate(
        self, prompts: list[str], n: int, *, temperature: float, top_p: float, max_tokens: int, seed: int
    ) -> list[list[Generation]]:
        check_request(prompts, n, temperature, top_p, max_tokens, seed)
        config = self._config(n, temperature, top_p, max_tokens)
        results = []
        for index, prompt in enumerate(prompts):
            ids = self.tokenizer(prompt, add_special_tokens=False, return_tensors="pt").input_ids
            if ids.shape[1] + max_tokens > self.max_model_len:
                raise ContextLengthError(
                    f"this model's maximum context length is {self.max_model_len} tokens; the request has "
                    f"{ids.shape[1]} in the prompt and {max_tokens} for the completion (prompt {index})"
                )
            torch.manual_seed(derive_seed(seed, index))
            out = self.model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config
            )
            rows = [self._decode(row[ids.shape[1] :].tolist(), ids.shape[1]) for row in out]
            results.append(rows * n if temperature == 0 else rows)
        return results
