"""A stand-in `docker` CLI for the image tests: only the calls `llmctl images build` makes, with
their exact flags; anything else fails as the real CLI does. Records calls to $STANDIN_DOCKER_DIR."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(os.environ["STANDIN_DOCKER_DIR"])


def fail(message: str, code: int = 125) -> None:
    print(message, file=sys.stderr)
    sys.exit(code)


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
        if "--push" in seen:
            registry = str(seen["-t"]).split("/", 1)[0]
            logins = [json.loads(line) for line in (ROOT / "calls.jsonl").read_text().splitlines()]
            if not any(c.get("registry") == registry for c in logins):
                fail(f"ERROR: failed to push {seen['-t']}: no basic auth credentials", 1)
        Path(str(seen["--metadata-file"])).write_text(
            json.dumps({"containerimage.digest": "sha256:" + "ab" * 32})
        )
        entry.update(seen)
    else:
        fail(f"docker: '{' '.join(args[:2])}' is not a docker command.\nSee 'docker --help'", 1)
    with (ROOT / "calls.jsonl").open("a") as log:
        log.write(json.dumps(entry) + "\n")


if __name__ == "__main__":
    main()
