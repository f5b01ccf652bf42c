"""Hardware profiles as JSON (CONTRACT.md "Hardware profile"): read, validate, fill, write.

A profile given with `--hardware FILE` usually describes another machine, often sparsely
({"gpus": [{"name": "RTX 3090"}]}): GPU figures left out come from the bundled table by
name, CPU figures left out are detected on this machine. Anything malformed is refused
with one sentence that names the field and says what is expected.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from rooflight.errors import BadInputError

from .apple import metal_working_set_bytes
from .backend import DEFAULT_BACKEND, backend_for_gpus
from .enrich import table_figures
from .gpu_table import lookup_gpu, normalize, shared_memory_bytes, similar_gpu_names
from .intel import integrated_memory_bytes
from .profile import CPUInfo, GPUInfo, HardwareProfile, RemoteMachine
from .remote import placeholder_cpu

_IDENTITY = {"name", "index", "vendor"}  # keys that say which GPU, not what it can do
BACKENDS = ("cuda", "rocm", "metal", "vulkan", "sycl", "cpu")
VENDORS = tuple(DEFAULT_BACKEND)
_NAME_HINTS = {
    "nvidia": {"nvidia", "geforce", "rtx", "gtx", "quadro", "tesla"},
    "amd": {"amd", "radeon", "instinct", "rx", "mi"},
    "intel": {"intel", "arc"},
    "apple": {"apple"},
}


class _Fields:
    """Typed access to one JSON object, with error messages that name the field."""

    def __init__(self, d: dict[str, Any], where: str, origin: str) -> None:
        self.d, self.where, self.origin = d, where, origin

    def fail(self, key: str, expected: str) -> BadInputError:
        value = self.d.get(key)
        shown = f"the string {value!r}" if isinstance(value, str) else json.dumps(value)
        return BadInputError(
            f"In {self.origin}, {self.where}{key} must be {expected}, not {shown}."
        )

    def has(self, key: str) -> bool:
        return self.d.get(key) is not None  # null and missing both mean "fill this in"

    def int_(self, key: str, *, positive: bool = False) -> int | None:
        v = self.d.get(key)
        if v is None:
            return None
        if isinstance(v, float) and v.is_integer():
            v = int(v)  # 2.4e10 in JSON is a float
        if isinstance(v, bool) or not isinstance(v, int) or v < (1 if positive else 0):
            raise self.fail(key, "a positive whole number" if positive else "a whole number >= 0")
        return v

    def num(self, key: str) -> float | None:
        v = self.d.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise self.fail(key, "a number > 0")
        return float(v)

    def str_(self, key: str, choices: tuple[str, ...] | None = None) -> str | None:
        v = self.d.get(key)
        if v is None:
            return None
        if not isinstance(v, str) or not v.strip():
            raise self.fail(key, "a non-empty string")
        if choices is not None and v.strip().lower() not in choices:
            raise self.fail(key, "one of " + ", ".join(choices))
        return v.strip().lower() if choices is not None else v.strip()

    def bool_(self, key: str) -> bool | None:
        v = self.d.get(key)
        if v is None:
            return None
        if not isinstance(v, bool):
            raise self.fail(key, "true or false")
        return v

    def str_list(self, key: str) -> list[str] | None:
        v = self.d.get(key)
        if v is None:
            return None
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self.fail(key, "a list of strings")
        return list(v)


# -- CPU ------------------------------------------------------------------------------


def _cpu_from_dict(
    d: Any,
    origin: str,
    *,
    detect_if_missing: bool,
    measure_bandwidth: bool,
    cache_dir: str | os.PathLike[str] | None,
    warnings: list[str],
) -> CPUInfo:
    if d is None:
        d = {}
    if not isinstance(d, dict):
        raise BadInputError(f"In {origin}, cpu must be an object with the CPU's figures.")
    f = _Fields(d, "cpu.", origin)
    name, arch = f.str_("name"), f.str_("arch")
    cores, threads = f.int_("cores", positive=True), f.int_("threads", positive=True)
    isa = f.str_list("isa")
    total, avail = f.int_("ram_total_bytes"), f.int_("ram_available_bytes")
    bandwidth, source = f.num("ram_bandwidth_gbs"), f.str_("ram_bandwidth_source")
    max_freq = f.num("max_freq_mhz")
    amx_weights = f.bool_("amx_weights")
    if total is not None and avail is not None and avail > total:
        raise BadInputError(
            f"In {origin}, cpu.ram_available_bytes ({avail}) is larger than "
            f"cpu.ram_total_bytes ({total})."
        )

    here: CPUInfo | None = None

    def local() -> CPUInfo:
        nonlocal here
        if here is None:
            from .cpu import detect_cpu

            here, more = detect_cpu()
            warnings.extend(more)
        return here

    if not detect_if_missing:
        missing = [
            k
            for k, v in (("cores", cores), ("threads", threads), ("ram_total_bytes", total))
            if v is None
        ]
        if missing:
            raise BadInputError(
                f"In {origin}, the cpu section lacks {', '.join(missing)}; give them or let "
                "Rooflight detect this machine's CPU."
            )
    else:
        if name is None:
            name = local().name
        if cores is None:
            cores = local().cores
        if threads is None:
            threads = max(local().threads, cores)
        if isa is None:
            isa = list(local().isa)
        if total is None:
            total = local().ram_total_bytes
            avail = avail if avail is not None else local().ram_available_bytes
        if max_freq is None:
            max_freq = local().max_freq_mhz
        if arch is None:
            arch = local().arch
    assert cores is not None and threads is not None and total is not None
    if avail is None:
        avail = total  # like VRAM: a profile that says nothing means all of it is free
    if bandwidth is not None:
        source = source or "profile"
    elif detect_if_missing and measure_bandwidth:
        from .bandwidth import ram_bandwidth

        me = local()  # the measurement is of THIS machine, so it is cached under its key
        bandwidth, source, more = ram_bandwidth(
            me.name, me.ram_total_bytes, me.cores, cache_dir_override=cache_dir
        )
        warnings.extend(more)
    else:
        source = "unknown"
    return CPUInfo(
        name=name or "unknown CPU",
        cores=cores,
        threads=threads,
        isa=tuple(isa or ()),
        ram_total_bytes=total,
        ram_available_bytes=min(avail, total),
        ram_bandwidth_gbs=bandwidth,
        ram_bandwidth_source=source or "unknown",
        max_freq_mhz=max_freq,
        arch=arch or "",
        amx_weights=amx_weights,
    )


# -- GPUs ------------------------------------------------------------------------------


def _guess_vendor(name: str) -> str | None:
    tokens = set(normalize(name)) | set(name.lower().split())
    for vendor, hints in _NAME_HINTS.items():
        if tokens & hints:
            return vendor
    return None


def _gpu_from_dict(d: Any, position: int, origin: str, warnings: list[str]) -> GPUInfo:
    if not isinstance(d, dict):
        raise BadInputError(
            f'In {origin}, gpus[{position}] must be an object such as {{"name": "RTX 3090"}}.'
        )
    f = _Fields(d, f"gpus[{position}].", origin)
    name = f.str_("name")
    if name is None:
        raise BadInputError(
            f'In {origin}, gpus[{position}] has no "name"; give the GPU\'s name, for example '
            '"RTX 3090".'
        )
    index = f.int_("index")
    vendor = f.str_("vendor", VENDORS)
    total, free = f.int_("vram_total_bytes"), f.int_("vram_free_bytes")
    bandwidth, fp16 = f.num("bandwidth_gbs"), f.num("fp16_tflops")
    unified = f.bool_("unified_memory")
    sm_count = f.int_("sm_count", positive=True)
    pcie = f.num("pcie_gbs")
    source = f.str_("source")
    cc_raw = d.get("compute_capability")
    if cc_raw is not None and (
        isinstance(cc_raw, bool) or not isinstance(cc_raw, (str, int, float))
    ):
        raise f.fail("compute_capability", 'a string such as "8.9"')
    cc = str(cc_raw) if cc_raw is not None else None

    is_apple = vendor == "apple" or (vendor is None and unified is True)
    entry = lookup_gpu(name, None if is_apple or unified else total)
    if entry is None and (total is None or bandwidth is None):
        need = [
            k for k, v in (("vram_total_bytes", total), ("bandwidth_gbs", bandwidth)) if v is None
        ]
        near = similar_gpu_names(name)
        closest = f" (closest there: {', '.join(near)})" if near else ""
        raise BadInputError(
            f'In {origin}, the GPU "{name}" is not in Rooflight\'s GPU table{closest}; give its '
            f"{' and '.join(need)} (and fp16_tflops if known)."
        )
    filled: list[str] = []
    if entry is not None:
        if vendor is None:
            vendor = entry["vendor"]
        t = table_figures(entry, sm_count)
        if entry.get("devices_per_package", 1) > 1:
            warnings.append(
                f"{entry['name']} is {entry['devices_per_package']} GPUs to llama.cpp; "
                f"gpus[{position}] describes one of them (list it once per die)"
            )
        if total is None:
            total = t["memory_bytes"]
            if entry["vendor"] == "apple" and unified is not False:
                total = metal_working_set_bytes(total)  # the share Metal lets one process use
            elif entry["vendor"] == "intel" and entry.get("unified_memory") and unified is not False:
                total = integrated_memory_bytes(total)  # the share llama.cpp's backends report
            filled.append("vram_total_bytes")
        if bandwidth is None:
            bandwidth = t["bandwidth_gbs"]
            filled.append("bandwidth_gbs")
        if fp16 is None:
            fp16 = t["fp16_tflops"]
            filled.append("fp16_tflops")
        if sm_count is None and t["sm_count"]:
            sm_count = t["sm_count"]
        if cc is None and t["compute_capability"]:
            cc = t["compute_capability"]
    elif fp16 is None:
        warnings.append(
            f'The GPU "{name}" is not in Rooflight\'s GPU table and the profile gives no '
            "fp16_tflops, so prompt-processing estimates for it are rough"
        )
    if vendor is None:
        vendor = _guess_vendor(name)
        if vendor is None:
            raise BadInputError(
                f'In {origin}, the vendor of the GPU "{name}" is unknown; give "vendor" as one '
                f"of {', '.join(VENDORS)}."
            )
    if unified is None:
        unified = vendor == "apple"
    assert total is not None
    if free is not None and free > total:
        raise BadInputError(
            f"In {origin}, gpus[{position}].vram_free_bytes ({free}) is larger than its "
            f"vram_total_bytes ({total})."
        )
    if not filled:
        source = source or "profile"
    elif len(filled) == 3 and not {k for k, v in d.items() if v is not None} - _IDENTITY:
        source = "table"
    else:
        source = "profile+table"
    return GPUInfo(
        index=position if index is None else index,
        name=name,
        vendor=vendor,
        vram_total_bytes=total,
        vram_free_bytes=free,
        bandwidth_gbs=bandwidth,
        fp16_tflops=fp16,
        unified_memory=unified,
        compute_capability=cc,
        sm_count=sm_count,
        pcie_gbs=pcie,
        source=source,
    )


# -- remote RPC machines (issue 20) --------------------------------------------------------


def parse_endpoint(value: Any, where: str) -> str:
    """'host:port' as llama.cpp's --rpc takes it; one sentence when it is not."""
    if isinstance(value, str) and ":" in value:
        host, _, port = value.strip().rpartition(":")
        if host and port.isdigit() and 0 < int(port) < 65536:
            return f"{host}:{int(port)}"
    raise BadInputError(f'{where} must be "host:port" (for example "192.168.1.20:50052"), not {json.dumps(value)}.')


