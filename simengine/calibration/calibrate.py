"""Fold measured GEMM and NCCL results into a SystemSpec's efficiency model.

``calibrate(system, gemm_csv, nccl_logs)`` returns ``system.model_copy(update=…)`` with
``efficiency.gemm_table`` (every format) and ``efficiency.collective_table`` (one alpha-beta fit
per collective kind and tier); a SimuMax/B200 file also sets ``attention_fwd`` /
``attention_bwd`` (converted to causal FLOPs, see :mod:`.b200`), ``grouped_gemm``, ``hbm`` and
``kernel_overhead_us``. ``calibrate_with_summary`` also returns a :class:`CalibrationSummary`
(counts, each fit, warnings) for the UI.

Choices:
* GEMM rows of dtypes other than bf16 / fp8 / nvfp4 are skipped (simengine trains in those, and
  fp32 sweeps usually run on TF32 tensor cores, whose peak ``PeakTflops`` does not carry).
* Efficiencies are re-expressed against the system's peaks (same achieved TFLOP/s).
* When several logs measure the same collective on the same tier, the table with the most
  ranks wins, then the higher fitted busbw (a second, much slower table in the same file is a
  sick process or a contended run); the others are listed in the summary as not used.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, ValidationError

from ..config.system import Efficiency, SystemSpec
from ..errors import ConfigError, from_pydantic
from .formats.attention_csv import read_attention_csv
from .formats.grouped_gemm_csv import read_grouped_gemm_csv
from .formats.memory_csv import read_memory_csv
from .formats.simumax_op_table import B200Tables, attention_efficiency_from_b200, grouped_gemm_mean, read_b200_op_efficiency
from .fit import collective_point, fit_alpha_beta, fit_table, tier_bandwidth_gbs, tier_for
from .gemm import load_gemm_csv
from .formats.nccl_tests import parse_nccl_log
from .curves import attention_curve, collective_curve, gemm_curve
from .provenance import GEMM_FIT_WARN, Provenance, gemm_holdout_error, read_input

Source = str | bytes | os.PathLike
LogsLike = Mapping[str, Source] | Sequence[Source | tuple[str, Source]]

TRAINING_DTYPES = ("bf16", "fp8", "nvfp4")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CollectiveFit(_Frozen):
    """One fitted nccl-tests table."""

    source: str
    table: int
    kind: str
    n_ranks: int | None
    n_hosts: int | None
    gpu: str
    tier: str
    alpha_us: float
    busbw_gbs: float
    max_measured_busbw_gbs: float
    tier_bandwidth_gbs: float
    efficiency: float
    n_points: int
    rel_rms_error: float
    used: bool


class CalibrationSummary(_Frozen):
    gemm_format: str | None = None
    gemm_points: int = 0
    gemm_points_by_dtype: dict[str, int] = {}
    gemm_rows_skipped: dict[str, int] = {}
    attention_rows: int = 0
    grouped_gemm_rows: int = 0
    scalars: dict[str, float] = {}
    collective_fits: tuple[CollectiveFit, ...] = ()
    warnings: tuple[str, ...] = ()
    provenance: tuple[Provenance, ...] = ()
    curves: dict[str, tuple[dict, ...]] = {}   # plot data (calibration/curves.py)


def calibrate(
    system: SystemSpec,
    gemm_csv: Source | None = None,
    nccl_logs: LogsLike | None = None,
    **tables: Source | None,
) -> SystemSpec:
    """New SystemSpec with measured efficiencies (see module docstring and
    :func:`calibrate_with_summary`)."""
    return calibrate_with_summary(system, gemm_csv, nccl_logs, **tables)[0]


def calibrate_with_summary(
    system: SystemSpec,
    gemm_csv: Source | None = None,
    nccl_logs: LogsLike | None = None,
    *,
    attention_csv: Source | None = None,
    grouped_gemm_csv: Source | None = None,
    memory_csv: Source | None = None,
) -> tuple[SystemSpec, CalibrationSummary]:
    """Calibrate ``system`` from any of: a GEMM sweep, nccl-tests logs, an attention sweep, a
    grouped-GEMM sweep. Each may be the content (text or bytes) or a ``pathlib.Path``;
    ``nccl_logs`` is a mapping name → content, or a list of contents / paths / (name, content)
    pairs (names are hints such as ``…_all_gather_16gpu.log``). Bad input raises ``ConfigError``
    naming the field and row; pydantic's ValidationError never escapes."""
    eff_update: dict[str, object] = {}
    summary: dict[str, object] = {}
    warnings: list[str] = []
    sources: list[str] = []
    prov: list[Provenance] = []
    steps = [
        (gemm_csv is not None, lambda: _gemm(system, gemm_csv, eff_update, summary, warnings, sources, prov)),
        (attention_csv is not None, lambda: _attention(system, attention_csv, eff_update, summary, sources, prov)),
        (grouped_gemm_csv is not None, lambda: _grouped(system, grouped_gemm_csv, eff_update, summary, sources, prov)),
        (memory_csv is not None, lambda: _memory(system, memory_csv, eff_update, warnings, sources, prov)),
        (bool(nccl_logs), lambda: _nccl(system, _log_items(nccl_logs or []), eff_update, summary, warnings, sources, prov)),
    ]
    issues: list[tuple[str, str]] = []   # every input's problems at once (a bad sweep hid the logs' own)
    for given, step in steps:
        if not given:
            continue
        try:
            step()
        except ConfigError as exc:
            issues += exc.issues
        except ValidationError as exc:  # a value a reader let through but the schema refuses
            issues += from_pydantic(exc, "efficiency").issues
    if issues:
        raise ConfigError(issues)
    if sources:
        prior = system.efficiency.source
        eff_update["source"] = ("; ".join(([prior] if prior else []) + ["calibrated: " + "; ".join(sources)]))[:2000]
    efficiency = system.efficiency.model_copy(update=eff_update)
    # model_copy skips validation: re-validate so a bad value can never reach the engine.
    try:
        efficiency = Efficiency.model_validate(efficiency.model_dump())
    except ValidationError as exc:
        raise ConfigError([("efficiency", f"calibrated values invalid: {str(exc).splitlines()[0]}")]) from None
    summary["warnings"] = tuple(dict.fromkeys(warnings))   # once each: a log's tables share its GPU warning
    summary["provenance"] = tuple(prov)
    collected = summary.pop("curves", {})  # set only by _nccl, always a dict
    curves: dict[str, tuple[dict, ...]] = dict(collected) if isinstance(collected, dict) else {}
    if "gemm_table" in eff_update:
        curves["gemm"] = tuple(gemm_curve(efficiency.gemm_table))
    if "attention_table" in eff_update:
        curves["attention"] = tuple(attention_curve(efficiency.attention_table))
    summary["curves"] = curves
    return system.model_copy(update={"efficiency": efficiency}), CalibrationSummary.model_validate(summary)


