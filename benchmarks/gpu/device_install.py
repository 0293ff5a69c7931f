"""The run's first steps on the device: ``recv`` (the carried parts into place) and ``setup`` (the parts
checked against their sums, unpacked, the wheels installed beside the machine's own torch, the tiny
model made, the versions recorded)."""

from __future__ import annotations

import argparse
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import time

from device_base import (
    CARRY,
    MODEL,
    PARTS,
    SITE,
    SITE2,
    SITE22,
    SITE_NCCL,
    TINY_ARGS,
    WHEELS,
    env,
    record,
)


def recv(_: argparse.Namespace) -> None:
    PARTS.mkdir(parents=True, exist_ok=True)
    for part in sorted(CARRY.glob("p[0-9][0-9]")):
        shutil.copy(part, PARTS / part.name)
    print("parts here:", sorted(p.name for p in PARTS.glob("p??")), flush=True)


def setup(_: argparse.Namespace) -> None:
    sums = (CARRY / "sums.txt").read_text().split("\n")
    for line in filter(None, sums):
        digest, name = line.split()
        got = hashlib.sha256((PARTS / name).read_bytes()).hexdigest()
        if got != digest:
            raise SystemExit(f"part {name}: sha256 {got} != {digest}; carry it again")
    WHEELS.mkdir(parents=True, exist_ok=True)
    started = time.time()
    cat = subprocess.Popen(["cat", *sorted(str(p) for p in PARTS.glob("p??"))], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(WHEELS)], stdin=cat.stdout, check=True)
    cat.wait()
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
    subprocess.run([*pip, "--target", str(SITE), *glob.glob(f"{WHEELS}/v26/*.whl")], check=True)
    if v22 := glob.glob(f"{WHEELS}/v22/*.whl"):  # Triton's vLLM: absent when prepared with --sets v26
        subprocess.run([*pip, "--target", str(SITE22), *v22], check=True)
    subprocess.run([*pip, "--target", str(SITE2), *glob.glob(f"{WHEELS}/llmctl_eks-*.whl")], check=True)
    if nccl := glob.glob(f"{WHEELS}/nccl/*.whl"):  # --sets ...,nccl: apart, loaded by start-pp1 alone
        subprocess.run([*pip, "--target", str(SITE_NCCL), *nccl], check=True)
    for site in (SITE, SITE22):  # the machine's own torch, triton and CUDA libraries stay in use
        for pattern in ("torch", "torch-*", "nvidia", "nvidia_*", "triton", "triton-*"):
            for path in site.glob(pattern):
                shutil.rmtree(path, ignore_errors=True)
    subprocess.run(
        [sys.executable, "-m", "llmctl", "models", "tiny", str(MODEL), *TINY_ARGS, "--tensor-parallel", "4"],
        env=env(),
        check=True,
    )
    facts = subprocess.run(
        [sys.executable, "-c", FACTS], env=env(), capture_output=True, text=True, check=False
    )
    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    record(
        "setup",
        seconds=round(time.time() - started, 1),
        gpus=smi.stdout.strip().splitlines(),
        versions=facts.stdout.strip(),
        errors=facts.stderr[-800:],
        cpus=os.cpu_count(),
    )


FACTS = """
import importlib, json, platform, torch
def version(name):  # None where a set left it out (--sets triton carries no Ray and no vLLM 0.26)
    try:
        return importlib.import_module(name).__version__
    except ImportError:
        return None
print(json.dumps({"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
  "vllm": version("vllm"), "ray": version("ray"), "transformers": version("transformers")}))
"""
