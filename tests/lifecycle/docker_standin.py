"""A stand-in `docker` CLI for the image tests: only the calls `llmctl images build` makes, with
their exact flags; anything else fails as the real CLI does. Records calls to $STANDIN_DOCKER_DIR.

`buildx build --push` really pushes to ECR (moto's, through $AWS_ENDPOINT_URL): the image (one
layer holding the Dockerfile, its config and its manifest) goes up with the ECR layer-upload calls
and PutImage, as the Docker client's registry push does; the digest written to --metadata-file is
the sha256 of the manifest pushed, and a push to a repository that does not exist fails."""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import tarfile
from pathlib import Path

ROOT = Path(os.environ["STANDIN_DOCKER_DIR"])


def fail(message: str, code: int = 125) -> None:
    print(message, file=sys.stderr)
    sys.exit(code)


LAYER = "application/vnd.docker.image.rootfs.diff.tar"
CONFIG = "application/vnd.docker.container.image.v1+json"
MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def image(dockerfile: Path, build_arg: str) -> dict[str, bytes]:
    """The blobs of the built image: one layer (the Dockerfile, reproducible), the config."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        data = dockerfile.read_bytes()
        info = tarfile.TarInfo("Dockerfile")
        info.size, info.mtime = len(data), 0
        tar.addfile(info, io.BytesIO(data))
    layer = buffer.getvalue()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Labels": {"build-arg": build_arg}},
        "rootfs": {"type": "layers", "diff_ids": [sha256(layer)]},
    }
    return {"layer": layer, "config": json.dumps(config, sort_keys=True).encode()}


def manifest(blobs: dict[str, bytes]) -> bytes:
    def ref(media_type: str, data: bytes) -> dict[str, object]:
        return {"mediaType": media_type, "size": len(data), "digest": sha256(data)}

    document = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": ref(CONFIG, blobs["config"]),
        "layers": [ref(LAYER, blobs["layer"])],
    }
    return json.dumps(document, indent=3).encode()


def manifest_digest(tag: str, blobs: dict[str, bytes]) -> str:
    """A --load build: the digest of the image it would push."""
    return sha256(manifest(blobs))


def push_to_ecr(tag: str, blobs: dict[str, bytes]) -> str:
    """Upload the blobs and put the manifest under the tag; the manifest's digest."""
    import boto3
    from botocore.exceptions import ClientError

    registry, rest = tag.split("/", 1)
    repository, reference = rest.rsplit(":", 1)
    region = registry.split(".dkr.ecr.", 1)[1].split(".", 1)[0]
    ecr = boto3.client("ecr", region_name=region)
    document = manifest(blobs)
    try:
        for data in blobs.values():
            upload = ecr.initiate_layer_upload(repositoryName=repository)["uploadId"]
            ecr.upload_layer_part(
                repositoryName=repository,
                uploadId=upload,
                partFirstByte=0,
                partLastByte=len(data) - 1,
                layerPartBlob=data,
            )
            ecr.complete_layer_upload(repositoryName=repository, uploadId=upload, layerDigests=[sha256(data)])
        ecr.put_image(
            repositoryName=repository,
            imageManifest=document.decode(),
            imageManifestMediaType=MANIFEST,
            imageTag=reference,
            imageDigest=sha256(document),
        )
    except ClientError as error:
        # the same image under the same tag again is no change (docker reports the layers exist)
        if error.response["Error"]["Code"] != "ImageAlreadyExistsException":
            fail(f"ERROR: failed to push {tag}: {error.response['Error']['Message']}", 1)
    return sha256(document)


def main() -> None:
    args = sys.argv[1:]
    entry: dict[str, object] = {"args": args}
    if args == ["info", "--format", "{{.ServerVersion}}"]:
        print("27.3.1")
    elif args[:1] == ["login"]:
        if len(args) != 5 or args[1] != "--username" or args[3] != "--password-stdin":
            fail(f"unknown login arguments: {args[1:]}")
        password = sys.stdin.read()
        if not password.strip():
            fail("Error: Cannot perform an interactive login from a non TTY device", 1)
        entry.update(user=args[2], registry=args[4], password=password)
        print("Login Succeeded")
    elif args[:2] == ["buildx", "build"]:
        flags = {
            "--platform": 1,
            "-f": 1,
            "--build-arg": 1,
            "-t": 1,
            "--metadata-file": 1,
            "--push": 0,
            "--load": 0,
        }
        rest, seen, i = args[2:], {}, 0
        while i < len(rest) - 1:
            flag = rest[i]
            if flag not in flags:
                fail(f"unknown flag: {flag}")
            seen[flag] = rest[i + 1] if flags[flag] else True
            i += 1 + flags[flag]
        context = Path(rest[-1])
        if not context.is_dir() or not Path(str(seen.get("-f"))).is_file():
            fail("ERROR: unable to prepare context: path not found", 1)
        if ("--push" in seen) == ("--load" in seen):
            fail("ERROR: exactly one of --push or --load", 1)
        push = push_to_ecr if "--push" in seen else manifest_digest
        if "--push" in seen:
            registry = str(seen["-t"]).split("/", 1)[0]
            logins = [json.loads(line) for line in (ROOT / "calls.jsonl").read_text().splitlines()]
            if not any(c.get("registry") == registry for c in logins):
                fail(f"ERROR: failed to push {seen['-t']}: no basic auth credentials", 1)
        digest = push(str(seen["-t"]), image(Path(str(seen["-f"])), str(seen.get("--build-arg", ""))))
        Path(str(seen["--metadata-file"])).write_text(json.dumps({"containerimage.digest": digest}))
        entry.update(seen)
    else:
        fail(f"docker: '{' '.join(args[:2])}' is not a docker command.\nSee 'docker --help'", 1)
    with (ROOT / "calls.jsonl").open("a") as log:
        log.write(json.dumps(entry) + "\n")


if __name__ == "__main__":
    main()
