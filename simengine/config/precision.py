"""The GEMM precision's checks (StrategySpec.dtype, fp8_recipe, fp8_param_gather): which stacks run
which recipe, and what the GPU must have. No parallel layout changes them: ``check_scenario`` and the
search's space (search/make.py) read them from here."""

from __future__ import annotations

from .generation import gpu_generation
from .strategy import StrategySpec, fp8_gather_min_zero
from .system import GPUSpec


def fp8_param_checks(s: StrategySpec) -> list[tuple[str, str]]:
    """Megatron-LM arguments.py validate_args: "--fp8-param-gather only supported with distributed
    optimizer, torch fsdp2, megatron fsdp" (zero_stage >= 1 here); FP8 primary weights need an FP8
    recipe (TE ``fp8_model_init``) and TransformerEngine's modules. On the torch stacks it is
    torchao's FSDP2 float8 all-gather: FSDP2 only (torchtitan applies it in ``fully_shard``'s
    pre-all-gather hook, torchao/float8/fsdp_utils.py ``WeightWithDynamicFloat8CastTensor``) and
    tensorwise only (torchao/float8/config.py ``Float8LinearConfig.__post_init__``: "float8
    all-gather only supports tensorwise scaling granularity")."""
    f = "strategy.fp8_param_gather"
    if not s.fp8_param_gather:
        return []
    out = []
    if s.dtype == "nvfp4":   # Megatron's --fp4-param-gather (a stack without NVFP4 is refused by precision_issues)
        if s.zero_stage < 1:
            out.append((f, "fp8_param_gather (Megatron --fp4-param-gather under nvfp4) needs the distributed optimizer or FSDP (zero_stage >= 1)"))
        return out
    if s.dtype != "fp8":
        out.append((f, f"fp8_param_gather needs dtype='fp8' or 'nvfp4' (dtype={s.dtype!r})"))
    short = s.zero_stage < fp8_gather_min_zero(s.framework)
    if s.framework == "megatron-te":
        if short:
            out.append((f, "fp8_param_gather needs the distributed optimizer or FSDP (zero_stage >= 1; Megatron-LM refuses it otherwise)"))
        return out
    if short:
        out.append((f, f"on framework={s.framework!r} fp8_param_gather is torchao's FSDP2 float8 all-gather: it needs zero_stage=3"))
    if s.fp8_recipe != "tensorwise":
        out.append((f, f"torchao's float8 all-gather only supports tensorwise scaling (fp8_recipe={s.fp8_recipe!r})"))
    return out


def fp8_recipe_checks(s: StrategySpec, gpu_name: str) -> list[tuple[str, str]]:
    """The recipes each stack runs. Rowwise scaling is torchao's (torchao/float8/config.py
    ``Float8LinearRecipeName.ROWWISE``), which the torch stacks run; TransformerEngine's are per-tensor
    delayed and current scaling, block and MX scaling (transformer_engine/common/recipe/__init__.py;
    Megatron-Core transformer_config.py ``fp8_recipe``), none of them rowwise. MXFP8 is Blackwell's
    (transformer_engine/pytorch/fp8.py ``check_mxfp8_support``: compute capability 10.0 or later); a GPU
    whose name names no known generation (a what-if design) may run it."""
    if s.dtype != "fp8":
        return []
    f, r = "strategy.fp8_recipe", s.fp8_recipe
    if r == "rowwise" and s.framework not in ("torch-native", "torch-compile"):
        return [(f, f"fp8_recipe='rowwise' is torchao's Float8 recipe (framework torch-native or "
                    f"torch-compile); framework={s.framework!r} has no rowwise recipe")]
    if r in ("delayed", "mxfp8") and s.framework != "megatron-te":
        return [(f, f"fp8_recipe={r!r} is a TransformerEngine recipe (framework megatron-te); "
                    f"framework={s.framework!r} runs tensorwise or rowwise scaling")]
    if r == "mxfp8" and gpu_generation(gpu_name) not in ("blackwell", "unknown"):   # a hypothetical GPU may have them
        return [(f, f"fp8_recipe='mxfp8' needs a Blackwell GPU (MXFP8 GEMMs); {gpu_name} is not one: "
                    "use tensorwise or delayed")]
    return []


def precision_issues(dtype: str, framework: str, gpu: GPUSpec) -> list[tuple[str, str]]:
    """The GEMM precision against the GPU and the software stack, which no parallel layout changes
    (``check_scenario``'s; the search refuses its whole space on one). FP8 needs an FP8 peak.
    NVFP4 is TransformerEngine's recipe (transformer_engine/common/recipe/__init__.py
    ``NVFP4BlockScaling``, run by Megatron-Core's ``fp4``/``fp4_recipe``), on GPUs with FP4 tensor
    cores (the FP4 peak says so: a what-if GPU may have one)."""
    out = []
    if dtype == "nvfp4" and framework != "megatron-te":
        out.append(("strategy.framework", f"dtype='nvfp4' is TransformerEngine's NVFP4 recipe (framework megatron-te); "
                                          f"framework={framework!r} has no FP4 training recipe"))
    if dtype != "bf16" and gpu.peak_tflops.of(dtype) is None:
        field = {"fp8": "fp8", "nvfp4": "fp4"}[dtype]
        out.append(("strategy.dtype", f"dtype={dtype!r} but system.gpu.peak_tflops.{field} is not set ({gpu.name} has no "
                                      f"{field.upper()} peak)"))
    return out
