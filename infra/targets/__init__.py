"""Deployment targets (eks, kubeconfig, local) behind one interface; see :mod:`.registry`."""
