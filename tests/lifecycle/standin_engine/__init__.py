"""A stand-in `pulumi` executable for the tests (never shipped): the engine at the process boundary.

It serves a ResourceMonitor and an Engine log endpoint over gRPC, calls the Automation API's
LanguageRuntime.Run on the `--client` address, so our inline programs run through the SDK's real
gRPC path; keeps per-stack state in the file backend, diffs registrations against it, writes the
engine's JSON event stream and deletes in dependency order. See docs/testing.md.
"""
