"""A stand-in for the `vllm` module of vLLM 0.24.0, built from that release's own names, so that it
refuses a keyword the real `vllm.LLM(...)` refuses.

vLLM cannot share the test env with bfcl-eval (numpy), so the tests cannot import it. What a backend can
get wrong without a GPU is the constructor: `LLM.__init__` takes the keyword-only parameters below and
passes every other keyword on to the `EngineArgs` dataclass, which raises TypeError for a name it lacks
(`EngineArgs.__init__() got an unexpected keyword argument ...`). The stand-in does the same with the same
names. Generation is a recording fake: text `s<seed % 97>-<k>`, k+1 token ids, the first sample cut.

Names only, read from the vllm-0.24.0 wheel on PyPI (vllm-0.24.0-cp38-abi3-manylinux_2_28_x86_64.whl,
the version verl 0.9.1's `vllm` extra pins): `LLM_KEYWORDS` are the keyword-only parameters of
`LLM.__init__` in `vllm/entrypoints/llm.py`, `ENGINE_ARGS_FIELDS` the fields of `class EngineArgs` in
`vllm/engine/arg_utils.py`, in source order. When the project moves to another vLLM, read them again from
that release.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
from typing import Any

VERSION = "0.24.0"

LLM_KEYWORDS = """
    runner convert tokenizer tokenizer_mode skip_tokenizer_init trust_remote_code
    allowed_local_media_path allowed_media_domains tensor_parallel_size dtype quantization revision
    tokenizer_revision chat_template seed gpu_memory_utilization cpu_offload_gb offload_group_size
    offload_num_in_group offload_prefetch_step offload_params enforce_eager enable_return_routed_experts
    disable_custom_all_reduce hf_token hf_overrides mm_processor_kwargs pooler_config
    structured_outputs_config profiler_config attention_config kv_cache_memory_bytes compilation_config
    quantization_config logits_processors spec_method spec_model spec_tokens
""".split()
ENGINE_ARGS_FIELDS = """
    model enable_return_routed_experts model_weights served_model_name tokenizer hf_config_path runner
    convert skip_tokenizer_init enable_prompt_embeds tokenizer_mode trust_remote_code
    allowed_local_media_path allowed_media_domains download_dir safetensors_load_strategy
    safetensors_prefetch_num_threads safetensors_prefetch_block_size load_format config_format dtype
    kv_cache_dtype seed max_model_len cudagraph_capture_sizes max_cudagraph_capture_size ir_op_priority
    distributed_executor_backend pipeline_parallel_size master_addr master_port nnodes node_rank
    distributed_timeout_seconds cpu_distributed_timeout_seconds numa_bind numa_bind_nodes numa_bind_cpus
    device_ids tensor_parallel_size prefill_context_parallel_size decode_context_parallel_size
    dcp_comm_backend dcp_kv_cache_interleave_size cp_kv_cache_interleave_size data_parallel_size
    data_parallel_rank data_parallel_start_rank data_parallel_size_local data_parallel_address
    data_parallel_rpc_port data_parallel_hybrid_lb data_parallel_external_lb
    data_parallel_multi_port_external_lb data_parallel_backend enable_expert_parallel
    enable_ep_weight_filter moe_backend linear_backend all2all_backend enable_elastic_ep enable_dbo
    ubatch_size dbo_decode_token_threshold dbo_prefill_token_threshold
    disable_nccl_for_dp_synchronization eplb_config enable_eplb expert_placement_strategy
    _api_process_count _api_process_rank max_parallel_loading_workers block_size enable_prefix_caching
    prefix_caching_hash_algo disable_sliding_window disable_cascade_attn offload_backend cpu_offload_gb
    cpu_offload_params offload_group_size offload_num_in_group offload_prefetch_step offload_params
    gpu_memory_utilization kv_cache_memory_bytes max_num_batched_tokens max_num_partial_prefills
    max_long_partial_prefills long_prefill_token_threshold max_num_seqs max_logprobs logprobs_mode
    use_fp64_gumbel disable_log_stats aggregate_engine_logging revision code_revision hf_token
    hf_overrides tokenizer_revision quantization quantization_config allow_deprecated_quantization
    enforce_eager disable_custom_all_reduce language_model_only limit_mm_per_prompt enable_mm_embeds
    interleave_mm_strings media_io_kwargs mm_processor_kwargs mm_processor_cache_gb
    mm_processor_cache_type mm_shm_cache_max_object_size_mb mm_encoder_only mm_encoder_tp_mode
    mm_encoder_attn_backend mm_encoder_attn_dtype mm_encoder_fp8_scale_path
    mm_encoder_fp8_scale_save_path mm_encoder_fp8_scale_save_margin io_processor_plugin
    renderer_num_workers skip_mm_profiling video_pruning_rate mm_tensor_ipc enable_lora max_loras
    max_lora_rank default_mm_loras fully_sharded_loras max_cpu_loras lora_dtype lora_target_modules
    enable_tower_connector_lora specialize_active_lora enable_mixed_moe_lora_format
    ray_workers_use_nsight num_gpu_blocks_override model_loader_extra_config ignore_patterns
    enable_chunked_prefill disable_chunked_mm_input scheduler_reserve_full_isl prefill_schedule_interval
    watermark disable_hybrid_kv_cache_manager structured_outputs_config reasoning_parser
    reasoning_parser_plugin speculative_config spec_method spec_model spec_tokens diffusion_config
    show_hidden_metrics_for_version otlp_traces_endpoint collect_detailed_traces kv_cache_metrics
    kv_cache_metrics_sample cudagraph_metrics enable_layerwise_nvtx_tracing enable_mfu_metrics
    enable_logging_iteration_details jit_monitor_verbose enable_mm_processor_stats scheduling_policy
    scheduler_cls pooler_config compilation_config attention_config mamba_config kernel_config
    enable_flashinfer_autotune worker_cls worker_extension_cls profiler_config kv_transfer_config
    kv_events_config ec_transfer_config reasoning_config generation_config enable_sleep_mode
    enable_cumem_allocator override_generation_config model_impl override_attention_dtype
    attention_backend calculate_kv_scales kv_cache_dtype_skip_layers mamba_cache_dtype
    mamba_ssm_cache_dtype mamba_block_size mamba_cache_mode mamba_backend
    enable_mamba_cache_stochastic_rounding mamba_cache_philox_rounds additional_config use_tqdm_on_load
    pt_load_map_location logits_processors async_scheduling stream_interval kv_sharing_fast_prefill
    optimization_level performance_mode kv_offloading_size kv_offloading_backend tokens_only
    shutdown_timeout weight_transfer_config fail_on_environ_validation gdn_prefill_backend