def _log_items(logs: LogsLike) -> list[tuple[str, Source]]:
    """A mapping or a list of logs → [(name, source)]; anything else is a ConfigError."""
    if isinstance(logs, Mapping):
        return [(str(k), v) for k, v in logs.items()]
    if isinstance(logs, (str, bytes, os.PathLike)):
        logs = [logs]
    if not isinstance(logs, Sequence):
        raise ConfigError([("nccl_log", f"expected a list or a mapping of logs, got {type(logs).__name__}")])
    out: list[tuple[str, Source]] = []
    for i, item in enumerate(logs):
        if isinstance(item, tuple) and len(item) == 2:
            out.append((str(item[0]), item[1]))
        elif isinstance(item, os.PathLike):
            out.append((os.fspath(item).rsplit("/", 1)[-1], item))
        else:
            out.append((f"log {i + 1}", item))  # type: ignore[arg-type]
    return out


def _repeated_shapes(points) -> str:
    """A warning when the sweep measured one shape more than once at different efficiencies (two
    runs of a sweep concatenated, a noisy rerun): the table keeps both and its interpolation reads
    whichever it meets, so the user should know; '' otherwise."""
    seen: dict[tuple, list[float]] = {}
    for p in points:
        seen.setdefault((p.m, p.n, p.k, p.b, p.dtype, p.layout), []).append(p.efficiency)
    differ = {k: v for k, v in seen.items() if len(v) > 1 and max(v) > min(v) * (1 + 1e-6)}
    if not differ:
        return ""
    (m, n, k, b, dtype, _), effs = next(iter(differ.items()))
    return (f"{len(differ):,} GEMM shape(s) measured more than once at different efficiencies (e.g. {m}x{n}x{k}"
            f"{f' b{b}' if b > 1 else ''} {dtype}: {', '.join(f'{e:.3g}' for e in effs[:4])}); each measurement is kept, "
            "so shapes near them are priced from whichever the interpolation meets: keep one run of the sweep")