def _remote_from_dict(d: Any, position: int, origin: str, warnings: list[str]) -> RemoteMachine:
    where = f"remotes[{position}]"
    if not isinstance(d, dict):
        raise BadInputError(
            f'In {origin}, {where} must be an object such as {{"endpoint": "host:50052", '
            f'"gpus": [{{"name": "RTX 3090"}}]}}.'
        )
    f = _Fields(d, f"{where}.", origin)
    endpoint = parse_endpoint(d.get("endpoint"), f"In {origin}, {where}.endpoint")
    name = f.str_("name") or endpoint
    gpus_raw = d.get("gpus") or []
    if not isinstance(gpus_raw, list):
        raise BadInputError(f"In {origin}, {where}.gpus must be a list of GPU objects.")
    gpus = tuple(_gpu_from_dict(g, i, f"{origin} ({where})", warnings) for i, g in enumerate(gpus_raw))
    if d.get("cpu") is not None:
        cpu = _cpu_from_dict(d["cpu"], f"{origin} ({where})", detect_if_missing=False,
                             measure_bandwidth=False, cache_dir=None, warnings=warnings)
    elif gpus:
        cpu = placeholder_cpu(name)
    else:
        raise BadInputError(
            f"In {origin}, {where} lists neither gpus nor cpu; say what its rpc-server runs on."
        )
    backend = f.str_("backend", BACKENDS)
    if backend is None:
        backend = backend_for_gpus(gpus) if gpus else "cpu"
    sycl_f16 = _sycl_f16(f, backend, origin)
    link = f.num("link_gbps")
    rtt = d.get("rtt_ms")
    if rtt is not None and (isinstance(rtt, bool) or not isinstance(rtt, (int, float)) or rtt < 0):
        raise f.fail("rtt_ms", "a number >= 0")
    return RemoteMachine(endpoint=endpoint, name=name, cpu=cpu, gpus=gpus, backend=backend,
                         link_gbps=link if link is not None else 1.0,
                         rtt_ms=float(rtt) if rtt is not None else 0.5, sycl_f16=sycl_f16)


