"""Pure builders: blueprint + platform facts -> Kubernetes objects as plain dicts."""