def _gemm(system, gemm_csv, eff_update, summary, warnings, sources, prov) -> None:
    text, name, digest = read_input(gemm_csv, "gemm_csv")
    load = load_gemm_csv(text, peak_tflops=system.gpu.peak_tflops, dtypes=TRAINING_DTYPES)
    held_out = gemm_holdout_error(load.points)
    prov.append(Provenance(target="efficiency.gemm_table", file=name, sha256=digest, rows_used=len(load.points),
                           fit_error=held_out, method=f"{load.format} GEMM table, log-shape interpolation; fit_error = "
                           "|relative error| of the time of held-out points, time-weighted mean"))
    if held_out is not None and held_out > GEMM_FIT_WARN:
        warnings.append(f"{name or 'GEMM sweep'}: shapes left out of the table are predicted {held_out * 100:.0f} % off "
                        "(time-weighted): its points are too sparse or too noisy to interpolate between; GEMMs of "
                        "unmeasured shapes stay uncertain")
    by_dtype: dict[str, int] = {}
    for p in load.points:
        by_dtype[p.dtype] = by_dtype.get(p.dtype, 0) + 1
    if (dup := _repeated_shapes(load.points)):
        warnings.append(dup)
    summary.update(gemm_format=load.format, gemm_points=len(load.points), gemm_points_by_dtype=by_dtype,
                   gemm_rows_skipped=dict(load.skipped_dtypes))
    warnings.extend(load.notes)
    if load.skipped_dtypes:
        warnings.append(f"GEMM rows of dtype {', '.join(sorted(load.skipped_dtypes))} skipped (simengine trains in bf16, fp8 or nvfp4)")
    if load.points:
        eff_update["gemm_table"] = load.points
    sources.append(f"{load.format} GEMM table ({len(load.points)} shapes)")
    if isinstance(load.b200, B200Tables):
        scalars = b200_scalars(load.b200, system.gpu.hbm_bandwidth_gbs)
        eff_update.update(scalars)
        eff_update.update(b200_shape_tables(load.b200))
        summary.update(attention_rows=len(load.b200.attention), grouped_gemm_rows=len(load.b200.grouped), scalars=scalars)


