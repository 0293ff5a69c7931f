"""The offline plan: the programs run under Pulumi's mocks, the plan document, its diff and renderings, and
the policy checks over the registered graph. Modules are imported one by one (none here)."""
