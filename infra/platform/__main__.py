"""Entry point for the plain `pulumi` CLI (Pulumi.yaml at the repo root points here).

Reads the stack config written by `PlatformConfig.to_pulumi_config()` (or set by hand with
`pulumi config set llmctl:<key> ...`, see docs/platform.md) and builds the platform.
"""

from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.program import build_platform

build_platform(PlatformConfig.from_pulumi_config())