""".split()


@dataclasses.dataclass
class SamplingParams:
    """The `SamplingParams` keywords the project sends (a strict dataclass: another name is a TypeError)."""

    n: int
    temperature: float
    top_p: float
    max_tokens: int
    seed: int
    stop_token_ids: list = dataclasses.field(default_factory=list)
    skip_special_tokens: bool = True


def _llm_signature() -> inspect.Signature:
    keyword = inspect.Parameter.KEYWORD_ONLY
    return inspect.Signature(
        [
            inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            inspect.Parameter("model", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str),
            *(inspect.Parameter(name, keyword, default=None) for name in LLM_KEYWORDS),
            inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD),
        ]
    )


def module() -> types.ModuleType:
    """A fresh `vllm` module: `LLM`, `EngineArgs`, `SamplingParams`, `__version__`; `LLM.instances` lists
    the engines built, each with `engine_args` (what vLLM would run with) and `calls` (its generate calls)."""
    engine_args = dataclasses.make_dataclass(
        "EngineArgs", [(name, Any, dataclasses.field(default=None)) for name in ENGINE_ARGS_FIELDS]
    )

    class LLM:
        instances: list = []

        def __init__(self, model, **kwargs):
            kwargs.pop("chat_template", None)  # the one keyword LLM keeps for itself
            self.engine_args = engine_args(model=model, **kwargs)  # TypeError for a name vLLM lacks
            from transformers import AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(model)  # the model's own, as vLLM loads it
            self.calls = []
            LLM.instances.append(self)

        __init__.__signature__ = _llm_signature()

        def get_tokenizer(self):
            return self.tokenizer

        def generate(self, inputs, params, use_tqdm=True):
            self.calls.append((inputs, params))
            outputs = []
            for request, p in zip(inputs, params, strict=True):
                completions = [
                    types.SimpleNamespace(
                        text=f"s{p.seed % 97}-{k}",
                        token_ids=[5] * (k + 1),
                        finish_reason="stop" if k else "length",
                    )
                    for k in range(p.n)
                ]
                outputs.append(
                    types.SimpleNamespace(prompt_token_ids=request["prompt_token_ids"], outputs=completions)
                )
            return outputs

    vllm = types.ModuleType("vllm")
    vllm.LLM, vllm.EngineArgs, vllm.SamplingParams = LLM, engine_args, SamplingParams
    vllm.__version__ = VERSION
    # `vllm.platforms.current_platform`: the platform vLLM detected (a CUDA build on a GPU: not the CPU)
    vllm.platforms = types.ModuleType("vllm.platforms")
    vllm.platforms.current_platform = types.SimpleNamespace(is_cpu=lambda: False)
    return vllm
