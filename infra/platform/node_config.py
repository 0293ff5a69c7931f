"""The nodeadm NodeConfig a pool's EC2NodeClass adds to its nodes' userData (AL2023).

One setting today, for the Neuron pools: containerd's `device_ownership_from_security_context`, so
that a device the device plugin gives a pod appears in its container owned by the pod's
`runAsUser`/`runAsGroup` instead of the host's owner. Why the Neuron pools want it, from source:

- The Neuron driver makes `/dev/neuron<N>` with `class_create` and no `devnode` mode
  (aws-neuron/aws-neuron-driver `neuron_cdev.c`, commit fca19f7d): root's, 0600, unless udev says
  otherwise. Its DKMS package does (`dkms.conf` PRE_INSTALL `preinstall`: a rule giving every
  `neuron*` node mode 0666), and the EKS AMIs' Neuron variant installs that package, so there any user
  opens them today. Neuron's own security guide tells hosts to replace it with group `neuron`, 0660;
  a host that follows it (or has no rule) would refuse a non-root pod. With the setting below the
  pod's user owns the node whatever mode the host chose, so the pods' user does not depend on it.
  Opening a node needs no capability: the driver's only `capable()` check guards mapping device
  memory outside its own allocations (`neuron_mmap.c`, `nmmap_dm_root`, CAP_SYS_RAWIO).
- containerd's CRI copies a device's uid/gid from the host unless `device_ownership_from_security_context`
  is true, when it takes them from the container's security context (containerd
  `internal/cri/opts/spec_linux.go` `WithDevices`; the option's doc in its CRI config). Off by default,
  and off in the EKS AMI's own config (awslabs/amazon-eks-ami commit 81fec2e8,
  `nodeadm/test/e2e/cases/containerdv2-config/expected-containerd-configv2.toml`).

How it reaches the node:

- Karpenter (aws/karpenter-provider-aws v1.14.1, `pkg/providers/amifamily/bootstrap/nodeadm.go`) takes an
  EC2NodeClass's `userData` that parses as YAML as a NodeConfig part of the MIME archive and appends its
  own NodeConfig (cluster, kubelet) after it; nodeadm merges the parts.
- nodeadm (`nodeadm/internal/containerd/config.go`) merges `spec.containerd.config` into its template.
  Written in containerd's config version 2 (the `io.containerd.grpc.v1.cri` plugin), it works on either
  containerd of the AMI: used as is on containerd 1.7; on containerd 2.x nodeadm renders its version 2
  template, merges, and runs `containerd config migrate` (a version 3 snippet would fail on 1.7).

A change of `userData` is a change of the EC2NodeClass's hashed spec: Karpenter drifts and replaces the
pool's running nodes (`pkg/apis/v1/ec2nodeclass.go`, `Hash`), so adding it replaces Neuron nodes
built before it, within the NodePool's disruption budget.
"""

from __future__ import annotations

from llmctl.blueprints.pools import PoolSpec

NODECONFIG_API = "node.eks.aws/v1alpha1"
#: containerd's CRI plugin settings, config version 2 (nodeadm migrates them on containerd 2.x)
DEVICE_OWNERSHIP_TOML = (
    '[plugins."io.containerd.grpc.v1.cri"]\ndevice_ownership_from_security_context = true\n'
)


def user_data(pool: PoolSpec) -> str | None:
    """The EC2NodeClass `userData` of a pool (a nodeadm NodeConfig), or None when it needs none."""
    if not pool.device_ownership:
        return None
    toml = "".join(f"        {line}\n" for line in DEVICE_OWNERSHIP_TOML.splitlines())
    return f"apiVersion: {NODECONFIG_API}\nkind: NodeConfig\nspec:\n  containerd:\n    config: |\n{toml}"