def b200_scalars(tables: B200Tables, hbm_bandwidth_gbs: float | None = None) -> dict[str, float]:
    """The scalar efficiencies a SimuMax/B200 file provides, in simengine's conventions.

    attention_fwd/bwd: mean over all measured shapes of efficiency × (s+1)/(2s) (causal FLOPs;
    :mod:`.b200`) — SimuMax's ``op_default`` (the plain mean) converted row by row. grouped_gemm: mean of the measured grouped GEMMs (SimuMax's
    own default). hbm: achieved bytes/s of the ``default`` memory-bound entry (gbps applied as GiB/s)
    / the GPU's HBM bandwidth (the file's nominal gbps when not given). kernel_overhead_us:
    that entry's per-kernel latency (SimuMax adds it to every kernel's memory time).
    """
    out: dict[str, float] = {}
    for phase in ("fwd", "bwd"):
        v = attention_efficiency_from_b200(tables, phase=phase, contiguous=None)  # type: ignore[arg-type]
        if v is not None:
            out[f"attention_{phase}"] = min(v, 1.0)
    if "matmul" in tables.defaults:
        # the plain-GEMM level the grouped-GEMM and fp8 factors are relative to (cost/compute.py)
        out["gemm"] = min(tables.defaults["matmul"], 1.0)
    g = grouped_gemm_mean(tables)
    if g is not None:
        out["grouped_gemm"] = min(g, 1.0)
    mem = tables.mem_bw.get("default")
    if mem is not None:
        nominal = hbm_bandwidth_gbs or mem.gbps
        out["hbm"] = min(mem.achieved_gbs / nominal, 1.0)
        out["kernel_overhead_us"] = mem.latency_us
    return out


def b200_shape_tables(tables: B200Tables) -> dict[str, tuple]:
    """Per-shape attention (converted to causal FLOPs) and grouped-GEMM tables of a B200 file.
    SimuMax keys grouped GEMMs by the forward shape in every stage (M tokens, N out, K in)."""
    from ..config.system import AttentionPoint, GroupedGemmPoint

    att = tuple(AttentionPoint(phase=r.phase, batch=r.batch, seq_len=r.seq_len, heads=r.head_num, kv_heads=r.kv_head_num,
                               d_qk=r.qk_head_dim, d_v=r.v_head_dim, efficiency=min(r.simengine_efficiency(True), 1.0))
                for r in tables.attention)
    layout = {"fwd": "TN", "bwd_grad_act": "NN", "bwd_grad_w": "NT"}
    grp = tuple(GroupedGemmPoint(layout=layout[r.stage], groups=r.ng, m=r.m, n=r.n, k=r.k, efficiency=min(r.efficiency, 1.0))
                for r in tables.grouped if r.stage in layout and r.dtype == "bf16")
    return {"attention_table": att, "grouped_gemm_table": grp}


def load_b200_system_efficiency(path: str | os.PathLike, hbm_bandwidth_gbs: float | None = None) -> Efficiency:
    """An ``Efficiency`` from the SimuMax B200 file alone (for the validation tests): its GEMM
    table and the scalars of :func:`b200_scalars`; everything else keeps simengine's defaults."""
    tables = read_b200_op_efficiency(path)
    update: dict[str, object] = dict(b200_scalars(tables, hbm_bandwidth_gbs))
    update["gemm_table"] = tuple(p for p in tables.matmul if p.dtype in TRAINING_DTYPES)
    update.update(b200_shape_tables(tables))
    update["source"] = f"SimuMax B200 op efficiencies ({len(tables.matmul)} GEMM shapes, {len(tables.attention)} attention)"
    return Efficiency(**update)  # type: ignore[arg-type]


def _attention(system, source, eff_update, summary, sources, prov) -> None:
    text, name, digest = read_input(source, "attention_csv")
    pts = read_attention_csv(text, peak_tflops=system.gpu.peak_tflops.bf16)
    if not pts:
        raise ConfigError([("attention_csv", "no rows")])
    eff_update["attention_table"] = pts
    for phase in ("fwd", "bwd"):
        vals = [p.efficiency for p in pts if p.phase == phase]
        if vals:  # the scalar default: the mean of the measured shapes (SimuMax's op_default convention)
            eff_update[f"attention_{phase}"] = min(sum(vals) / len(vals), 1.0)
    summary["attention_rows"] = len(pts)
    sources.append(f"attention sweep ({len(pts)} shapes)")
    prov.append(Provenance(target="efficiency.attention_table", file=name, sha256=digest, rows_used=len(pts),
                           method="measured shapes, nearest shape wins"))