def _sycl_f16(fields: _Fields, backend: str, origin: str) -> bool | None:
    """A profile's (or remote machine's) sycl_f16: a SYCL build's GGML_SYCL_F16, or None."""
    sycl_f16 = fields.bool_("sycl_f16")
    if sycl_f16 is not None and backend != "sycl":
        raise BadInputError(f'In {origin}, {fields.where}sycl_f16 describes a SYCL build, but the backend is "{backend}".')
    return sycl_f16


def remotes_from_list(raw: Any, origin: str, warnings: list[str]) -> tuple[RemoteMachine, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise BadInputError(f"In {origin}, remotes must be a list of remote machine objects.")
    remotes = tuple(_remote_from_dict(r, i, origin, warnings) for i, r in enumerate(raw))
    seen = set()
    for r in remotes:
        if r.endpoint in seen:
            raise BadInputError(f"In {origin}, the endpoint {r.endpoint} is listed twice in remotes.")
        seen.add(r.endpoint)
    return remotes


# -- the whole profile -------------------------------------------------------------------


def profile_from_dict(
    d: Any,
    *,
    detect_cpu_if_missing: bool = True,
    measure_bandwidth: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
    origin: str = "the hardware profile",
) -> HardwareProfile:
    """A HardwareProfile from its JSON form (CONTRACT.md), gaps filled in.

    GPU figures that are null or missing come from the bundled table by name; a missing
    vram_free_bytes means all of it is free. CPU figures that are missing are detected on
    this machine (RAM bandwidth measured or read from the cache) unless
    `detect_cpu_if_missing` is False, in which case cores, threads and ram_total_bytes are
    required. Raises BadInputError with one sentence for anything malformed.
    """
    if not isinstance(d, dict):
        raise BadInputError(
            f'{origin[0].upper()}{origin[1:]} must be a JSON object with "cpu" and/or '
            f'"gpus", not {type(d).__name__ if d is not None else "null"}.'
        )
    warnings: list[str] = []
    given = d.get("warnings")
    if given is not None:
        if not isinstance(given, list) or not all(isinstance(w, str) for w in given):
            raise BadInputError(f"In {origin}, warnings must be a list of strings.")
        warnings.extend(given)
    gpus_raw = d.get("gpus")
    if gpus_raw is None:
        gpus_raw = []
    if not isinstance(gpus_raw, list):
        raise BadInputError(f"In {origin}, gpus must be a list of GPU objects.")
    gpus = tuple(_gpu_from_dict(g, i, origin, warnings) for i, g in enumerate(gpus_raw))
    cpu = _cpu_from_dict(
        d.get("cpu"),
        origin,
        detect_if_missing=detect_cpu_if_missing,
        measure_bandwidth=measure_bandwidth,
        cache_dir=cache_dir,
        warnings=warnings,
    )
    cpu, gpus = _one_memory_pool(d, cpu, gpus)
    fields = _Fields(d, "", origin)
    backend = fields.str_("backend", BACKENDS)
    if backend is None:
        backend = backend_for_gpus(gpus)
    elif backend != "cpu" and not gpus:
        raise BadInputError(f'In {origin}, backend is "{backend}" but no GPU is listed.')
    sycl_f16 = _sycl_f16(fields, backend, origin)
    remotes = remotes_from_list(d.get("remotes"), origin, warnings)
    return HardwareProfile(cpu=cpu, gpus=gpus, backend=backend, warnings=tuple(warnings),
                           remotes=remotes, sycl_f16=sycl_f16)


def _one_memory_pool(d: dict, cpu: CPUInfo, gpus: tuple[GPUInfo, ...]) -> tuple[CPUInfo, tuple[GPUInfo, ...]]:
    """A profile that names one GPU sharing its system's memory (DGX Spark's GB10, Strix
    Halo, an Apple chip, a Jetson) and gives neither its RAM nor the GPU's memory plans that
    chip's machine: one pool, the table's, as the RAM, which the GPU's share comes out of (as
    the app's what-if selector plans it), not this machine's RAM beside a pool of its own."""
    raw_cpu, raw_gpus = d.get("cpu") or {}, d.get("gpus") or []
    if len(gpus) != 1 or raw_cpu.get("ram_total_bytes") is not None or raw_gpus[0].get("vram_total_bytes") is not None:
        return cpu, gpus
    pool = shared_memory_bytes(gpus[0].name)
    if pool is None:
        return cpu, gpus
    return cpu.with_ram_total(pool), (dataclasses.replace(gpus[0], unified_memory=True),)


def load_profile(path: str | os.PathLike[str], **kwargs: Any) -> HardwareProfile:
    """Read a hardware profile JSON file; BadInputError if unreadable or malformed."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise BadInputError(f"Cannot read hardware profile {p}: {reason}.") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInputError(
            f"Cannot read hardware profile {p}: invalid JSON at line {exc.lineno}, column "
            f"{exc.colno} ({exc.msg})."
        ) from exc
    kwargs.setdefault("origin", f"hardware profile {p}")
    return profile_from_dict(data, **kwargs)


def profile_to_json(profile: HardwareProfile, *, indent: int | None = 2) -> str:
    return json.dumps(profile.to_dict(), indent=indent)
