"""The platform's own namespaces under the VPC CNI's strict NetworkPolicy mode.

The platform runs the VPC CNI with ``NETWORK_POLICY_ENFORCING_MODE=strict`` (`cluster.py`,
issue 53 finding 7): in the default, standard mode a new pod starts default-allow until its
policies are programmed, so a workload pod could talk to anything for its first moments. In strict
mode it starts default-deny instead; but so does every pod that no NetworkPolicy selects, for good
(aws/aws-network-policy-agent v1.4.1 ``pkg/rpc/rpc_handler.go``: ``podState = DEFAULT_DENY`` in
strict mode, and ``controllers/policyendpoints_controller.go`` keeps it when no policy applies;
the EKS user guide ``cni-network-policy-configure``: "you must have a network policy for every
endpoint that your pods need to access in your cluster ... this requirement applies to the
CoreDNS pods"). Host-network pods (aws-node, kube-proxy, the Pod Identity agent) are not affected.

So every namespace a platform add-on runs in (the add-on registry's namespaces) gets one policy,
`llmctl-platform-allow-all`, that selects all its pods and admits everything in and out: the
platform's own pods keep the reach they had, stated, and it exists before their pods start
(kube-system's before the core nodes, the others before their chart or add-on). The workload
namespaces keep their own policies (`infra/workload/builders/network_policy.py`). A namespace
someone adds to the cluster by hand needs policies of its own, or its pods reach nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

import pulumi
import pulumi_kubernetes as k8s

ALLOW_ALL = "llmctl-platform-allow-all"
KUBE_SYSTEM = "kube-system"


def allow_all_spec() -> k8s.networking.v1.NetworkPolicySpecArgsDict:
    """Every pod of the namespace, everything in and out (what standard mode gives a pod no policy selects)."""
    return {"pod_selector": {}, "policy_types": ["Ingress", "Egress"], "ingress": [{}], "egress": [{}]}


def allow_namespace(
    name: str, namespace: str, opts: pulumi.ResourceOptions, *, after: Iterable[pulumi.Resource] = ()
) -> k8s.networking.v1.NetworkPolicy:
    """The allow-all policy of one platform namespace. A namespace other than kube-system is made first
    with a NamespacePatch: a Patch resource is created by a server-side apply, which creates the object
    when it is missing and leaves one a chart made alone (pulumi/pulumi-kubernetes v4.32.0
    ``provider/pkg/await/await.go``, ``Creation``: a Patch resource always sends an apply PATCH), so
    the policy can precede the chart that installs into the namespace, on a new cluster or an old one."""
    depends = list(after)
    if namespace != KUBE_SYSTEM:
        made = k8s.core.v1.NamespacePatch(
            f"{name}-namespace",
            metadata={"name": namespace, "labels": {"llmctl.dev/platform": "true"}},
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=depends)),
        )
        depends = [*depends, made]
    return k8s.networking.v1.NetworkPolicy(
        f"{name}-allow-all",
        metadata={"name": ALLOW_ALL, "namespace": namespace, "labels": {"llmctl.dev/platform": "true"}},
        spec=allow_all_spec(),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=depends)),
    )