def _grouped(system, source, eff_update, summary, sources, prov) -> None:
    text, name, digest = read_input(source, "grouped_gemm_csv")
    pts = read_grouped_gemm_csv(text, peak_tflops=system.gpu.peak_tflops.bf16)
    if not pts:
        raise ConfigError([("grouped_gemm_csv", "no rows")])
    eff_update["grouped_gemm_table"] = pts
    eff_update["grouped_gemm"] = min(sum(p.efficiency for p in pts) / len(pts), 1.0)
    summary["grouped_gemm_rows"] = len(pts)
    sources.append(f"grouped-GEMM sweep ({len(pts)} shapes)")
    prov.append(Provenance(target="efficiency.grouped_gemm_table", file=name, sha256=digest, rows_used=len(pts),
                           method="measured shapes, nearest shape wins"))


def _memory(system, source, eff_update, warnings, sources, prov) -> None:
    """hbm and kernel_overhead_us from a copy sweep: the alpha-beta fit (fit.py) of
    t = overhead + 2·bytes / bandwidth, over copies ≥ 1 MiB; efficiency = bandwidth / the GPU's HBM
    bandwidth (cost/compute.py prices memory-bound kernels as bytes / (HBM · hbm) + overhead)."""
    text, name, digest = read_input(source, "memory_csv")
    rows = read_memory_csv(text)
    try:
        fit = fit_alpha_beta([b for b, _ in rows], [t * 1e6 for _, t in rows], 2.0)
    except ConfigError as exc:
        raise ConfigError([("memory_csv", m) for _, m in exc.issues]) from None
    eff = fit.busbw_gbs / system.gpu.hbm_bandwidth_gbs
    if not 1e-4 <= eff <= 1.0:
        raise ConfigError([("memory_csv", f"measured {fit.busbw_gbs:.4g} GB/s is {eff:.3g} × the GPU's HBM bandwidth "
                                          f"{system.gpu.hbm_bandwidth_gbs:g} GB/s; outside [1e-4, 1]")])
    eff_update["hbm"] = eff
    eff_update["kernel_overhead_us"] = min(fit.alpha_us, 1e4)
    if fit.note:
        warnings.append(f"{name or 'memory sweep'}: {fit.note}")
    sources.append(f"memory sweep ({fit.n_points} sizes)")
    prov.append(Provenance(target="efficiency.hbm", file=name, sha256=digest, rows_used=fit.n_points,
                           fit_error=fit.rel_rms, method="alpha-beta fit of copy time; fit_error = RMS relative error"))


