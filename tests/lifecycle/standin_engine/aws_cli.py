"""A stand-in `aws` for the lifecycle tests: it answers `aws --version` only (what `up`'s preflight
asks; the stand-in kubectl needs no token) and fails any other call loudly, so a test notices when
something new calls the AWS CLI. The version printed comes from STANDIN_AWS_CLI_VERSION (default a
current v2), in the AWS CLI's own `--version` format."""

from __future__ import annotations

import os
import sys


def main() -> None:
    args = sys.argv[1:]
    if args == ["--version"]:
        version = os.environ.get("STANDIN_AWS_CLI_VERSION", "2.31.0")
        print(f"aws-cli/{version} Python/3.13.7 Linux/6.8.0 exe/x86_64.ubuntu.24")
        return
    print(f"stand-in aws: unexpected call {args}", file=sys.stderr)
    sys.exit(252)
