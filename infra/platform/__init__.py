"""The platform stack: VPC, EKS, Karpenter and its NodePools, device plugins, KubeRay, ingress,
observability and the S3 cache, as one Pulumi program made of one ComponentResource per concern.

Importing this package creates nothing; :func:`llmctl.infra.platform.program.build_platform` does.
"""