def _nccl(system, nccl_logs, eff_update, summary, warnings, sources, prov) -> None:
    fits: list[CollectiveFit] = []
    points: dict[tuple[str, str], tuple[tuple, object, int]] = {}
    digests: dict[str, str] = {}
    curve_rows: list[tuple[int, list[dict]]] = []
    bad: list[tuple[str, str]] = []   # every unreadable log named, not only the first
    for name, content in nccl_logs:
        label = str(name)[:200]
        try:
            text, _, digests[label] = read_input(content, "nccl_log")
            log = parse_nccl_log(text, name=label)
        except ConfigError as exc:  # named once: the log's own messages may already start with its name
            bad += [(f, m if m.startswith(f"{label}: ") else f"{label}: {m}") for f, m in exc.issues]
            continue
        if bad:
            continue
        warnings.extend(f"{label}: {w}" for w in log.warnings)
        for ti, table in enumerate(log.tables):
            got = _fit_one(system, label, ti + 1, table, warnings)
            if got is None:
                continue
            fit, point, tier, bw = got
            curve_rows.append((len(fits), collective_curve(label, ti + 1, table, fit, tier, False)))
            fits.append(CollectiveFit(
                source=label, table=ti + 1, kind=table.collective, n_ranks=table.n_ranks, n_hosts=table.n_hosts, gpu=table.gpu,
                tier=tier, alpha_us=fit.alpha_us, busbw_gbs=fit.busbw_gbs, max_measured_busbw_gbs=max(r.busbw_gbs for r in table.rows),
                tier_bandwidth_gbs=bw, efficiency=point.efficiency, n_points=fit.n_points,
                rel_rms_error=fit.rel_rms, used=False))
            rank, key = (table.n_ranks, fit.busbw_gbs), (table.collective, tier)
            if key not in points or rank > points[key][0]:
                points[key] = (rank, point, len(fits) - 1)
    if bad:
        raise ConfigError(bad)
    if not points:
        raise ConfigError([("nccl_log", "no collective could be fitted from the logs given")])
    used = {i for _, _, i in points.values()}
    fits = [f.model_copy(update={"used": i in used}) for i, f in enumerate(fits)]
    eff_update["collective_table"] = tuple(p for _, p, _ in sorted(points.values(), key=lambda v: v[2]))
    prov.extend(Provenance(target=f"efficiency.collective_table[{f.kind},{f.tier}]", file=f.source,
                           sha256=digests.get(f.source, ""), rows_used=f.n_points, fit_error=f.rel_rms_error,
                           method=f"alpha-beta fit of table {f.table} ({f.n_ranks} ranks); fit_error = RMS "
                           "relative error of the time") for f in fits if f.used)
    summary["collective_fits"] = tuple(fits)
    summary["curves"] = {"collectives": tuple({**r, "used": i in used} for i, rows in curve_rows for r in rows)}
    sources.append(f"nccl-tests ({len(nccl_logs)} log(s), {len(points)} fits)")


def _fit_one(system, label: str, no: int, table, warnings: list[str]):
    """(fit, CollectivePoint, tier, tier bandwidth) of one parsed table, or None (the reason in
    ``warnings``)."""
    where = f"{label}: table {no} ({table.collective})"
    warnings.extend(f"{label}: {w}" for w in table.warnings)
    if not table.supported:
        warnings.append(f"{label}: table {no}: {table.collective} is not modelled; skipped")
        return None
    if table.n_ranks is None:
        warnings.append(f"{label}: table {no}: rank count unknown; skipped")
        return None
    try:
        fit = fit_table(table)
    except ConfigError as exc:
        warnings.append(f"{where}: not fitted: {exc}")
        return None
    if q := fit.quality_warning(max(r.busbw_gbs for r in table.rows)):
        warnings.append(f"{where}: {q}")
    if fit.note:
        warnings.append(f"{where}: {fit.note}")
    if table.gpu and not _same_gpu(table.gpu, system.gpu.name):
        warnings.append(f"{label}: measured on {table.gpu}, but the system's GPU is {system.gpu.name}")
    tier = tier_for(table.n_ranks, system, table.n_hosts)
    per_domain = table.n_ranks // table.n_hosts if table.n_hosts else min(table.n_ranks, system.domain)
    bw = tier_bandwidth_gbs(system, tier, per_domain)
    point, clip = collective_point(table.collective, tier, fit, bw, table.n_ranks)
    if clip:
        warnings.append(f"{label}: table {no}: {clip}")
    if point is None:
        warnings.append(f"{where}: busbw {fit.busbw_gbs:.3g} GB/s is below 1e-4 × the {tier} bandwidth {bw:g} GB/s; "
                        "not used")
        return None
    return fit, point, tier, bw


_MODEL = re.compile(r"\b([A-Z]{1,3}\d{2,4}[A-Z]?)\b")


def _same_gpu(device_name: str, system_gpu: str) -> bool:
    """Model numbers (H100, A100, B200, MI300X …) shared by the two names; True when unsure."""
    a, b = set(_MODEL.findall(device_name.upper())), set(_MODEL.findall(system_gpu.upper()))
    return not a or not b or bool(a & b)
